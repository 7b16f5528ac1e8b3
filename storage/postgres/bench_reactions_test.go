package postgres_test

import (
	"testing"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/storagetest"
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
	storagetest.ScheduleDueReactions(b, rs, pending)
	wal0 := walPosition(b, pool)
	for b.Loop() {
		storagetest.DeliverBatch(b, rs, batch)
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
