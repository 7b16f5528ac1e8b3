package eventstore_test

import (
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDecodeDefinitionDescription: DecodeDefinition reads description as a
// string and refuses any other type, naming the field.
func TestDecodeDefinitionDescription(t *testing.T) {
	body := `{"projectionName":"n","description":"Orders per customer.\nOne line more.","feedName":"order",
		"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.n"}]}]}`
	d, err := eventstore.DecodeDefinition([]byte(body))
	require.NoError(t, err)
	assert.Equal(t, "Orders per customer.\nOne line more.", d.Description)

	d, err = eventstore.DecodeDefinition([]byte(strings.Replace(body, `"Orders per customer.\nOne line more."`, `null`, 1)))
	require.NoError(t, err, "null is no description")
	assert.Empty(t, d.Description)

	for _, bad := range []string{`12`, `true`, `["a"]`, `{"text":"a"}`} {
		_, err := eventstore.DecodeDefinition([]byte(strings.Replace(body, `"Orders per customer.\nOne line more."`, bad, 1)))
		f := validationFields(t, err)
		if assert.Len(t, f, 1, "description %s", bad) {
			assert.Equal(t, "description", f[0].Field)
			assert.Equal(t, "must be a string", f[0].Message)
		}
	}
}

// TestDescriptionIsStoredAndReturned: Create and Put store the description
// with the definition; Definition and Definitions return it.
func TestDescriptionIsStoredAndReturned(t *testing.T) {
	ctx := t.Context()
	_, p := newProjector(t)
	d := countDef("n", eventstore.Function{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"})
	d.Description = "Orders placed, per customer.\n\tTabs and newlines are kept; so is ünïcode ✓."
	require.NoError(t, p.Create(ctx, d))
	plain := countDef("plain", eventstore.Function{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"})
	res, err := p.Put(ctx, plain)
	require.NoError(t, err)
	require.Equal(t, eventstore.PutCreated, res)

	got, err := p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, d, got)
	defs, err := p.Definitions(ctx)
	require.NoError(t, err)
	require.Len(t, defs, 2)
	assert.Equal(t, d.Description, defs[0].Description)
	assert.Empty(t, defs[1].Description, "a definition without a description has none")
}

// TestDescriptionIsBounded: a description longer than MaxDescriptionBytes,
// invalid UTF-8 or with control characters other than tab and newline is
// refused with a *ValidationError naming description, and nothing is
// stored.
func TestDescriptionIsBounded(t *testing.T) {
	ctx := t.Context()
	_, p := newProjector(t)
	d := countDef("n", eventstore.Function{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"})

	// Exactly the bound, in multi-byte runes, is accepted.
	d.Description = strings.Repeat("é", eventstore.MaxDescriptionBytes/2)
	require.Len(t, d.Description, eventstore.MaxDescriptionBytes)
	require.NoError(t, p.Create(ctx, d))

	for _, tc := range []struct{ desc, want string }{
		{strings.Repeat("a", eventstore.MaxDescriptionBytes+1), "must be at most 1000 bytes long"},
		{"bad \xff byte", "must be valid UTF-8"},
		{"a\x00b", `must not contain '\x00'`},
		{"carriage\rreturn", `must not contain '\r'`},
		{"delete\x7f", `must not contain '\x7f'`},
		{"c1 \u0085 control", `must not contain '\u0085'`},
	} {
		bad := countDef("bad", eventstore.Function{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"})
		bad.Description = tc.desc
		err := p.Create(ctx, bad)
		f := validationFields(t, err)
		if assert.Len(t, f, 1, "description %q", tc.desc) {
			assert.Equal(t, "description", f[0].Field)
			assert.Contains(t, f[0].Message, tc.want)
		}
		_, err = p.Put(ctx, bad)
		f = validationFields(t, err)
		if assert.Len(t, f, 1, "Put with description %q", tc.desc) {
			assert.Equal(t, "description", f[0].Field)
		}
		// Nor may Put replace a stored definition with it.
		bad.Name = "n"
		_, err = p.Put(ctx, bad)
		validationFields(t, err)
	}
	defs, err := p.Definitions(ctx)
	require.NoError(t, err)
	require.Len(t, defs, 1, "no refused definition is stored")
	assert.Equal(t, d.Description, defs[0].Description)
}
