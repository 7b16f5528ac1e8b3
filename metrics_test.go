package eventstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// countingMetrics records what a Store reports.
type countingMetrics struct {
	mu                              sync.Mutex
	batches, events, conflicts      int
	storageErrors                   map[string]int
	projectedEvents, projectedFails map[string]int
}

func (m *countingMetrics) Saved(events int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batches++
	m.events += events
}

func (m *countingMetrics) Conflict() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.conflicts++
}

func (m *countingMetrics) StorageError(op string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.storageErrors[op]++
}

func (m *countingMetrics) Projected(name string, events, failed int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.projectedEvents[name] += events
	m.projectedFails[name] += failed
}

// failingLoad is a memory storage whose loads fail as an unreachable
// database would.
type failingLoad struct{ storage.Storage }

func (f failingLoad) Load(context.Context, storage.LoadQuery) (eventstore.Aggregate, error) {
	return eventstore.Aggregate{}, errors.New("connection refused")
}

func mev(typ, data string) eventstore.NewEvent {
	return eventstore.NewEvent{ID: uuid.NewString(), Type: typ, Data: []byte(data)}
}

// TestMetricsReportSavesConflictsProjectionsAndStorageErrors: a Store with
// Options.Metrics reports stored batches and events (not duplicates),
// conflicts, projector commits with their failed events, and storage
// failures that are not the caller's.
func TestMetricsReportSavesConflictsProjectionsAndStorageErrors(t *testing.T) {
	ctx := context.Background()
	m := &countingMetrics{storageErrors: map[string]int{}, projectedEvents: map[string]int{}, projectedFails: map[string]int{}}
	st, err := eventstore.New(failingLoad{memory.New()}, &eventstore.Options{Metrics: m})
	require.NoError(t, err)
	defer st.Close()

	first := []eventstore.NewEvent{mev("Added", `{"n":"1"}`), mev("Added", `{"n":"x"}`)}
	_, err = st.Save(ctx, "cart", "c-1", first, nil)
	require.NoError(t, err)
	_, err = st.Save(ctx, "cart", "c-1", first, nil) // a retry: duplicate
	require.NoError(t, err)
	_, err = st.Save(ctx, "cart", "c-1", []eventstore.NewEvent{mev("Added", `{}`)},
		&eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(0)})
	require.ErrorIs(t, err, eventstore.ErrConflict)
	_, err = st.SaveAll(ctx, "cart", []eventstore.Batch{
		{AggregateID: "c-2", Events: []eventstore.NewEvent{mev("Added", `{"n":"2"}`)}},
		{AggregateID: "c-3", Events: []eventstore.NewEvent{mev("Added", `{"n":"3"}`)}},
	})
	require.NoError(t, err)
	_, err = st.Load(ctx, "cart", "c-1")
	require.Error(t, err)

	p := eventstore.NewProjector(st, nil)
	var def eventstore.Definition
	err = json.Unmarshal([]byte(`{"projectionName":"total","feedName":"cart","aggregated":true,
		"handlers":[{"eventType":"Added","functions":[{"function":"add","targetSelector":"$.projection.sum","eventSelector":"$.event.n"}]}]}`), &def)
	require.NoError(t, err)
	require.NoError(t, p.Create(ctx, def))
	require.NoError(t, p.CatchUp(ctx))

	m.mu.Lock()
	defer m.mu.Unlock()
	assert.Equal(t, 3, m.batches, "batches stored, the duplicate not counted")
	assert.Equal(t, 4, m.events)
	assert.Equal(t, 1, m.conflicts)
	assert.Equal(t, map[string]int{"Load": 1}, m.storageErrors)
	assert.Equal(t, 4, m.projectedEvents["total"])
	assert.Equal(t, 1, m.projectedFails["total"], `"x" is not a number`)
}
