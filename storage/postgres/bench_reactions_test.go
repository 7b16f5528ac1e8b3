package postgres_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkReactionDeliveryWrites measures what deliveries write to the
// database: one op is a claim of 64 due reactions and the record of their
// 64 outcomes (what a reactions.Engine writes per 64 deliveries at a
// steady rate), among 20,000 pending reactions with payloads of the usual
// size. Besides the time it reports the WAL the server wrote per delivery
// (WAL-B/delivery), which every commit of a saving client waits to be
// flushed behind and which, unlike the time, does not depend on what else
// the machine is doing. Run it with
//
//	go test ./storage/postgres -run '^$' -bench ReactionDeliveryWrites -benchtime 200x
func BenchmarkReactionDeliveryWrites(b *testing.B) {
	const batch, pending = 64, 20_000
	pool := benchPool(b)
	_, s, _ := benchStore(b, pool)
	rs := s.(storage.ReactionStorage)
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
	for i := 0; i < pending; i += 1000 {
		var in []storage.Reaction
		for j := i; j < i+1000; j++ {
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
	wal0 := walPosition(b, pool)
	outcomes := make([]storage.ReactionOutcome, 0, batch)
	for b.Loop() {
		now := time.Now()
		claim := uuid.NewString()
		got, err := rs.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now.Add(time.Minute), Claim: claim, Limit: batch})
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != batch {
			b.Fatalf("claimed %d reactions, want %d: run fewer iterations", len(got), batch)
		}
		outcomes = outcomes[:0]
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
	wal := walPosition(b, pool) - wal0
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/delivery")
	b.ReportMetric(float64(wal)/float64(b.N*batch), "WAL-B/delivery")
}

// walPosition returns the server's current WAL insert position in bytes.
func walPosition(b *testing.B, pool *pgxpool.Pool) int64 {
	var n int64
	if err := pool.QueryRow(b.Context(), `SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
