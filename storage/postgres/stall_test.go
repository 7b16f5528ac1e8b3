package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/jackc/pgx/v5"
)

// TestStalledDatabase holds an exclusive lock on the events table, as a
// stalled database would hold every query: reads give up after
// ReadTimeout and saves, the one in the stuck transaction and the ones
// queued behind it, after WriteTimeout, each with ErrUnavailable; a
// caller's own deadline is still its own error. Once the lock is gone,
// everything works again.
func TestStalledDatabase(t *testing.T) {
	schema := newSchema(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, testPool(t), &postgres.Options{Schema: schema,
		ReadTimeout: 300 * time.Millisecond, WriteTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "a",
		Events: []storage.Event{event("E", "")}}); err != nil {
		t.Fatal(err)
	}

	locker, err := pgx.Connect(ctx, databaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{schema, "events"}.Sanitize()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if _, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: "a"}); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("load while stalled: %v, want ErrUnavailable", err)
	}
	if _, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 10}); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("read feed while stalled: %v, want ErrUnavailable", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = s.Load(short, storage.LoadQuery{AggregateType: "t", AggregateID: "a"})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("load with the caller's own shorter deadline: %v, want context.DeadlineExceeded", err)
	}
	errs := make([]error, 6)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "b",
				Events: []storage.Event{event("E", "")}})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("save %d while stalled: %v, want ErrUnavailable", i, err)
		}
	}
	// Bounded: two reads, the short one and every save (one transaction
	// and the queue behind it) in well under the 30 s defaults.
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the stalled calls took %v", took)
	}

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "b",
		Events: []storage.Event{event("E", "")}}); err != nil {
		t.Errorf("save after the stall: %v", err)
	}
	if agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: "b"}); err != nil || agg.Version != 1 {
		t.Errorf("load after the stall: version %d, %v; want 1 (nothing of the stalled saves stored)", agg.Version, err)
	}
}
