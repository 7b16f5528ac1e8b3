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

// OrderSummary is the state of a projection in Go: one per order.
type OrderSummary struct {
	Total   float64 `json:"total"`
	Carrier string  `json:"carrier,omitempty"`
}

// ExampleNewProjection folds typed events into a typed state, applied by
// the Projector like a JSON definition and queried as Go values.
func ExampleNewProjection() {
	ctx := context.Background()
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	reg := typed.NewRegistry(nil)
	if err := errors.Join(
		typed.Register[OrderPlaced](reg, "OrderPlaced"),
		typed.Register[OrderShipped](reg, "OrderShipped"),
	); err != nil {
		log.Fatal(err)
	}

	summaries, err := typed.NewProjection(reg, "order-summary", "order", &typed.ProjectionOptions{Version: 1},
		typed.On(func(s *OrderSummary, e typed.EventOf[OrderPlaced]) error {
			s.Total = e.Value.Total
			return nil
		}),
		typed.On(func(s *OrderSummary, e typed.EventOf[OrderShipped]) error {
			s.Carrier = e.Value.Carrier
			return nil
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	p := eventstore.NewProjector(st, nil)
	if err := summaries.Register(ctx, p); err != nil { // in every process that applies it
		log.Fatal(err)
	}

	ts := typed.NewStore(st, reg)
	if _, err := ts.Save(ctx, "order", "o-1", []any{OrderPlaced{Total: 12.5}, OrderShipped{Carrier: "DHL"}}, nil); err != nil {
		log.Fatal(err)
	}
	s, err := summaries.Get(ctx, p, "o-1") // reads your writes
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", s)
	raw, _ := p.Single(ctx, "order-summary", "o-1") // the same instance as JSON, as over HTTP
	fmt.Println(string(raw.Data))
	// Output:
	// {Total:12.5 Carrier:DHL}
	// {"total":12.5,"carrier":"DHL"}
}
