package typed_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/typed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newStore(t *testing.T) *typed.Store {
	t.Helper()
	return typed.NewStore(mustStore(t, memory.New()), newRegistry(t))
}

func collect[V any](t *testing.T, seq func(func(V, error) bool)) []V {
	t.Helper()
	var out []V
	for v, err := range seq {
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

func TestSaveLoad(t *testing.T) {
	ctx := context.Background()
	ts := newStore(t)
	md := eventstore.Metadata{CorrelationID: "req-1"}
	own := eventstore.Metadata{CausationID: "cmd-7"}
	res, err := ts.Save(ctx, "order", "o-1", []any{
		placed{Total: 10, Items: 1},
		typed.NewEvent{ID: "9d7e0c52-1b0a-4d38-a3a4-0d6a3f0e0002", Value: &shipped{Carrier: "DHL"}, Metadata: own},
	}, &typed.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(0), Metadata: md})
	require.NoError(t, err)
	assert.Equal(t, int64(1), res.Version)

	evs := collect(t, ts.Load(ctx, "order", "o-1"))
	require.Len(t, evs, 2)
	assert.Equal(t, placed{Total: 10, Items: 1}, evs[0].Value)
	assert.Equal(t, shipped{Carrier: "DHL"}, evs[1].Value)
	assert.Equal(t, "9d7e0c52-1b0a-4d38-a3a4-0d6a3f0e0002", evs[1].ID, "a given id is kept")
	assert.Equal(t, int64(2), evs[1].Sequence)
	assert.Equal(t, "order", evs[0].AggregateType)
	assert.False(t, evs[0].RecordedAt.IsZero())
	assert.JSONEq(t, `{"total":10,"items":1}`, string(evs[0].Data), "the raw bytes stay reachable")

	_, err = ts.Save(ctx, "order", "o-1", []any{shipped{Carrier: "UPS"}}, &typed.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(0)})
	assert.ErrorIs(t, err, eventstore.ErrConflict, "the version check is the Store's")

	_, err = ts.Save(ctx, "order", "o-1", []any{shipped{}, struct{}{}}, nil)
	assert.ErrorIs(t, err, typed.ErrUnregistered)
	assert.ErrorContains(t, err, "save order/o-1: events[1]: typed: encode struct {}")
	assert.Len(t, collect(t, ts.Load(ctx, "order", "o-1")), 2, "an event that does not encode fails the whole save")

	_, err = ts.Save(ctx, "order", "o-1", []any{shipped{Carrier: "UPS"}}, nil)
	require.NoError(t, err)
	after := collect(t, ts.LoadAfter(ctx, "order", "o-1", 1))
	require.Len(t, after, 1)
	assert.Equal(t, shipped{Carrier: "UPS"}, after[0].Value)
	assert.Empty(t, collect(t, ts.LoadAfter(ctx, "order", "o-1", 2)))

	for _, err := range ts.Load(ctx, "order", "nope") {
		assert.ErrorIs(t, err, eventstore.ErrNotFound)
	}
}

// TestSaveMetadata: the metadata of a save, per event or from
// SaveOptions, is stored and comes back with loads and feeds, on every
// backend.
func TestSaveMetadata(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			ts := typed.NewStore(b.open(t, 1)[0], newRegistry(t))
			common := eventstore.Metadata{CorrelationID: "req-1", Values: map[string]string{"user": "u-1"}}
			own := eventstore.Metadata{CausationID: "cmd-7"}
			_, err := ts.Save(ctx, "order", "o-1", []any{
				placed{Items: 1},
				typed.NewEvent{Value: shipped{Carrier: "DHL"}, Metadata: own},
			}, &typed.SaveOptions{Metadata: common})
			require.NoError(t, err)
			evs := collect(t, ts.Load(ctx, "order", "o-1"))
			require.Len(t, evs, 2)
			assert.Equal(t, common, evs[0].Metadata, "SaveOptions.Metadata for an event without its own")
			assert.Equal(t, own, evs[1].Metadata, "an event's own metadata wins")
			entries := collect(t, ts.Feed(ctx, "order", 0, nil))
			require.Len(t, entries, 1)
			assert.Equal(t, common, entries[0].Events[0].Metadata, "feeds carry it too")
			assert.Equal(t, own, entries[0].Events[1].Metadata)

			_, err = ts.Save(ctx, "order", "o-1", []any{placed{}}, &typed.SaveOptions{
				Metadata: eventstore.Metadata{Values: map[string]string{"correlationId": "x"}}})
			assert.ErrorIs(t, err, eventstore.ErrInvalid, "the Store's bounds apply")
		})
	}
}

