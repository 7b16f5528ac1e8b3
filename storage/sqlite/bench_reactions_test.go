package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/eventkit-go/eventstore/storage/storagetest"
)

// BenchmarkReactionDeliveryWrites measures the writes that deliveries cost
// on the one write connection, which saves wait for: one op is a claim of
// 64 due reactions and the record of their 64 outcomes (what a
// reactions.Engine writes per 64 deliveries at a steady rate), among
// 100,000 pending reactions with payloads of the usual size. Run it with
//
//	go test ./storage/sqlite -run '^$' -bench ReactionDeliveryWrites
//
// and compare it with the time of a lone save (BenchmarkInterleaved).
func BenchmarkReactionDeliveryWrites(b *testing.B) {
	const batch, pending = 64, 100_000
	s, err := sqlite.Open(filepath.Join(b.TempDir(), "r.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rs := s.(storage.ReactionStorage)
	storagetest.ScheduleDueReactions(b, rs, pending)
	for b.Loop() {
		storagetest.DeliverBatch(b, rs, batch)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/delivery")
}
