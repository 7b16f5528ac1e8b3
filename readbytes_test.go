package eventstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// sizingStorage records the byte budgets the Store passes and checks each
// answer against them: the events before the last version (loads) or the
// last event (feeds) must hold less than the budget.
type sizingStorage struct {
	storage.Storage
	mu       sync.Mutex
	budgets  map[int64]int // MaxBytes passed, with how often
	overruns []string
	reads    int
}

func (s *sizingStorage) saw(budget int64, events []eventstore.Event, byVersion bool, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	s.budgets[budget]++
	if budget <= 0 || len(events) == 0 {
		return
	}
	keep := len(events) - 1
	for byVersion && keep > 0 && events[keep-1].Version == events[len(events)-1].Version {
		keep--
	}
	var before int64
	for i := range events[:keep] {
		before += storage.EventBytes(&events[i])
	}
	if before >= budget {
		s.overruns = append(s.overruns, fmt.Sprintf("%s: %d bytes before its last unit, budget %d", what, before, budget))
	}
}

func (s *sizingStorage) Load(ctx context.Context, q storage.LoadQuery) (eventstore.Aggregate, error) {
	agg, err := s.Storage.Load(ctx, q)
	s.saw(q.MaxBytes, agg.Events, true, fmt.Sprintf("Load %+v", q))
	return agg, err
}

func (s *sizingStorage) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	page, err := s.Storage.ReadFeed(ctx, q)
	s.saw(q.MaxBytes, page.Events, false, fmt.Sprintf("ReadFeed %+v", q))
	return page, err
}

// TestMaxReadBytes saves events of up to 3 KB and reads them back through
// a Store whose reads are capped at 10 KB: every storage read the Store
// makes for LoadRange, ReadFeed and projector catch-up carries the budget
// and stays within it, and what the reader gets is complete and in order.
func TestMaxReadBytes(t *testing.T) {
	ctx := context.Background()
	const budget = 10_000
	ss := &sizingStorage{Storage: memory.New(), budgets: map[int64]int{}}
	st, err := eventstore.New(ss, &eventstore.Options{MaxReadBytes: budget})
	require.NoError(t, err)
	defer st.Close()

	rng := rand.New(rand.NewPCG(1, 2))
	type batch struct {
		id     string
		events int
	}
	var saved []batch
	perAgg := map[string]int{}
	for i := range 60 {
		id := fmt.Sprint("o", rng.IntN(4))
		n := 1 + rng.IntN(3)
		evs := make([]eventstore.NewEvent, n)
		for j := range evs {
			evs[j] = pev(i*10+j+1, "Placed", fmt.Sprintf(`{"total":1,"pad":%q}`, strings.Repeat("x", rng.IntN(3000))))
		}
		save(t, st, "order", id, evs...)
		saved = append(saved, batch{id, n})
		perAgg[id] += n
	}

	// LoadRange pages with a generous limit: the budget ends them early.
	for id, n := range perAgg {
		whole, err := st.Load(ctx, "order", id)
		require.NoError(t, err)
		var got []eventstore.Event
		pages := 0
		for after, more := int64(0), true; more; pages++ {
			agg, m, err := st.LoadRange(ctx, "order", id, after, 1000)
			require.NoError(t, err)
			require.NotEmpty(t, agg.Events)
			got = append(got, agg.Events...)
			after, more = agg.Events[len(agg.Events)-1].Version, m
		}
		assert.Len(t, got, n)
		assert.Equal(t, whole.Events, got, "paging %s under the budget reads the whole aggregate", id)
		assert.Greater(t, pages, 1, "the budget splits the load of %s", id)
	}

	// The feed, in pages of 100 entries, holds every batch in save order.
	var entries []eventstore.FeedEntry
	for after := int64(0); ; {
		res, err := st.ReadFeed(ctx, "", after, &eventstore.FeedOptions{Limit: 100})
		require.NoError(t, err)
		entries = append(entries, res.Entries...)
		if !res.HasMore {
			break
		}
		after = res.Next
	}
	require.Len(t, entries, len(saved))
	for i, e := range entries {
		assert.Equal(t, saved[i].id, e.AggregateID, "entry %d", i)
		assert.Len(t, e.Events, saved[i].events, "entry %d is a whole batch", i)
	}

	// Catch-up reads under the budget too, and counts every event.
	p := eventstore.NewProjector(st, nil)
	require.NoError(t, p.Create(ctx, countDef("n", eventstore.Function{Name: "inc", TargetSelector: "$.projection.count"})))
	require.NoError(t, p.CatchUp(ctx))
	for id, n := range perAgg {
		pj, err := p.Single(ctx, "n", id)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("%q", fmt.Sprint(n)), field(t, pj, "count"), "events of %s counted", id)
	}

	ss.mu.Lock()
	defer ss.mu.Unlock()
	assert.Empty(t, ss.overruns, "storage answers beyond the budget")
	assert.Greater(t, ss.budgets[budget], 20, "storage reads carrying the budget (of %d): %v", ss.reads, ss.budgets)
	for b := range ss.budgets {
		assert.Contains(t, []int64{0, budget}, b, "budgets passed: %v", ss.budgets)
	}
}

// TestMaxReadBytesDefault checks the budget a Store passes by default and
// that a negative MaxReadBytes passes none.
func TestMaxReadBytesDefault(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		opts *eventstore.Options
		want int64
	}{
		{nil, limits.DefaultMaxReadBytes},
		{&eventstore.Options{MaxReadBytes: -1}, 0},
	} {
		ss := &sizingStorage{Storage: memory.New(), budgets: map[int64]int{}}
		st, err := eventstore.New(ss, c.opts)
		require.NoError(t, err)
		save(t, st, "order", "o1", pev(1, "Placed", `{}`))
		_, _, err = st.LoadRange(ctx, "order", "o1", 0, 10)
		require.NoError(t, err)
		_, err = st.ReadFeed(ctx, "", 0, nil)
		require.NoError(t, err)
		assert.Equal(t, map[int64]int{c.want: 2}, ss.budgets, "options %+v", c.opts)
		require.NoError(t, st.Close())
	}
}
