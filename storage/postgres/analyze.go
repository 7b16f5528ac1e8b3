package postgres

import (
	"context"
	"sync/atomic"
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

// analyzeStatesAfter are the stages of projection states committed after
// which a Storage analyzes projection_states. A new projection's rebuild
// fills the table far faster than autovacuum analyzes it, and with the
// statistics of an emptier table (those the stages of analyzeAfter took
// before any instance existed) the planner reads every instance of the
// projection for each page's LoadProjections (instance_id = ANY($2) on
// an index that matches only the tenant and the name; their estimated
// costs tie with the primary key's), so each page cost more than the one
// before: 0.06× SQLite's events/s over 50,000 instances
// (TestLoadStatesPlan).
var analyzeStatesAfter = []int64{1_000, 10_000, 100_000, 1_000_000}

// noteAppended counts n events appended by s and, when that passes the
// next of analyzeAfter, analyzes the tables in the background.
func (s *store) noteAppended(n int) {
	if nextStage(&s.appended, &s.analyzed, analyzeAfter, n) {
		names := make([]string, len(tenantTables))
		for i, t := range tenantTables {
			names[i] = t.name
		}
		go s.analyze(names...)
	}
}

// noteCommitted counts n projection states committed by s and, when that
// passes the next of analyzeStatesAfter, analyzes projection_states in the
// background.
func (s *store) noteCommitted(n int) {
	if nextStage(&s.committed, &s.statesAnalyzed, analyzeStatesAfter, n) {
		go s.analyze("projection_states")
	}
}

// nextStage adds n to count and reports whether that passed the next of
// stages after the stage reached; it then moves reached on, so that one
// caller of those passing a stage at once is told.
func nextStage(count *atomic.Int64, reached *atomic.Int32, stages []int64, n int) bool {
	if n <= 0 {
		return false
	}
	total := count.Add(int64(n))
	for {
		stage := reached.Load()
		if int(stage) >= len(stages) || total < stages[stage] {
			return false
		}
		if reached.CompareAndSwap(stage, stage+1) {
			return true
		}
	}
}

// analyze runs ANALYZE on the tables of the schema named (as in
// tenantTables), ending early when the
// Storage is closed. A failure is ignored: statistics are an optimization,
// and autovacuum or the next stage tries again.
func (s *store) analyze(tables ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx, stop := s.untilClosed(ctx)
	defer stop()
	for _, t := range tables {
		if _, err := s.pool.Exec(ctx, "ANALYZE "+s.schema+"."+pgx.Identifier{t + "_rows"}.Sanitize()); err != nil {
			return
		}
	}
}
