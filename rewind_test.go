package eventstore_test

import (
	"context"
	"encoding/json"
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
