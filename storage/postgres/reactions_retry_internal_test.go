package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// TestDeleteAggregateReactionsWaitsWithoutHolding: a deletion of an
// aggregate's reactions that finds one of them locked by another
// transaction (a claim of a reaction queued again, say) gives up its own
// locks and starts again until it can take them all, instead of waiting
// while it holds some (which deadlocked with claims and outcome records);
// it succeeds once the other transaction ends, and fails with
// ErrUnavailable when that never happens within its attempts.
func TestDeleteAggregateReactionsWaitsWithoutHolding(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	def := storage.ReactionDefinitionRecord{Name: "r", Spec: []byte(`{}`), CreatedAt: t0}
	if err := s.CreateReactionDefinition(ctx, def); err != nil {
		t.Fatal(err)
	}
	var in []storage.Reaction
	for i := range 4 {
		in = append(in, storage.Reaction{ID: fmt.Sprint("r-", i), Definition: "r", AggregateType: "order",
			AggregateID: fmt.Sprint("o-", i%2), EventID: fmt.Sprint("e-", i), EventType: "placed",
			CreatedAt: t0, TriggerAt: t0, DueAt: t0, Payload: []byte(`{}`)})
	}
	if err := s.ScheduleReactions(ctx, storage.ReactionSchedule{Definition: "r", Spec: def.Spec, To: 1, Insert: in, At: t0}); err != nil {
		t.Fatal(err)
	}
	// Another transaction holds the row of reaction r-1 (of o-1) only.
	hold := func() (release func()) {
		tx, err := s.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, setTenantSQL, s.tenant); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, s.q(`SELECT 1 FROM {{schema}}.reactions WHERE id = 'r-1' FOR UPDATE`)); err != nil {
			t.Fatal(err)
		}
		return func() { _ = tx.Rollback(ctx) }
	}
	release := hold()
	done := make(chan error, 1)
	go func() { done <- s.DeleteAggregateReactions(ctx, "order", "o-1") }()
	time.Sleep(20 * time.Millisecond)
	release()
	if err := <-done; err != nil {
		t.Fatalf("deletion after the other transaction ended: %v", err)
	}
	list, err := s.ListReactions(ctx, storage.ReactionQuery{Limit: 10})
	if err != nil || list.Total != 2 || list.Reactions[0].AggregateID != "o-0" || list.Reactions[1].AggregateID != "o-0" {
		t.Fatalf("after deleting o-1's reactions: %+v, %v", list, err)
	}
	if due, ok, err := s.NextReactionDue(ctx); err != nil || !ok || !due.Equal(t0.Truncate(time.Microsecond)) {
		t.Errorf("the queue after the deletion: %v %v %v", due, ok, err)
	}

	// Held for longer than every attempt: ErrUnavailable, nothing deleted.
	var rest []storage.Reaction
	for i := range 2 {
		rest = append(rest, storage.Reaction{ID: fmt.Sprint("r-", i+1, "b"), Definition: "r", AggregateType: "order",
			AggregateID: "o-1", EventID: fmt.Sprint("e-", i, "b"), EventType: "placed",
			CreatedAt: t0, TriggerAt: t0, DueAt: t0, Payload: []byte(`{}`)})
	}
	if err := s.ScheduleReactions(ctx, storage.ReactionSchedule{Definition: "r", Spec: def.Spec, From: 1, To: 2, Insert: rest, At: t0}); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, setTenantSQL, s.tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, s.q(`SELECT 1 FROM {{schema}}.reactions WHERE id = 'r-2b' FOR UPDATE`)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAggregateReactions(ctx, "order", "o-1"); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("deletion while a reaction stays locked: %v, want ErrUnavailable", err)
	}
	if list, err := s.ListReactions(ctx, storage.ReactionQuery{AggregateID: "o-1"}); err != nil || list.Total != 2 {
		t.Errorf("o-1's reactions after the failed deletion: %+v, %v; want both kept", list, err)
	}
}
