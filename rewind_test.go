package eventstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// lossyStorage is a memory storage that can lose its tail as a database
// does after a lossy failover: with cut set, the feed and LastPosition show
// nothing after it.
type lossyStorage struct {
	storage.Storage
	cut      atomic.Int64
	mu       sync.Mutex
	onRewind func(storage.Rewind)
}

func (l *lossyStorage) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	page, err := l.Storage.ReadFeed(ctx, q)
	cut := l.cut.Load()
	if err != nil || cut == 0 {
		return page, err
	}
	kept := page.Events[:0]
	for _, e := range page.Events {
		if e.Position <= cut {
			kept = append(kept, e)
		}
	}
	page.Events = kept
	page.Head = max(q.After, min(page.Head, cut))
	return page, nil
}

func (l *lossyStorage) LastPosition(ctx context.Context) (int64, error) {
	if cut := l.cut.Load(); cut > 0 {
		return cut, nil
	}
	return l.Storage.FeedHead(ctx, "")
}

func (l *lossyStorage) OnRewind(f func(storage.Rewind)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onRewind = f
}

// rewindCounter is a countingMetrics that counts rewinds too.
type rewindCounter struct {
	countingMetrics
	rewinds atomic.Int64
}

func (m *rewindCounter) Rewound() { m.rewinds.Add(1) }

// TestRewindQueriesDoNotWaitForLostPositions: after the storage lost the
// positions a Store saved (a lossy failover), a query that catches up to
// the Store's saves answers within its usual time with what the storage
// holds, the Store counts the rewind (Rewinds and RewindMetrics), and a
// projection that had applied the lost events is rebuilt.
func TestRewindQueriesDoNotWaitForLostPositions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := &lossyStorage{Storage: memory.New()}
	m := &rewindCounter{countingMetrics: countingMetrics{storageErrors: map[string]int{}, projectedEvents: map[string]int{}, projectedFails: map[string]int{}}}
	st, err := eventstore.New(s, &eventstore.Options{Metrics: m})
	require.NoError(t, err)
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	require.NoError(t, p.Create(ctx, eventstore.Definition{
		Name: "count", Feed: "order", Aggregated: true,
		Handlers: []eventstore.Handler{{EventType: "Placed", Functions: []eventstore.Function{
			{Name: eventstore.FuncInc, TargetSelector: "$.projection.orders"},
		}}},
	}))
	var positions []int64
	for i := range 5 {
		res, err := st.Save(ctx, "order", "o-"+string(rune('a'+i)), []eventstore.NewEvent{mev("Placed", `{}`)}, nil)
		require.NoError(t, err)
		positions = append(positions, res.Position)
	}
	count := func() string {
		t.Helper()
		pj, err := p.Aggregated(ctx, "count")
		require.NoError(t, err)
		var v struct {
			Orders json.RawMessage `json:"orders"`
		}
		require.NoError(t, json.Unmarshal(pj.Data, &v))
		return string(v.Orders)
	}
	// The storage loses positions 3 to 5 before the projection applied
	// them: the query catches up to this Store's last save, which is gone.
	s.cut.Store(positions[1])
	start := time.Now()
	got := count()
	took := time.Since(start)
	assert.Equal(t, `"2"`, got, "the events kept")
	assert.Less(t, took, 2*time.Second, "the query waited for positions that are gone")
	assert.Equal(t, int64(1), st.Rewinds())
	assert.Equal(t, int64(1), m.rewinds.Load())

	// A rewind the storage reports itself, which lost position 2 that the
	// projection applied: the projection is rebuilt from what is kept.
	s.mu.Lock()
	f := s.onRewind
	s.mu.Unlock()
	require.NotNil(t, f, "the Store sets the storage's rewind handler")
	s.cut.Store(positions[0])
	f(storage.Rewind{Seen: positions[1], Found: positions[0], Resumed: positions[1] + 100})
	assert.Equal(t, int64(2), st.Rewinds())
	assert.Equal(t, int64(2), m.rewinds.Load())
	assert.Equal(t, `"1"`, count())
}

