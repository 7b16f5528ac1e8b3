package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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

// Tenants of one schema are separate stores on one pool: what one saves,
// another does not see, and deleting one leaves the others. (Run as a
// test: it needs the database of the tests, EVENTSTORE_POSTGRES_URL or
// PostgreSQL at 127.0.0.1:5432, database test.)
func ExampleOptions_tenant() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, databaseURL())
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	schema := "example_tenants_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	defer pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")

	const acme, globex = "1b4e28ba-2fa1-41d2-883f-0016d3cca427", "2c5f39cb-3ab2-42e3-994a-1127e4ddb538"
	open := func(tenant string) *eventstore.Store {
		s, err := postgres.Open(ctx, pool, &postgres.Options{Schema: schema, Tenant: tenant})
		if err != nil {
			log.Fatal(err)
		}
		st, err := eventstore.New(s, nil)
		if err != nil {
			log.Fatal(err)
		}
		return st
	}
	a, g := open(acme), open(globex)
	defer g.Close()
	if _, err := a.Save(ctx, "order", "o-1", []eventstore.NewEvent{{ID: "0d5c6a34-8f8e-4d3b-9a55-3f6e8a1b2c4d", Type: "Placed", Data: []byte(`{"total":12}`)}}, nil); err != nil {
		log.Fatal(err)
	}
	load := func(name string, st *eventstore.Store) {
		agg, err := st.Load(ctx, "order", "o-1")
		fmt.Printf("%s: version %d, not found: %v\n", name, agg.Version, errors.Is(err, eventstore.ErrNotFound))
	}
	load("acme", a)
	load("globex", g)

	a.Close()
	if err := postgres.DeleteTenant(ctx, pool, schema, acme); err != nil {
		log.Fatal(err)
	}
	again := open(acme)
	defer again.Close()
	load("acme after DeleteTenant", again)
	// Output:
	// acme: version 1, not found: false
	// globex: version 0, not found: true
	// acme after DeleteTenant: version 0, not found: true
}
