package tenancy_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
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

// Reaction definitions of the project apply to each tenant's events; a
// delivery says which tenant's event it is.
func ExampleSet_OpenReactions() {
	ctx := context.Background()
	projectStorage := memory.New()
	project, _ := eventstore.New(projectStorage, nil)
	defer project.Close()
	delivered := make(chan string, 1)
	engine, err := reactions.New(project, projectStorage, &reactions.Options{
		Funcs: map[string]reactions.Func{"welcome": func(_ context.Context, d reactions.Delivery) error {
			var b struct {
				Metadata struct{ TenantID, AggregateID string } `json:"metadata"`
			}
			_ = json.Unmarshal(d.Body, &b)
			delivered <- b.Metadata.TenantID + " " + b.Metadata.AggregateID
			return nil
		}},
	})
	if err != nil {
		panic(err)
	}
	err = engine.Create(ctx, reactions.Definition{Name: "welcome", FeedName: "customer", ReactOnEventType: "Registered",
		Action: reactions.Action{Type: reactions.ActionFunc, Function: "welcome"}})
	if err != nil {
		panic(err)
	}
	set, err := tenancy.New(ctx, tenancy.Options{
		Registry:    memory.New(),
		Open:        func(context.Context, string) (storage.Storage, error) { return memory.New(), nil },
		Definitions: eventstore.NewProjector(project, nil),
		Reactions:   engine,
	})
	if err != nil {
		panic(err)
	}
	defer set.Close()

	const acme = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"
	_, _ = set.Add(ctx, acme, "Acme")
	st, _, release, _ := set.Open(ctx, acme)
	_, err = st.Save(ctx, "customer", "c-1", []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Registered"}}, nil)
	release()
	if err != nil {
		panic(err)
	}
	fmt.Println(<-delivered)

	e, release, _ := set.OpenReactions(ctx, acme)
	page, _ := e.Reactions(ctx, reactions.ListOptions{})
	release()
	fmt.Println(len(page.Reactions), "reaction of acme")
	// Output:
	// 1b4e28ba-2fa1-41d2-883f-0016d3cca427 c-1
	// 1 reaction of acme
}
