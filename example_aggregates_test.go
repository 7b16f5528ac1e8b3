package eventstore_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
)

func ExampleStore_Aggregates() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()

	save := func(id, eventID string) {
		if _, err := st.Save(ctx, "order", id, []eventstore.NewEvent{{ID: eventID, Type: "Touched"}}, nil); err != nil {
			fmt.Println(err)
		}
	}
	save("o-2", "5a0f6a2e-3c1d-4e8b-9f10-000000000001")
	save("o-1", "5a0f6a2e-3c1d-4e8b-9f10-000000000002")
	save("o-3", "5a0f6a2e-3c1d-4e8b-9f10-000000000003")
	save("o-1", "5a0f6a2e-3c1d-4e8b-9f10-000000000004") // o-1 at version 2

	// Pages of two, in id order.
	opts := &eventstore.AggregateListOptions{Limit: 2}
	for {
		page, err := st.Aggregates(ctx, "order", opts)
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, a := range page.Aggregates {
			fmt.Printf("%s version %d (of %d aggregates)\n", a.ID, a.Version, page.Total)
		}
		if !page.HasMore {
			break
		}
		opts.Skip += len(page.Aggregates)
	}

	_, err := st.Aggregates(ctx, "invoice", nil)
	fmt.Println("a type without aggregates:", errors.Is(err, eventstore.ErrNotFound))
	// Output:
	// o-1 version 2 (of 3 aggregates)
	// o-2 version 1 (of 3 aggregates)
	// o-3 version 1 (of 3 aggregates)
	// a type without aggregates: true
}