// TestLoadGoesOnPastBadEvents: an event of a type the Registry does not
// know is yielded with its error and the stored event, and the loop may
// go on.
func TestLoadGoesOnPastBadEvents(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t, memory.New())
	_, err := st.Save(ctx, "order", "o-1", []eventstore.NewEvent{
		{ID: eventstore.NewEventID(), Type: "OrderPlaced", Data: []byte(`{"items":1}`)},
		{ID: eventstore.NewEventID(), Type: "OrderCancelled", Data: []byte(`{"why":"x"}`)},
		{ID: eventstore.NewEventID(), Type: "OrderShipped", Data: []byte(`{"carrier":"DHL"}`)},
	}, nil)
	require.NoError(t, err)
	ts := typed.NewStore(st, newRegistry(t))
	var values []any
	var errs []error
	for ev, err := range ts.Load(ctx, "order", "o-1") {
		values = append(values, ev.Value)
		errs = append(errs, err)
		if err != nil {
			assert.Equal(t, "OrderCancelled", ev.Type)
			assert.JSONEq(t, `{"why":"x"}`, string(ev.Data))
		}
	}
	assert.Equal(t, []any{placed{Items: 1}, nil, shipped{Carrier: "DHL"}}, values)
	require.Len(t, errs, 3)
	assert.ErrorIs(t, errs[1], typed.ErrUnregistered)
	assert.NoError(t, errors.Join(errs[0], errs[2]))

	n := 0
	for range ts.Load(ctx, "order", "o-1") {
		n++
		break
	}
	assert.Equal(t, 1, n, "break stops the sequence")
}

// TestLoadPages: Load reads a long aggregate in pages and yields every
// event once, in order.
func TestLoadPages(t *testing.T) {
	ctx := context.Background()
	ts := newStore(t)
	const saves = 2500
	for i := range saves {
		_, err := ts.Save(ctx, "order", "o-1", []any{placed{Items: i}}, nil)
		require.NoError(t, err)
	}
	evs := collect(t, ts.Load(ctx, "order", "o-1"))
	require.Len(t, evs, saves)
	for i, ev := range evs {
		require.Equal(t, placed{Items: i}, ev.Value)
		require.Equal(t, int64(i+1), ev.Version)
	}
}

func TestFeed(t *testing.T) {
	ctx := context.Background()
	ts := newStore(t)
	for i := range 5 {
		_, err := ts.Save(ctx, "order", "o-1", []any{placed{Items: i}, shipped{}}, nil)
		require.NoError(t, err)
	}
	_, err := ts.Untyped().Save(ctx, "order", "o-2", []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Unknown"}}, nil)
	require.NoError(t, err)

	var entries []typed.Entry
	var bad int
	for e, err := range ts.Feed(ctx, "order", 0, &eventstore.FeedOptions{Limit: 2}) {
		if err != nil {
			assert.ErrorIs(t, err, typed.ErrUnregistered)
			bad++
		}
		entries = append(entries, e)
	}
	require.Len(t, entries, 6, "every page, to the head")
	assert.Equal(t, 1, bad)
	assert.Equal(t, placed{Items: 3}, entries[3].Events[0].Value)
	assert.Equal(t, "o-2", entries[5].AggregateID)
	assert.Nil(t, entries[5].Events[0].Value)

	var rest []int64
	for e, err := range ts.Feed(ctx, "order", entries[2].Cursor, &eventstore.FeedOptions{Limit: 1}) {
		require.NoError(t, err)
		if rest = append(rest, e.Cursor); len(rest) == 2 {
			break
		}
	}
	assert.Equal(t, []int64{entries[3].Cursor, entries[4].Cursor}, rest, "read on after a cursor")
}

func TestSubscribe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ts := newStore(t)
	_, err := ts.Save(ctx, "order", "o-1", []any{placed{Items: 1}}, nil)
	require.NoError(t, err)
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = ts.Save(ctx, "order", "o-2", []any{shipped{Carrier: "DHL"}}, nil)
	}()
	var got []any
	for e, err := range ts.Subscribe(ctx, "order", 0, nil) {
		require.NoError(t, err)
		got = append(got, e.Events[0].Value)
		if len(got) == 2 {
			break
		}
	}
	assert.Equal(t, []any{placed{Items: 1}, shipped{Carrier: "DHL"}}, got, "the saved entry, then the new one")

	done, stop := context.WithCancel(ctx)
	stop()
	for _, err := range ts.Subscribe(done, "order", 0, nil) {
		t.Fatalf("a subscription whose ctx is done yields nothing, got %v", err)
	}
	for _, err := range ts.Subscribe(ctx, "a/b", 0, nil) {
		assert.ErrorIs(t, err, eventstore.ErrInvalid, "the subscription's own error ends it")
	}
}