// gatedStorage is a lossyStorage whose catch-up reads (more than one
// event) wait while gate is set, so that a test can look at a projection
// in the middle of its rebuild.
type gatedStorage struct {
	*lossyStorage
	gate atomic.Pointer[chan struct{}]
}

func (g *gatedStorage) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	if ch := g.gate.Load(); ch != nil && q.Limit > 1 {
		select {
		case <-*ch:
		case <-ctx.Done():
			return storage.FeedPage{}, ctx.Err()
		}
	}
	return g.lossyStorage.ReadFeed(ctx, q)
}

// TestRewindRebuildShownInOverview: a projection reset after a rewind
// because it had applied lost events shows in Status and Overview as
// rebuilt, with why, until it caught up; one that had not applied lost
// events does not.
func TestRewindRebuildShownInOverview(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := &gatedStorage{lossyStorage: &lossyStorage{Storage: memory.New()}}
	st, err := eventstore.New(s, nil)
	require.NoError(t, err)
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	def := func(name, feed string) eventstore.Definition {
		return eventstore.Definition{Name: name, Feed: feed, Aggregated: true,
			Handlers: []eventstore.Handler{{EventType: "Placed", Functions: []eventstore.Function{
				{Name: eventstore.FuncInc, TargetSelector: "$.projection.n"},
			}}}}
	}
	require.NoError(t, p.Create(ctx, def("orders", "order")))
	require.NoError(t, p.Create(ctx, def("early", "early")))
	_, err = st.Save(ctx, "early", "e-1", []eventstore.NewEvent{mev("Placed", `{}`)}, nil)
	require.NoError(t, err)
	var positions []int64
	for i := range 5 {
		res, err := st.Save(ctx, "order", "o-"+string(rune('a'+i)), []eventstore.NewEvent{mev("Placed", `{}`)}, nil)
		require.NoError(t, err)
		positions = append(positions, res.Position)
	}
	for _, name := range []string{"orders", "early"} {
		_, err := p.Aggregated(ctx, name)
		require.NoError(t, err)
	}
	st0, err := p.Status(ctx, "orders")
	require.NoError(t, err)
	require.Empty(t, st0.RebuildReason, "before the rewind")

	// The storage loses positions 3 to 5, which "orders" applied and
	// "early" did not; the catch-up after it waits in its first read.
	s.mu.Lock()
	f := s.onRewind
	s.mu.Unlock()
	require.NotNil(t, f)
	gate := make(chan struct{})
	s.gate.Store(&gate)
	s.cut.Store(positions[1])
	f(storage.Rewind{Seen: positions[4], Found: positions[1], Resumed: positions[4] + 100})
	queried := make(chan error, 1)
	go func() {
		_, err := p.Aggregated(ctx, "orders")
		queried <- err
	}()
	var reason string
	require.Eventually(t, func() bool {
		st, err := p.Status(ctx, "orders")
		require.NoError(t, err)
		reason = st.RebuildReason
		return reason != ""
	}, 10*time.Second, 10*time.Millisecond, "Status shows no rebuild after the rewind")
	assert.Contains(t, reason, fmt.Sprintf("went back to position %d", positions[1]))
	assert.Contains(t, reason, fmt.Sprintf("up to position %d", positions[4]))
	all, err := p.Statuses(ctx)
	require.NoError(t, err)
	shown := map[string]string{}
	for _, st := range all {
		shown[st.Definition.Name] = st.RebuildReason
	}
	assert.Equal(t, reason, shown["orders"], "Overview shows the rebuild")
	assert.Empty(t, shown["early"], "a projection that applied no lost event is not rebuilt")

	// Caught up: no longer shown.
	s.gate.Store(nil)
	close(gate)
	require.NoError(t, <-queried)
	st1, err := p.Status(ctx, "orders")
	require.NoError(t, err)
	assert.Empty(t, st1.RebuildReason, "after the rebuild caught up")
	assert.Zero(t, st1.Behind)
}
