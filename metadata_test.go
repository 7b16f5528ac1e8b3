package eventstore_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// TestProjectionReadsMetadata: $.metadata.correlationId, causationId and
// the caller's keys are readable in eventSelector and eventFilter beside
// the service's own fields; a key the event lacks is a missing input.
func TestProjectionReadsMetadata(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	require.NoError(t, p.Create(ctx, eventstore.Definition{Name: "traced", Feed: "order", Handlers: []eventstore.Handler{{
		EventType: "Placed", Functions: []eventstore.Function{
			fn("set", "$.projection.correlation", "$.metadata.correlationId"),
			fn("set", "$.projection.cause", "$.metadata.causationId"),
			fn("set", "$.projection.tenant", "$.metadata.tenant"),
			fn("set", "$.projection.region", "$.metadata['region.code']"),
			fn("set", "$.projection.id", "$.metadata.aggregateId"),
			{Name: "inc", TargetSelector: "$.projection.acme", EventFilter: "$.metadata.tenant == 'acme'"},
			{Name: "inc", TargetSelector: "$.projection.caused", EventFilter: "$.metadata.causationId == 'cmd-1'"},
		},
	}}}))
	first := ev("Placed", `{"total": 1}`)
	first.Metadata = eventstore.Metadata{CorrelationID: "corr-1", CausationID: "cmd-1",
		Values: map[string]string{"tenant": "acme", "region.code": "eu-west"}}
	second := ev("Placed", `{"total": 2}`)
	second.Metadata = eventstore.Metadata{CorrelationID: "corr-2", Values: map[string]string{"tenant": "other"}}
	save(t, st, "order", "o1", first)
	save(t, st, "order", "o1", second)
	save(t, st, "order", "o2", ev("Placed", `{"total": 3}`)) // no metadata

	got, err := p.Single(ctx, "traced", "o1")
	require.NoError(t, err)
	assert.Equal(t, `"corr-2"`, field(t, got, "correlation"), "set from $.metadata.correlationId, the last event's")
	assert.Equal(t, `"cmd-1"`, field(t, got, "cause"), "the second event has no causationId: the field keeps the first's")
	assert.Equal(t, `"other"`, field(t, got, "tenant"))
	assert.Equal(t, `"eu-west"`, field(t, got, "region"), "a key with a dot, read with a quoted step")
	assert.Equal(t, `"o1"`, field(t, got, "id"), "the service's own fields still read as before")
	assert.Equal(t, `"1"`, field(t, got, "acme"), "a filter on a metadata key")
	assert.Equal(t, `"1"`, field(t, got, "caused"))

	got, err = p.Single(ctx, "traced", "o2")
	require.NoError(t, err)
	assert.JSONEq(t, `{"id": "o2"}`, string(got.Data), "an event without metadata sets nothing from it")
}

// TestMetadataSelectorsRefused: $.metadata paths that can name neither a
// field of the service nor a key Store.Save accepts are refused when the
// definition is created.
func TestMetadataSelectorsRefused(t *testing.T) {
	ctx := context.Background()
	_, p := newProjector(t)
	for _, sel := range []string{"$.metadata.a.b", "$.metadata['bad key']", "$.metadata.projectionName", "$.metadata[0]", "$.metadata"} {
		err := p.Create(ctx, eventstore.Definition{Name: "bad", Feed: "order", Handlers: []eventstore.Handler{{
			EventType: "Placed", Functions: []eventstore.Function{fn("set", "$.projection.x", sel)},
		}}})
		var ve *eventstore.ValidationError
		if assert.ErrorAs(t, err, &ve, sel) {
			assert.Equal(t, "handlers[0].functions[0].eventSelector", ve.Fields[0].Field, sel)
		}
	}
}

// TestSaveKeepsMetadataOutOfReservedKeys: a key of Values that would shadow
// a $.metadata field is refused by Save, naming it.
func TestSaveKeepsMetadataOutOfReservedKeys(t *testing.T) {
	st, _ := newProjector(t)
	e := ev("Placed", "")
	e.Metadata = eventstore.Metadata{Values: map[string]string{"timestamp": "1"}}
	_, err := st.Save(context.Background(), "order", "o1", []eventstore.NewEvent{e}, nil)
	var ve *eventstore.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, `events[0].metadata["timestamp"]`, ve.Fields[0].Field)
	assert.Contains(t, ve.Fields[0].Message, "reserved")
}

// TestFunctionBodyCarriesMetadata: an external function's body has the
// event's metadata as event.metadata, and none for an event without.
func TestFunctionBodyCarriesMetadata(t *testing.T) {
	ctx := context.Background()
	g := &goCaller{fns: map[string]func(context.Context, eventstore.FunctionCall) (eventstore.FunctionResult, error){
		"go:fold": func(_ context.Context, c eventstore.FunctionCall) (eventstore.FunctionResult, error) {
			return eventstore.FunctionResult{State: json.RawMessage(`{}`)}, nil
		}}}
	st := newStore(t)
	p := eventstore.NewProjector(st, &eventstore.ProjectorOptions{Functions: g})
	require.NoError(t, p.Create(ctx, extDef("p", "go:fold")))
	e := ev("Placed", "")
	e.Metadata = eventstore.Metadata{CorrelationID: "corr-1", Values: map[string]string{"tenant": "acme"}}
	save(t, st, "order", "o1", e)
	save(t, st, "order", "o1", ev("Placed", ""))
	_, err := p.Single(ctx, "p", "o1")
	require.NoError(t, err)
	require.Len(t, g.calls, 2)
	assert.JSONEq(t, `{"correlationId":"corr-1","tenant":"acme"}`, gjson.GetBytes(g.calls[0].Body, "event.metadata").Raw)
	assert.Empty(t, gjson.GetBytes(g.calls[1].Body, "event.metadata").Raw, "an event without metadata has none in the body")
}
