package storagetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
)

// ScheduleDueReactions gives rs a definition "r" and n pending reactions,
// all due already (one a millisecond from an hour ago), with payloads of
// a usual delivery's size: the setting of a backend's benchmark of what
// deliveries write (see DeliverBatch).
func ScheduleDueReactions(b *testing.B, rs storage.ReactionStorage, n int) {
	b.Helper()
	ctx := b.Context()
	t0 := time.Now().Add(-time.Hour)
	def := storage.ReactionDefinitionRecord{Name: "r", Spec: []byte(`{"reactionName":"r"}`), CreatedAt: t0}
	if err := rs.CreateReactionDefinition(ctx, def); err != nil {
		b.Fatal(err)
	}
	payload := []byte(`{"metadata":{"aggregateId":"` + uuid.NewString() + `","aggregateType":"order","timestamp":1764201600000,"sequenceNumber":1,"reactionId":"` +
		uuid.NewString() + `","triggerAt":1764201600000},"event":{"eventId":"` + uuid.NewString() + `","eventType":"placed","data":{"total":12,"note":"` +
		strings.Repeat("x", 120) + `"}}}`)
	checkpoint := int64(0)
	for i := 0; i < n; i += 1000 {
		var in []storage.Reaction
		for j := i; j < min(n, i+1000); j++ {
			due := t0.Add(time.Duration(j) * time.Millisecond)
			in = append(in, storage.Reaction{ID: uuid.NewString(), Definition: "r", AggregateType: "order",
				AggregateID: fmt.Sprint("o-", j), EventID: uuid.NewString(), EventType: "placed",
				CreatedAt: due, TriggerAt: due, DueAt: due, Payload: payload})
		}
		if err := rs.ScheduleReactions(ctx, storage.ReactionSchedule{Definition: "r", Spec: def.Spec,
			From: checkpoint, To: checkpoint + 1, Insert: in, At: t0}); err != nil {
			b.Fatal(err)
		}
		checkpoint++
	}
}

// DeliverBatch writes what a reactions.Engine writes per batch of
// deliveries at a steady rate: a claim of batch due reactions and the
// record of their outcomes, all completed. It fails b unless batch were
// due and every outcome was recorded.
func DeliverBatch(b *testing.B, rs storage.ReactionStorage, batch int) {
	ctx := b.Context()
	now := time.Now()
	claim := uuid.NewString()
	got, err := rs.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now.Add(time.Minute), Claim: claim, Limit: batch})
	if err != nil {
		b.Fatal(err)
	}
	if len(got) != batch {
		b.Fatalf("claimed %d reactions, want %d: run fewer iterations", len(got), batch)
	}
	outcomes := make([]storage.ReactionOutcome, 0, batch)
	for _, r := range got {
		outcomes = append(outcomes, storage.ReactionOutcome{ID: r.ID, Claim: claim, State: storage.ReactionCompleted, At: now})
	}
	errs, err := rs.FinishReactions(ctx, outcomes)
	if err != nil {
		b.Fatal(err)
	}
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}
