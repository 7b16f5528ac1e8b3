package eventstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
)

func ExampleStore_Save() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()

	res, err := st.Save(ctx, "order", "o-1", []eventstore.NewEvent{
		{ID: "0b5c5f0e-6a55-4a8e-9d53-2f1f1c8c3a01", Type: "OrderPlaced", Data: []byte(`{"total": 12.50}`)},
		{ID: "0b5c5f0e-6a55-4a8e-9d53-2f1f1c8c3a02", Type: "ItemAdded", Data: []byte(`{"sku": "A-1"}`)},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("version after one save of two events:", res.Version)

	agg, _ := st.Load(ctx, "order", "o-1")
	for _, e := range agg.Events {
		fmt.Println(e.Sequence, e.Type, e.Version, string(e.Data))
	}
	// Output:
	// version after one save of two events: 1
	// 1 OrderPlaced 1 {"total": 12.50}
	// 2 ItemAdded 1 {"sku": "A-1"}
}

func Example_optimisticConcurrency() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()

	ev := func(id string) []eventstore.NewEvent {
		return []eventstore.NewEvent{{ID: id, Type: "Renamed"}}
	}
	// Version 0 means "the aggregate must not exist yet".
	_, err := st.Save(ctx, "user", "u-1", ev("6f1c1b9e-1d7e-4b51-8a55-3e9f2c7d0001"),
		&eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(0)})
	fmt.Println("create:", err)

	// A writer that read version 0 is now too late.
	_, err = st.Save(ctx, "user", "u-1", ev("6f1c1b9e-1d7e-4b51-8a55-3e9f2c7d0002"),
		&eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(0)})
	fmt.Println("stale writer gets ErrConflict:", errors.Is(err, eventstore.ErrConflict))
	// Output:
	// create: <nil>
	// stale writer gets ErrConflict: true
}

func ExampleProjector() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	p := eventstore.NewProjector(st, nil)

	err := p.Create(ctx, eventstore.Definition{
		Name: "order-totals", Feed: "order", Aggregated: true,
		Handlers: []eventstore.Handler{{
			EventType: "OrderPlaced",
			Functions: []eventstore.Function{
				{Name: "add", TargetSelector: "$.projection.revenue", EventSelector: "$.event.total"},
				{Name: "inc", TargetSelector: "$.projection.orders"},
				{Name: "set", TargetSelector: "$.projection.last.city", EventSelector: "$.event.address.city"},
			},
		}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{{ID: "9d7e0c52-1b0a-4d38-a3a4-0d6a3f0e0001", Type: "OrderPlaced",
		Data: []byte(`{"total": 0.1, "address": {"city": "Lyon"}}`)}}, nil)
	_, _ = st.Save(ctx, "order", "o-2", []eventstore.NewEvent{{ID: "9d7e0c52-1b0a-4d38-a3a4-0d6a3f0e0002", Type: "OrderPlaced",
		Data: []byte(`{"total": 0.2, "address": {"city": "Oslo"}}`)}}, nil)

	// Read your writes: the query reflects both saves.
	proj, err := p.Aggregated(ctx, "order-totals")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(proj.ID, string(proj.Data))
	// Output:
	// order-totals {"revenue":"0.3","orders":"2","last":{"city":"Oslo"}}
}
