package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// watch runs WatchAppends on s in a goroutine. It returns a channel that
// receives a value per notification and one that receives what
// WatchAppends returned.
func watch(ctx context.Context, s storage.AppendWatcher) (<-chan struct{}, <-chan error) {
	notes := make(chan struct{}, 100)
	done := make(chan error, 1)
	go func() {
		done <- s.WatchAppends(ctx, func() {
			select {
			case notes <- struct{}{}:
			default:
			}
		})
	}()
	return notes, done
}

// expect waits for a notification, or fails the test.
func expect(t *testing.T, notes <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-notes:
	case <-time.After(5 * time.Second):
		t.Fatalf("no notification %s", what)
	}
}

// settled waits for the one notification WatchAppends sends when, a
// short while after notifications, no append is in flight any more (for
// appends that rolled back without notifying).
func settled(t *testing.T, notes <-chan struct{}) {
	t.Helper()
	expect(t, notes, "once no append is in flight")
}

// quiet fails the test when a notification arrives within a short while.
func quiet(t *testing.T, notes <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-notes:
		t.Fatalf("a notification %s", what)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestWatchAppends(t *testing.T) {
	schema := newSchema(t)
	watcher, writer := openIn(t, schema), openURLIn(t, schema) // two "processes"
	other := openIn(t, newSchema(t))
	ctx, cancel := context.WithCancel(context.Background())
	notes, done := watch(ctx, watcher.(storage.AppendWatcher))
	expect(t, notes, "when the watch starts")
	quiet(t, notes, "without an append")

	if _, err := writer.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "x",
		Events: []storage.Event{event("A", "")}}); err != nil {
		t.Fatal(err)
	}
	expect(t, notes, "after an append by another process")
	settled(t, notes)
	quiet(t, notes, "twice for one append")

	// AppendAll of three batches is one transaction: one notification.
	var reqs []storage.AppendRequest
	for i := range 3 {
		reqs = append(reqs, storage.AppendRequest{AggregateType: "t", AggregateID: fmt.Sprint("y", i),
			Events: []storage.Event{event("A", "")}})
	}
	if _, err := writer.AppendAll(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	expect(t, notes, "after AppendAll")
	settled(t, notes)
	quiet(t, notes, "twice for one AppendAll")

	// A refused append writes nothing and notifies nobody; nor do appends
	// to another schema.
	if _, err := writer.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "x",
		ExpectedVersion: storage.ExpectVersion(5), Events: []storage.Event{event("A", "")}}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("append at a wrong version: %v", err)
	}
	if _, err := other.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "x",
		Events: []storage.Event{event("A", "")}}); err != nil {
		t.Fatal(err)
	}
	quiet(t, notes, "for a refused append or an append to another schema")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("WatchAppends after its context is done = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchAppends did not return when its context was done")
	}
}

func TestWatchAppendsStops(t *testing.T) {
	pool := testPool(t)
	schema := newSchema(t)
	s := openURLIn(t, schema)
	ctx := context.Background()

	// A lost connection ends the watch with ErrUnavailable.
	notes, done := watch(ctx, s.(storage.AppendWatcher))
	expect(t, notes, "when the watch starts")
	var killed int
	if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = left('eventstore watch ' || $1, 63)`, schema+".appends").Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminate the listening connection: %d terminated, %v", killed, err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("WatchAppends after its connection was lost = %v, want ErrUnavailable", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchAppends did not return when its connection was lost")
	}

	// Close ends the watch with ErrClosed, and a watch after Close fails.
	notes, done = watch(ctx, s.(storage.AppendWatcher))
	expect(t, notes, "when the watch starts again")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, storage.ErrClosed) {
			t.Errorf("WatchAppends after Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchAppends did not return on Close")
	}
	if err := s.(storage.AppendWatcher).WatchAppends(ctx, func() {}); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("WatchAppends on a closed Storage = %v, want ErrClosed", err)
	}
}
