package eventstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loadCountingStorage counts the instances loaded and the feed reads.
type loadCountingStorage struct {
	storage.Storage
	loaded, reads atomic.Int64
}

func (c *loadCountingStorage) LoadProjections(ctx context.Context, name string, ids []string) ([]storage.ProjectionState, error) {
	c.loaded.Add(int64(len(ids)))
	return c.Storage.LoadProjections(ctx, name, ids)
}

func (c *loadCountingStorage) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	c.reads.Add(1)
	return c.Storage.ReadFeed(ctx, q)
}

// TestRebuildLoadsNoInstance: a catch-up from checkpoint 0 keeps the
// instances it commits, so it loads none (at checkpoint 0 a projection
// has none), over pages that each touch instances of earlier ones; a
// later catch-up from elsewhere loads those its page touches, and the
// states are right either way.
func TestRebuildLoadsNoInstance(t *testing.T) {
	ctx := context.Background()
	cs := &loadCountingStorage{Storage: memory.New()}
	st, err := eventstore.New(cs, nil)
	require.NoError(t, err)
	defer st.Close()
	// 10 rounds of one event to each of 200 aggregates (more than a
	// Projector keeps between catch-ups): 2,000 events, and every page of
	// 100 after the second touches instances that earlier pages committed.
	n := 0
	save := func(rounds int) {
		for range rounds {
			for a := range 200 {
				n++
				_, err := st.Save(ctx, "order", fmt.Sprint("o", a), []eventstore.NewEvent{pev(n, "Placed", `{}`)}, nil)
				require.NoError(t, err)
			}
		}
	}
	save(10)
	p := eventstore.NewProjector(st, &eventstore.ProjectorOptions{BatchSize: 100})
	require.NoError(t, p.Create(ctx, countDef("n", eventstore.Function{Name: "inc", TargetSelector: "$.projection.count"})))
	cs.loaded.Store(0)
	cs.reads.Store(0)
	require.NoError(t, p.CatchUp(ctx, "n"))
	assert.Zero(t, cs.loaded.Load(), "instances loaded by a rebuild from checkpoint 0")
	// 20 full pages and the empty one after; a page read ahead may be
	// read once more at most.
	assert.LessOrEqual(t, cs.reads.Load(), int64(22))
	for _, id := range []string{"o0", "o199"} {
		pj, err := p.Single(ctx, "n", id)
		require.NoError(t, err)
		assert.JSONEq(t, `{"count":"10"}`, string(pj.Data))
	}

	// A second Projector, which never committed, loads what it touches.
	save(3)
	p2 := eventstore.NewProjector(st, &eventstore.ProjectorOptions{BatchSize: 100})
	require.NoError(t, p2.CatchUp(ctx, "n"))
	assert.Positive(t, cs.loaded.Load(), "a catch-up from a checkpoint other than 0 loads instances")
	for _, q := range []*eventstore.Projector{p, p2} {
		pj, err := q.Single(ctx, "n", "o7")
		require.NoError(t, err)
		assert.JSONEq(t, `{"count":"13"}`, string(pj.Data))
	}
	// And the first, whose catch-up ended, goes on from what is stored.
	save(2)
	require.NoError(t, p.CatchUp(ctx, "n"))
	pj, err := p.Single(ctx, "n", "o7")
	require.NoError(t, err)
	assert.JSONEq(t, `{"count":"15"}`, string(pj.Data))
}
