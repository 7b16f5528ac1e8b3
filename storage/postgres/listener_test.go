package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
)

// TestSharedListener: Storages of two schemas on one pool and one
// Listener each learn of their own schema's appends only; a lost
// connection ends their watches with ErrUnavailable and the next watch
// connects again; closing the Listener ends them with ErrClosed.
func TestSharedListener(t *testing.T) {
	pool := testPool(t)
	l := postgres.NewListener(pool)
	t.Cleanup(func() { _ = l.Close() })
	schemaA, schemaB := newSchema(t), newSchema(t)
	open := func(schema string) storage.Storage {
		s, err := postgres.Open(context.Background(), pool, &postgres.Options{Schema: schema, Listener: l})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a, b := open(schemaA), open(schemaB)
	writer := openURLIn(t, schemaA) // another process
	ctx := context.Background()
	append1 := func(s storage.Storage) {
		t.Helper()
		if _, err := s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "x",
			Events: []storage.Event{event("A", "")}}); err != nil {
			t.Fatal(err)
		}
	}

	notesA, doneA := watch(ctx, a.(storage.AppendWatcher))
	notesB, doneB := watch(ctx, b.(storage.AppendWatcher))
	expect(t, notesA, "when the watch of A starts")
	expect(t, notesB, "when the watch of B starts")
	quiet(t, notesA, "on A without an append")
	append1(writer)
	expect(t, notesA, "on A after an append to A by another process")
	settled(t, notesA)
	quiet(t, notesB, "on B after an append to A")
	append1(b)
	expect(t, notesB, "on B after an append to B")
	settled(t, notesB)
	quiet(t, notesA, "on A after an append to B")
	quiet(t, notesB, "on B twice for one append")

	// A lost connection ends both watches with ErrUnavailable.
	var killed int
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE query IN ('LISTEN ' || quote_ident($1), 'LISTEN ' || quote_ident($2))`, schemaA+".appends", schemaB+".appends").Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminate the shared listening connection: %d terminated, %v", killed, err)
	}
	for _, done := range []<-chan error{doneA, doneB} {
		select {
		case err := <-done:
			if !errors.Is(err, storage.ErrUnavailable) {
				t.Errorf("WatchAppends after the shared connection was lost = %v, want ErrUnavailable", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("WatchAppends did not return when the shared connection was lost")
		}
	}

	// The next watch connects again.
	notesA, doneA = watch(ctx, a.(storage.AppendWatcher))
	expect(t, notesA, "when the watch of A starts again")
	append1(writer)
	expect(t, notesA, "on A after an append, on the new connection")

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-doneA:
		if !errors.Is(err, storage.ErrClosed) {
			t.Errorf("WatchAppends after the Listener closed = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchAppends did not return when the Listener closed")
	}
}
