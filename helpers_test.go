package eventstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPutResultString(t *testing.T) {
	assert.Equal(t, "created", eventstore.PutCreated.String())
	assert.Equal(t, "unchanged", eventstore.PutUnchanged.String())
	assert.Equal(t, "replacing", eventstore.PutReplacing.String())
	assert.Equal(t, "updated", eventstore.PutUpdated.String())
	assert.Equal(t, "PutResult(9)", eventstore.PutResult(9).String())
}

func TestNewEventID(t *testing.T) {
	ctx := context.Background()
	st, _ := newProjector(t)
	a, b := eventstore.NewEventID(), eventstore.NewEventID()
	assert.NotEqual(t, a, b)
	_, err := st.Save(ctx, "order", "o1", []eventstore.NewEvent{{ID: a, Type: "Placed"}, {ID: b, Type: "Placed"}}, nil)
	require.NoError(t, err, "NewEventID makes ids a save accepts")
	agg, err := st.Load(ctx, "order", "o1")
	require.NoError(t, err)
	assert.Equal(t, a, agg.Events[0].ID, "stored as generated: canonical lower case")
}

// TestLiteralAndUnquotedRawData: Literal makes rawData of Go values; a
// string given without its quotes is refused with a message that says so.
func TestLiteralAndUnquotedRawData(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	assert.Equal(t, json.RawMessage(`"placed"`), eventstore.Literal("placed"))
	assert.Equal(t, json.RawMessage(`12.5`), eventstore.Literal(12.5))

	def := func(raw json.RawMessage) eventstore.Definition {
		return countDef("status", eventstore.Function{Name: eventstore.FuncSet, TargetSelector: "$.projection.status", RawData: raw})
	}
	_, err := p.Put(ctx, def(json.RawMessage("placed")))
	var ve *eventstore.ValidationError
	require.True(t, errors.As(err, &ve), "%v", err)
	require.Len(t, ve.Fields, 1)
	assert.Equal(t, "handlers[0].functions[0].rawData", ve.Fields[0].Field)
	assert.Contains(t, ve.Fields[0].Message, `a string needs its quotes, as in "\"placed\""`)
	assert.Contains(t, ve.Fields[0].Message, `eventstore.Literal("placed")`)

	_, err = p.Put(ctx, def(eventstore.Literal(make(chan int))))
	require.ErrorAs(t, err, &ve, "a value Literal cannot encode is refused")
	assert.Equal(t, "handlers[0].functions[0].rawData", ve.Fields[0].Field)

	_, err = p.Put(ctx, def(eventstore.Literal("placed")))
	require.NoError(t, err)
	save(t, st, "order", "o1", pev(1, "Placed", `{}`))
	pj, err := p.Single(ctx, "status", "o1")
	require.NoError(t, err)
	assert.JSONEq(t, `{"status":"placed"}`, string(pj.Data))
}
