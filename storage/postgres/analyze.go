package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// The tables' statistics matter more since their keys lead with the tenant
// (schema version 8). Without statistics PostgreSQL estimates every
// equality to select 0.5 % of a table, so on a table of a few thousand rows
// an index that matches only the tenant and an index that matches the
// tenant, the aggregate type and the aggregate id both promise one row; the
// plan a prepared statement keeps (chosen at its sixth run, while the table
// is small) may then scan a tenant's whole feed for each aggregate it looks
// up, and keeps doing so as the table grows, until statistics change.
// Autovacuum analyzes new tables soon, but not where it is off or behind, so
// a Storage analyzes the schema's tables itself after it has appended
// analyzeAfter[i] events: ANALYZE gives the tenant column its real
// distribution (one tenant: no selectivity at all) and makes every
// connection plan its statements again.
var analyzeAfter = []int64{100, 1_000, 10_000, 100_000}

// noteAppended counts n events appended by s and, when that passes the
// next of analyzeAfter, analyzes the tables in the background.
func (s *store) noteAppended(n int) {
	if n <= 0 {
		return
	}
	total := s.appended.Add(int64(n))
	for {
		stage := s.analyzed.Load()
		if int(stage) >= len(analyzeAfter) || total < analyzeAfter[stage] {
			return
		}
		if s.analyzed.CompareAndSwap(stage, stage+1) {
			go s.analyze()
			return
		}
	}
}

// analyze runs ANALYZE on the tables of the schema, ending early when the
// Storage is closed. A failure is ignored: statistics are an optimization,
// and autovacuum or the next stage tries again.
func (s *store) analyze() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, stop := s.untilClosed(ctx)
	defer stop()
	for _, t := range tenantTables {
		if _, err := s.pool.Exec(ctx, "ANALYZE "+s.schema+"."+pgx.Identifier{t.name + "_rows"}.Sanitize()); err != nil {
			return
		}
	}
}
