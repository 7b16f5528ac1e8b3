package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
)

// TestListAggregatesPlans checks that SQLite serves ListAggregates from
// the partial index events_aggregates (one entry per aggregate), never
// scanning or sorting the type's events, and that the page is right on
// aggregates of several events.
func TestListAggregatesPlans(t *testing.T) {
	ctx := context.Background()
	s, err := open(filepath.Join(t.TempDir(), "es.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 300 aggregates of 3 events (versions 1, 1, 2) in two types.
	if _, err := s.writeDB.ExecContext(ctx, `
WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n < 1799)
INSERT INTO events (position, aggregate_type, aggregate_id, event_id, event_type, version, sequence, recorded_at, feed_sequence)
SELECT n + 1, CASE WHEN n % 2 = 0 THEN 'a' ELSE 'b' END, printf('id-%04d', n / 6), printf('e-%d', n), 'T',
       CASE WHEN (n / 2) % 3 = 2 THEN 2 ELSE 1 END, (n / 2) % 3 + 1, 1000 + n, n + 1
FROM g;
ANALYZE;`); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []struct {
		sql  string
		args []any
	}{{aggregateCountSQL, []any{"a"}}, {aggregatePageSQL, []any{"a", 10, 100}}} {
		text := explainQueryPlan(t, s, stmt.sql, stmt.args...)
		if !strings.Contains(text, "events_aggregates") || strings.Contains(text, "TEMP B-TREE") || strings.Contains(text, "SCAN events") {
			t.Errorf("the plan of\n%s\nmust read events_aggregates without scanning or sorting events:\n%s", stmt.sql, text)
		}
	}
	list, err := s.ListAggregates(ctx, storage.AggregateQuery{AggregateType: "a", Skip: 100, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if list.Total != 300 || len(list.Aggregates) != 3 {
		t.Fatalf("Total %d, %d aggregates; want 300 and 3", list.Total, len(list.Aggregates))
	}
	a := list.Aggregates[0]
	if a.ID != "id-0100" || a.Version != 2 || a.CreatedAt.UnixMicro() != 1000+600 || a.UpdatedAt.UnixMicro() != 1000+604 {
		t.Errorf("aggregate %+v, want id-0100 at version 2, created at 1600 µs, updated at 1604 µs", a)
	}
}
