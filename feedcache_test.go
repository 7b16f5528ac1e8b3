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

// countingStorage counts feed reads.
type countingStorage struct {
	storage.Storage
	reads atomic.Int64
}

func (c *countingStorage) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	c.reads.Add(1)
	return c.Storage.ReadFeed(ctx, q)
}

// TestManyDefinitionsShareFeedReads: definitions at the same position read
// each page of the feed once between them, not once each.
func TestManyDefinitionsShareFeedReads(t *testing.T) {
	ctx := context.Background()
	cs := &countingStorage{Storage: memory.New()}
	st, err := eventstore.New(cs, nil)
	require.NoError(t, err)
	defer st.Close()
	for i := range 50 {
		evs := make([]eventstore.NewEvent, 100)
		for j := range evs {
			evs[j] = pev(i*100+j+1, "Placed", `{"total":1}`)
		}
		_, err := st.Save(ctx, "order", fmt.Sprint("o", i), evs, nil)
		require.NoError(t, err)
	}
	p := eventstore.NewProjector(st, nil)
	const defs = 100
	for i := range defs {
		require.NoError(t, p.Create(ctx, countDef(fmt.Sprint("d", i), eventstore.Function{Name: "add", TargetSelector: "$.projection.t", EventSelector: "$.event.total"})))
	}
	cs.reads.Store(0)
	require.NoError(t, p.CatchUp(ctx))
	// 5,000 events are 5 full pages of 1,000 and a short one: alone, each
	// definition reads 6 pages (600 in all).
	reads := cs.reads.Load()
	assert.Less(t, reads, int64(defs*6/3), "feed pages are shared between definitions")
	t.Logf("%d definitions over 5,000 events: %d feed reads (%d without sharing)", defs, reads, defs*6)
	for i := range defs {
		pj, err := p.Single(ctx, fmt.Sprint("d", i), "o7")
		require.NoError(t, err)
		assert.JSONEq(t, `{"t":"100"}`, string(pj.Data))
	}
}
