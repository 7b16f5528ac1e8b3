package eventstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/fakestorage"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSaveAll(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		ctx := t.Context()
		saveAll(t, st, []saved{{"acct", "b", 1}})
		first := evs(2)
		res, err := st.SaveAll(ctx, "acct", []eventstore.Batch{
			{AggregateID: "a", Events: first, ExpectedVersion: eventstore.ExpectVersion(0)},
			{AggregateID: "b", Events: evs(1), ExpectedVersion: eventstore.ExpectVersion(1)},
		})
		require.NoError(t, err)
		require.Len(t, res, 2)
		assert.Equal(t, int64(1), res[0].Version)
		assert.Equal(t, int64(2), res[1].Version)
		assert.Less(t, res[0].Position, res[1].Position, "batches are stored in order")

		// A conflict in one batch stores nothing and names it.
		head, _ := st.FeedHead(ctx, "")
		_, err = st.SaveAll(ctx, "acct", []eventstore.Batch{
			{AggregateID: "c", Events: evs(1)},
			{AggregateID: "b", Events: evs(1), ExpectedVersion: eventstore.ExpectVersion(1)},
		})
		require.ErrorIs(t, err, eventstore.ErrConflict)
		var be *eventstore.BatchError
		require.ErrorAs(t, err, &be)
		assert.Equal(t, 1, be.Index)
		assert.Equal(t, "b", be.AggregateID)
		ok, err := st.Exists(ctx, "acct", "c")
		require.NoError(t, err)
		assert.False(t, ok, "nothing of a refused SaveAll is stored")
		after, _ := st.FeedHead(ctx, "")
		assert.Equal(t, head, after)

		// A retried batch is a duplicate; the others are stored.
		res, err = st.SaveAll(ctx, "acct", []eventstore.Batch{{AggregateID: "a", Events: first}, {AggregateID: "c", Events: evs(1)}})
		require.NoError(t, err)
		assert.True(t, res[0].Duplicate)
		assert.False(t, res[1].Duplicate)

		// Each batch is one feed entry.
		feed, err := st.ReadFeed(ctx, "acct", 0, nil)
		require.NoError(t, err)
		var ids []string
		for _, e := range feed.Entries {
			ids = append(ids, e.AggregateID)
		}
		assert.Equal(t, []string{"b", "a", "b", "c"}, ids)
	})
}

func TestSaveAllValidation(t *testing.T) {
	st := newFakeStore(t, fakestorage.New())
	good := evs(1)
	many := make([]eventstore.Batch, limits.MaxSaveAllBatches+1)
	for i := range many {
		many[i] = eventstore.Batch{AggregateID: strings.Repeat("x", i%50+1), Events: evs(1)}
	}
	cases := []struct {
		name    string
		typ     string
		batches []eventstore.Batch
		field   string
	}{
		{"no batches", "acct", nil, "batches"},
		{"too many batches", "acct", many, "batches"},
		{"too many events", "acct", []eventstore.Batch{{AggregateID: "a", Events: make([]eventstore.NewEvent, limits.MaxSaveAllEvents+1)}}, "batches"},
		{"empty batch", "acct", []eventstore.Batch{{AggregateID: "a", Events: good}, {AggregateID: "b"}}, "batches[1].events"},
		{"same aggregate twice", "acct", []eventstore.Batch{{AggregateID: "a", Events: good}, {AggregateID: "a", Events: evs(1)}}, "batches[1].aggregateId"},
		{"bad event id", "acct", []eventstore.Batch{{AggregateID: "a", Events: []eventstore.NewEvent{{ID: "x", Type: "T"}}}}, "batches[0].events[0].eventId"},
		{"missing id", "acct", []eventstore.Batch{{Events: good}}, "batches[0].aggregateId"},
		{"bad type", "ac/ct", []eventstore.Batch{{AggregateID: "a", Events: good}}, "aggregateType"},
		{"encrypted data too long", "acct", []eventstore.Batch{{AggregateID: "a", Events: []eventstore.NewEvent{{ID: good[0].ID, Type: "T", EncryptedData: strings.Repeat("x", limits.MaxEncryptedData+1)}}}}, "batches[0].events[0].encryptedData"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := st.SaveAll(t.Context(), c.typ, c.batches)
			var ve *eventstore.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, c.field, ve.Fields[0].Field, "%v", err)
		})
	}
	head, err := st.FeedHead(t.Context(), "")
	require.NoError(t, err)
	assert.Zero(t, head, "nothing stored")
}

func TestEncryptedData(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		ctx := t.Context()
		e := ev("Secret", `{"a":1}`)
		e.EncryptedData = "c2VjcmV0 ✓"
		_, err := st.Save(ctx, "vault", "v-1", []eventstore.NewEvent{e}, nil)
		require.NoError(t, err)
		agg, err := st.Load(ctx, "vault", "v-1")
		require.NoError(t, err)
		assert.Equal(t, e.EncryptedData, agg.Events[0].EncryptedData)
		feed, err := st.ReadFeed(ctx, "vault", 0, nil)
		require.NoError(t, err)
		assert.Equal(t, e.EncryptedData, feed.Entries[0].Events[0].EncryptedData)

		for _, bad := range []string{strings.Repeat("x", limits.MaxEncryptedData+1), "\xff"} {
			e := ev("Secret", "")
			e.EncryptedData = bad
			_, err := st.Save(ctx, "vault", "v-2", []eventstore.NewEvent{e}, nil)
			var ve *eventstore.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, "events[0].encryptedData", ve.Fields[0].Field)
		}
		e = ev("Secret", "")
		e.EncryptedData = strings.Repeat("x", limits.MaxEncryptedData)
		_, err = st.Save(ctx, "vault", "v-2", []eventstore.NewEvent{e}, nil)
		assert.NoError(t, err, "exactly the maximum")
	})
}

