package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
)

func ExampleStore_ReadFeed() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	_, _ = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{
		{ID: "7d0f6d4e-0000-4000-8000-000000000001", Type: "OrderPlaced"},
		{ID: "7d0f6d4e-0000-4000-8000-000000000002", Type: "ItemAdded"},
	}, nil)
	_, _ = st.Save(ctx, "user", "u-1", []eventstore.NewEvent{{ID: "7d0f6d4e-0000-4000-8000-000000000003", Type: "UserJoined"}}, nil)
	_, _ = st.Save(ctx, "order", "o-2", []eventstore.NewEvent{{ID: "7d0f6d4e-0000-4000-8000-000000000004", Type: "OrderPlaced"}}, nil)

	// The feed of one type numbers its batches 1, 2, 3, ...
	res, _ := st.ReadFeed(ctx, "order", 0, nil)
	for _, e := range res.Entries {
		fmt.Println("order feed:", e.Cursor, e.AggregateID, len(e.Events), "events")
	}
	// The feed of all types uses global positions; continue from a cursor.
	res, _ = st.ReadFeed(ctx, "", 2, &eventstore.FeedOptions{Limit: 1})
	fmt.Println("after 2:", res.Entries[0].AggregateType, res.Entries[0].Cursor, "hasMore:", res.HasMore, "head:", res.Head)
	// Output:
	// order feed: 1 o-1 2 events
	// order feed: 2 o-2 1 events
	// after 2: user 3 hasMore: true head: 4
}

func ExampleStore_Subscribe() {
	ctx, cancel := context.WithCancel(context.Background())
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	_, _ = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{{ID: "6c1a0b1e-0000-4000-8000-000000000001", Type: "OrderPlaced"}}, nil)

	go func() {
		// Saved while the subscription runs: delivered as it is saved.
		time.Sleep(10 * time.Millisecond)
		_, _ = st.Save(ctx, "order", "o-2", []eventstore.NewEvent{{ID: "6c1a0b1e-0000-4000-8000-000000000002", Type: "OrderPlaced"}}, nil)
	}()
	var checkpoint int64 // where a restart would resume
	err := st.Subscribe(ctx, "order", checkpoint, nil, func(ctx context.Context, e eventstore.FeedEntry) error {
		fmt.Println("entry", e.Cursor, e.AggregateID)
		checkpoint = e.Cursor
		if checkpoint == 2 {
			cancel() // Subscribe then returns nil
		}
		return nil
	})
	fmt.Println("stopped:", err, "checkpoint:", checkpoint)
	// Output:
	// entry 1 o-1
	// entry 2 o-2
	// stopped: <nil> checkpoint: 2
}

func ExampleStore_SaveAll() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()

	// Move money between two accounts: both batches are stored, or neither.
	res, err := st.SaveAll(ctx, "account", []eventstore.Batch{
		{AggregateID: "a-1", Events: []eventstore.NewEvent{{ID: "5b2e8c3a-0000-4000-8000-000000000001", Type: "Debited", Data: []byte(`{"amount":"10"}`)}}},
		{AggregateID: "a-2", Events: []eventstore.NewEvent{{ID: "5b2e8c3a-0000-4000-8000-000000000002", Type: "Credited", Data: []byte(`{"amount":"10"}`)}}},
	})
	fmt.Println(len(res), "batches saved:", err)

	// A conflict in one batch refuses all of them and names it.
	_, err = st.SaveAll(ctx, "account", []eventstore.Batch{
		{AggregateID: "a-3", Events: []eventstore.NewEvent{{ID: "5b2e8c3a-0000-4000-8000-000000000003", Type: "Opened"}}},
		{AggregateID: "a-1", Events: []eventstore.NewEvent{{ID: "5b2e8c3a-0000-4000-8000-000000000004", Type: "Debited"}}, ExpectedVersion: eventstore.ExpectVersion(0)},
	})
	var be *eventstore.BatchError
	if errors.As(err, &be) {
		fmt.Println("refused batch", be.Index, be.AggregateID, errors.Is(err, eventstore.ErrConflict))
	}
	ok, _ := st.Exists(ctx, "account", "a-3")
	fmt.Println("a-3 exists:", ok)
	// Output:
	// 2 batches saved: <nil>
	// refused batch 1 a-1 true
	// a-3 exists: false
}

func ExampleStore_LoadRange() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	for i := range 3 {
		_, _ = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{{ID: fmt.Sprintf("4a3d2c1b-0000-4000-8000-00000000000%d", i), Type: "Changed"}}, nil)
	}
	// Page through the history one version at a time.
	for after, more := int64(0), true; more; {
		var agg eventstore.Aggregate
		agg, more, _ = st.LoadRange(ctx, "order", "o-1", after, 1)
		after = agg.Events[len(agg.Events)-1].Version
		fmt.Println("version", after, "of", agg.Version, "more:", more)
	}
	// Output:
	// version 1 of 3 more: true
	// version 2 of 3 more: true
	// version 3 of 3 more: false
}

func ExampleStore_DeleteAggregate() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	_, _ = st.Save(ctx, "user", "u-1", []eventstore.NewEvent{{ID: "3e4f5a6b-0000-4000-8000-000000000001", Type: "Registered", Data: []byte(`{"email":"ann@example.com"}`)}}, nil)

	// Forget the user: events, feed entries and projections.
	if err := st.DeleteAggregate(ctx, "user", "u-1"); err != nil {
		fmt.Println(err)
		return
	}
	_, err := st.Load(ctx, "user", "u-1")
	fmt.Println(errors.Is(err, eventstore.ErrNotFound))
	// The id can be used again, from version 1.
	res, _ := st.Save(ctx, "user", "u-1", []eventstore.NewEvent{{ID: "3e4f5a6b-0000-4000-8000-000000000002", Type: "Registered"}}, nil)
	fmt.Println("version", res.Version)
	// Output:
	// true
	// version 1
}
