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

// Cart is an aggregate's state, changed only by its events.
type Cart struct {
	Items   map[string]int
	Ordered bool
}

type ItemAdded struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type CartOrdered struct{}

// Apply folds one event into the cart.
func (c *Cart) Apply(e typed.Event) error {
	switch v := e.Value.(type) {
	case ItemAdded:
		if c.Items == nil {
			c.Items = map[string]int{}
		}
		c.Items[v.SKU] += v.Qty
	case CartOrdered:
		c.Ordered = true
	}
	return nil
}

var errOrdered = errors.New("the cart is ordered already")

// AddItem decides the events of a command from the state.
func AddItem(sku string, qty int) func(*Cart) ([]any, error) {
	return func(c *Cart) ([]any, error) {
		if c.Ordered {
			return nil, errOrdered
		}
		return []any{ItemAdded{SKU: sku, Qty: qty}}, nil
	}
}

// ExampleRepository_Update loads a cart, decides from a command and
// saves, retrying on conflicts, in one call.
func ExampleRepository_Update() {
	ctx := context.Background()
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	reg := typed.NewRegistry(nil)
	if err := errors.Join(
		typed.Register[ItemAdded](reg, "ItemAdded"),
		typed.Register[CartOrdered](reg, "CartOrdered"),
	); err != nil {
		log.Fatal(err)
	}
	carts := typed.NewRepository(typed.NewStore(st, reg), "cart", (*Cart).Apply, nil)

	for _, sku := range []string{"apple", "pear", "apple"} {
		if _, err := carts.Update(ctx, "c-1", AddItem(sku, 1)); err != nil {
			log.Fatal(err)
		}
	}
	_, err = carts.Update(ctx, "c-1", func(c *Cart) ([]any, error) { return []any{CartOrdered{}}, nil })
	if err != nil {
		log.Fatal(err)
	}
	_, err = carts.Update(ctx, "c-1", AddItem("plum", 1))
	fmt.Println(err)

	// The parts: Load, decide, Save at the version loaded.
	cart, err := carts.Load(ctx, "c-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cart.Version, cart.State.Items, cart.State.Ordered)
	_, err = carts.Save(ctx, typed.Aggregate[Cart]{ID: "c-1", Version: 2}, []any{ItemAdded{SKU: "fig", Qty: 1}})
	fmt.Println(errors.Is(err, eventstore.ErrConflict))
	// Output:
	// the cart is ordered already
	// 4 map[apple:2 pear:1] true
	// true
}
