package eventstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
	d.Description = strings.Repeat("é", limits.MaxDescriptionBytes/2)
	require.Len(t, d.Description, limits.MaxDescriptionBytes)
	require.NoError(t, p.Create(ctx, d))

	for _, tc := range []struct{ desc, want string }{
		{strings.Repeat("a", limits.MaxDescriptionBytes+1), "must be at most 1000 bytes long"},
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

// creationStorage records the definitions created and the projections
// reset, the two ways a projection starts again from the start of the
// feed.
type creationStorage struct {
	storage.Storage
	mu      sync.Mutex
	created []string
}

func (s *creationStorage) CreateDefinition(ctx context.Context, def storage.DefinitionRecord) error {
	s.mu.Lock()
	s.created = append(s.created, def.Name)
	s.mu.Unlock()
	return s.Storage.CreateDefinition(ctx, def)
}

func (s *creationStorage) ResetProjection(ctx context.Context, name string) error {
	s.mu.Lock()
	s.created = append(s.created, "reset "+name)
	s.mu.Unlock()
	return s.Storage.ResetProjection(ctx, name)
}

func (s *creationStorage) creations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.created...)
}

// TestPutDescriptionOnlyDoesNotRebuild: a Put that changes only the
// description stores it in place (PutUpdated): no replacement is created,
// the checkpoint and instances stay, and the projection goes on from there,
// also in a Projector (another process) that had the old definition
// cached.
func TestPutDescriptionOnlyDoesNotRebuild(t *testing.T) {
	ctx := t.Context()
	cs := &creationStorage{Storage: memory.New()}
	st, err := eventstore.New(cs, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p1, p2 := eventstore.NewProjector(st, nil), eventstore.NewProjector(st, nil)

	d := countDef("n", eventstore.Function{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"})
	d.Description = "first"
	res, err := p1.Put(ctx, d)
	require.NoError(t, err)
	require.Equal(t, eventstore.PutCreated, res)
	save(t, st, "order", "o1", pev(1, "Placed", `{}`), pev(2, "Placed", `{}`))
	require.NoError(t, p1.CatchUp(ctx, "n"))
	require.NoError(t, p2.CatchUp(ctx, "n")) // p2 has the first spec cached
	before, err := p1.Status(ctx, "n")
	require.NoError(t, err)

	d.Description = "second\nline"
	res, err = p1.Put(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutUpdated, res)
	assert.Equal(t, "updated", res.String())
	res, err = p1.Put(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutUnchanged, res, "the updated description is the stored one")
	assert.Equal(t, []string{"n"}, cs.creations(), "a description-only Put creates no replacement and resets nothing")

	status, err := p1.Status(ctx, "n")
	require.NoError(t, err)
	assert.False(t, status.Rebuilding)
	assert.Equal(t, before.Checkpoint, status.Checkpoint, "the checkpoint stays")
	for _, p := range []*eventstore.Projector{p1, p2} {
		got, err := p.Definition(ctx, "n")
		require.NoError(t, err)
		assert.Equal(t, "second\nline", got.Description)
		defs, err := p.Definitions(ctx)
		require.NoError(t, err)
		require.Len(t, defs, 1)
		assert.Equal(t, "second\nline", defs[0].Description)
	}

	// Both Projectors go on from the kept checkpoint: p2 meets the new spec
	// at its next commit and applies each event once.
	save(t, st, "order", "o1", pev(3, "Placed", `{}`))
	require.NoError(t, p2.CatchUp(ctx, "n"))
	save(t, st, "order", "o1", pev(4, "Placed", `{}`))
	require.NoError(t, p1.CatchUp(ctx, "n"))
	require.NoError(t, p2.CatchUp(ctx, "n"))
	for _, p := range []*eventstore.Projector{p1, p2} {
		pj, err := p.Single(ctx, "n", "o1")
		require.NoError(t, err)
		assert.JSONEq(t, `{"count":"4"}`, string(pj.Data))
	}
	assert.Equal(t, []string{"n"}, cs.creations())

	// Removing the description is a description-only change too.
	d.Description = ""
	res, err = p2.Put(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutUpdated, res)
	got, err := p1.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Empty(t, got.Description)
}

// TestPutDescriptionWithPendingReplacement: while a replacement rebuilds,
// a Put of the replacement with another description updates the
// replacement in place, and a Put of the current definition with another
// description drops the replacement and updates the current one.
func TestPutDescriptionWithPendingReplacement(t *testing.T) {
	ctx := t.Context()
	cs := &creationStorage{Storage: memory.New()}
	st, err := eventstore.New(cs, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, nil)
	save(t, st, "order", "o1", pev(1, "Placed", `{"total":5}`), pev(2, "Placed", `{"total":7}`))

	count := countDef("n", eventstore.Function{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"})
	count.Description = "counts"
	_, err = p.Put(ctx, count)
	require.NoError(t, err)
	require.NoError(t, p.CatchUp(ctx, "n"))

	sum := countDef("n", eventstore.Function{Name: eventstore.FuncAdd, TargetSelector: "$.projection.sum", EventSelector: "$.event.total"})
	sum.Description = "sums"
	res, err := p.Put(ctx, sum)
	require.NoError(t, err)
	require.Equal(t, eventstore.PutReplacing, res)
	created := cs.creations()
	require.Len(t, created, 2, "the replacement is created")

	sum.Description = "sums, described again"
	res, err = p.Put(ctx, sum)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutReplacing, res, "the replacement is still pending")
	assert.Equal(t, created, cs.creations(), "the pending replacement is updated in place, not created again")
	got, err := p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, "sums, described again", got.Description)
	assert.Equal(t, eventstore.FuncAdd, got.Handlers[0].Functions[0].Name)

	// Back to the current rules with a new description: the replacement
	// is dropped and the current definition keeps its instances.
	count.Description = "counts again"
	res, err = p.Put(ctx, count)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutUpdated, res)
	status, err := p.Status(ctx, "n")
	require.NoError(t, err)
	assert.False(t, status.Rebuilding, "the replacement is dropped")
	got, err = p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, count, got)
	pj, err := p.Single(ctx, "n", "o1")
	require.NoError(t, err)
	assert.JSONEq(t, `{"count":"2"}`, string(pj.Data))

	// And a replacement with a description, once built, takes over with it.
	res, err = p.Put(ctx, sum)
	require.NoError(t, err)
	require.Equal(t, eventstore.PutReplacing, res)
	require.NoError(t, p.CatchUp(ctx, "n"))
	got, err = p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, sum, got)
	pj, err = p.Single(ctx, "n", "o1")
	require.NoError(t, err)
	assert.JSONEq(t, `{"sum":"12"}`, string(pj.Data))
}
