package postgres_test

import (
	"context"
	"log"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/postgres"
)

// Several server processes can share one database; each opens it like
// this. (Not run as a test: it needs a database.)
func ExampleOpenURL() {
	ctx := context.Background()
	s, err := postgres.OpenURL(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		&postgres.Options{Schema: "shop_events"})
	if err != nil {
		log.Fatal(err)
	}
	st, err := eventstore.New(s, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	go func() { _ = p.Run(ctx) }() // keeps projections current, also for saves of other processes
}
