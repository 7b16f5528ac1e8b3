package tenancy_test

import (
	"context"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/tenancy"
)

// Each tenant gets its own Store: what one saves, another cannot load.
func Example() {
	ctx := context.Background()
	project, _ := eventstore.New(memory.New(), nil)
	defer project.Close()
	defs := eventstore.NewProjector(project, nil)
	set, err := tenancy.New(ctx, tenancy.Options{
		Registry:    memory.New(), // a SQLite file or PostgreSQL schema of its own in production
		Open:        func(context.Context, string) (storage.Storage, error) { return memory.New(), nil },
		Definitions: defs,
	})
	if err != nil {
		panic(err)
	}
	defer set.Close()

	const acme, globex = "1b4e28ba-2fa1-41d2-883f-0016d3cca427", "2c5f39cb-3ab2-42e3-994a-1127e4ddb538"
	for _, id := range []string{acme, globex} {
		if _, err := set.Add(ctx, id, ""); err != nil {
			panic(err)
		}
	}
	st, _, release, err := set.Open(ctx, acme)
	if err != nil {
		panic(err)
	}
	_, err = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Placed"}}, nil)
	release()
	if err != nil {
		panic(err)
	}

	st, _, release, _ = set.Open(ctx, globex)
	_, err = st.Load(ctx, "order", "o-1")
	release()
	fmt.Println("globex sees acme's order:", err == nil)

	_ = set.Delete(ctx, acme)
	_, _, _, err = set.Open(ctx, acme)
	fmt.Println(err)
	// Output:
	// globex sees acme's order: false
	// tenant 1b4e28ba-2fa1-41d2-883f-0016d3cca427: unknown tenant
}
