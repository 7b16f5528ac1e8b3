package typed_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/typed"
)

type OrderPlaced struct {
	Total float64 `json:"total"`
}

type OrderShipped struct {
	Carrier string `json:"carrier"`
}

// Example saves Go values and loads them back decoded, with the stored
// event beside each.
func Example() {
	ctx := context.Background()
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	reg := typed.NewRegistry(nil) // JSON; RegistryOptions.Codec for another
	if err := errors.Join(
		typed.Register[OrderPlaced](reg, "OrderPlaced"),
		typed.Register[OrderShipped](reg, "OrderShipped"),
	); err != nil {
		log.Fatal(err)
	}
	ts := typed.NewStore(st, reg)

	_, err = ts.Save(ctx, "order", "o-1", []any{
		OrderPlaced{Total: 12.5},
		typed.NewEvent{Value: OrderShipped{Carrier: "DHL"}, Metadata: eventstore.Metadata{CausationID: "cmd-1"}},
	}, &typed.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(0)})
	if err != nil {
		log.Fatal(err)
	}

	for ev, err := range ts.Load(ctx, "order", "o-1") {
		if err != nil {
			log.Fatal(err)
		}
		switch v := ev.Value.(type) {
		case OrderPlaced:
			fmt.Printf("%d: placed, total %.2f (stored as %s)\n", ev.Sequence, v.Total, ev.Data)
		case OrderShipped:
			fmt.Printf("%d: shipped by %s\n", ev.Sequence, v.Carrier)
		}
	}

	// An event type nobody registered is an error naming it.
	_, err = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "OrderLost"}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, err := range ts.LoadAfter(ctx, "order", "o-1", 1) {
		fmt.Println(errors.Is(err, typed.ErrUnregistered), errors.Is(err, eventstore.ErrInvalid))
	}
	// Output:
	// 1: placed, total 12.50 (stored as {"total":12.5})
	// 2: shipped by DHL
	// true true
}

// ExampleStore_Subscribe follows a feed, decoded, from its start.
func ExampleStore_Subscribe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	reg := typed.NewRegistry(nil)
	_ = typed.Register[OrderPlaced](reg, "OrderPlaced")
	ts := typed.NewStore(st, reg)

	for _, id := range []string{"o-1", "o-2"} {
		if _, err := ts.Save(ctx, "order", id, []any{OrderPlaced{Total: 5}}, nil); err != nil {
			log.Fatal(err)
		}
	}
	n := 0
	for entry, err := range ts.Subscribe(ctx, "order", 0, nil) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(entry.AggregateID, entry.Events[0].Value.(OrderPlaced).Total)
		if n++; n == 2 {
			break // or keep going: new saves arrive here as they are made
		}
	}
	// Output:
	// o-1 5
	// o-2 5
}
