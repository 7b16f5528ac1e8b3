package postgres_test

import (
	"context"
	"log"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/postgres"
)

// A process whose loads, feed reads and projection queries go to two hot
// standbys, and everything else to the primary; a read that a standby has
// not replayed this process's saves for goes to the primary. (Not run as a
// test: it needs a primary and standbys; internal/e2e/replica_test.go
// runs them.)
func ExampleOptions_replicas() {
	ctx := context.Background()
	s, err := postgres.OpenURL(ctx, "postgres://app@db1:5432/events", &postgres.Options{
		Schema:   "shop_events",
		Replicas: []string{"postgres://app@db2:5432/events", "postgres://app@db3:5432/events"},
	})
	if err != nil {
		log.Fatal(err)
	}
	st, err := eventstore.New(s, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	agg, err := st.Load(ctx, "order", "o-1") // on a standby, or on the primary right after a save
	_, _ = agg, err
	replicas, onPrimary := postgres.ReplicaStatus(s)
	log.Println(replicas, onPrimary)
}
