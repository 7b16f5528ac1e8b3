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

// Example_readme is the typed example of the README's "Library use";
// TestReadmeExample checks that the README shows exactly the code between
// the markers.
func Example_readme() {
	ctx := context.Background()
	// README begin
	type ItemAdded struct{ SKU string }
	type Cart struct{ Items map[string]int }

	reg := typed.NewRegistry(nil) // JSON by default; names are given, never taken from Go types
	if err := typed.Register[ItemAdded](reg, "ItemAdded"); err != nil {
		log.Fatal(err)
	}
	st, err := eventstore.New(memory.New(), nil) // or sqlite.Open(path, nil), postgres.OpenURL(ctx, url, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	carts := typed.NewRepository(typed.NewStore(st, reg), "cart", func(c *Cart, e typed.Event) error {
		if v, ok := e.Value.(ItemAdded); ok { // or a type switch over every event type
			if c.Items == nil {
				c.Items = map[string]int{}
			}
			c.Items[v.SKU]++
		}
		return nil
	}, nil) // or a method expression: (*Cart).Apply

	// Load, decide, save at the version loaded; after a concurrent save it loads and decides again.
	for range 4 {
		_, err = carts.Update(ctx, "c-1", func(c *Cart) ([]any, error) {
			if c.Items["apple"] == 3 {
				return nil, errors.New("three apples at most")
			}
			return []any{ItemAdded{SKU: "apple"}}, nil
		})
	}
	cart, _ := carts.Load(ctx, "c-1")
	fmt.Println(err, cart.Version, cart.State.Items) // three apples at most 3 map[apple:3]
	// README end

	// Output:
	// three apples at most 3 map[apple:3]
}