func TestLoadRangeAndExists(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		ctx := t.Context()
		ok, err := st.Exists(ctx, "acct", "a")
		require.NoError(t, err)
		assert.False(t, ok)
		_, _, err = st.LoadRange(ctx, "acct", "a", 0, 10)
		assert.ErrorIs(t, err, eventstore.ErrNotFound)

		saveAll(t, st, []saved{{"acct", "a", 2}, {"acct", "a", 1}, {"acct", "a", 3}, {"acct", "a", 1}})
		ok, err = st.Exists(ctx, "acct", "a")
		require.NoError(t, err)
		assert.True(t, ok)

		for _, c := range []struct {
			after, limit int64
			versions     []int64
			more         bool
		}{
			{0, 0, []int64{1, 1, 2, 3, 3, 3, 4}, false},
			{0, 2, []int64{1, 1, 2}, true},
			{2, 1, []int64{3, 3, 3}, true},
			{2, 2, []int64{3, 3, 3, 4}, false},
			{3, 5, []int64{4}, false},
			{4, 5, nil, false},
			{9, 5, nil, false},
		} {
			agg, more, err := st.LoadRange(ctx, "acct", "a", c.after, c.limit)
			require.NoError(t, err)
			var got []int64
			for _, e := range agg.Events {
				got = append(got, e.Version)
			}
			assert.Equal(t, c.versions, got, "since %d limit %d", c.after, c.limit)
			assert.Equal(t, c.more, more, "hasMore since %d limit %d", c.after, c.limit)
			assert.Equal(t, int64(4), agg.Version, "the version is always the current one")
		}
		_, _, err = st.LoadRange(ctx, "acct", "a", -1, 1)
		assert.ErrorIs(t, err, eventstore.ErrInvalid)
	})
}

func TestDeleteForgetsEverywhere(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		ctx := t.Context()
		p := eventstore.NewProjector(st, nil)
		require.NoError(t, p.Create(ctx, eventstore.Definition{Name: "count", Feed: "acct", Aggregated: true,
			Handlers: []eventstore.Handler{{EventType: "E0", Functions: []eventstore.Function{{Name: "inc", TargetSelector: "$.projection.n"}}}}}))
		require.NoError(t, p.Create(ctx, eventstore.Definition{Name: "other", Feed: "user", Aggregated: true,
			Handlers: []eventstore.Handler{{EventType: "E0", Functions: []eventstore.Function{{Name: "inc", TargetSelector: "$.projection.n"}}}}}))
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = p.Run(runCtx); close(done) }()
		defer func() { stop(); <-done }()

		saveAll(t, st, []saved{{"acct", "a", 1}, {"acct", "b", 1}, {"acct", "a", 1}, {"user", "u", 1}})
		proj, err := p.Aggregated(ctx, "count")
		require.NoError(t, err)
		assert.JSONEq(t, `{"n":"3"}`, string(proj.Data))

		require.NoError(t, st.DeleteAggregate(ctx, "acct", "a"))
		assert.ErrorIs(t, st.DeleteAggregate(ctx, "acct", "a"), eventstore.ErrNotFound)
		_, err = st.Load(ctx, "acct", "a")
		assert.ErrorIs(t, err, eventstore.ErrNotFound)
		feed, err := st.ReadFeed(ctx, "", 0, nil)
		require.NoError(t, err)
		for _, e := range feed.Entries {
			assert.NotEqual(t, "a", e.AggregateID, "deleted events are gone from the feed")
		}
		proj, err = p.Aggregated(ctx, "count")
		require.NoError(t, err)
		assert.JSONEq(t, `{"n":"1"}`, string(proj.Data), "the projection is rebuilt without the deleted events")

		// The id can be used again, from version 1.
		res, err := st.Save(ctx, "acct", "a", evs(1), &eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(0)})
		require.NoError(t, err)
		assert.Equal(t, int64(1), res.Version)

		require.NoError(t, st.DeleteAggregateType(ctx, "acct"))
		assert.ErrorIs(t, st.DeleteAggregateType(ctx, "acct"), eventstore.ErrNotFound)
		_, err = p.Aggregated(ctx, "count")
		assert.ErrorIs(t, err, eventstore.ErrNotFound, "nothing left to count")
		proj, err = p.Aggregated(ctx, "other")
		require.NoError(t, err)
		assert.JSONEq(t, `{"n":"1"}`, string(proj.Data), "other feeds' projections are kept")
		assert.ErrorIs(t, st.DeleteAggregate(ctx, "a/b", "x"), eventstore.ErrInvalid)
	})
}

func TestFeeds(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		saveAll(t, st, mixed)
		fs, err := st.Feeds(t.Context())
		require.NoError(t, err)
		assert.Equal(t, []eventstore.FeedInfo{
			{AggregateType: "invoice", AggregateCount: 1, BatchCount: 1, EventCount: 3},
			{AggregateType: "order", AggregateCount: 3, BatchCount: 4, EventCount: 15},
			{AggregateType: "user", AggregateCount: 2, BatchCount: 3, EventCount: 7},
		}, fs)
	})
}
