package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// TestListAggregatesPlan checks that PostgreSQL serves ListAggregates from
// the partial index events_aggregates (one entry per aggregate), never
// scanning or sorting the type's events, on 20,000 aggregates of 3 events
// each in two types (a sort of the page alone is allowed); and that a
// page deep in the list is right.
func TestListAggregatesPlan(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, qualify(s.schema, inDefaultTenant+`
INSERT INTO {{schema}}.events (position, aggregate_type, aggregate_id, event_id, event_type, version, sequence, recorded_at, feed_sequence, tx)
SELECT g + 1, CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, 'id-' || lpad((g / 6)::text, 5, '0'), 'e-' || g, 'T',
       CASE WHEN (g / 2) % 3 = 2 THEN 2 ELSE 1 END, (g / 2) % 3 + 1, 'epoch'::timestamptz + (1000 + g) * interval '1 microsecond', g + 1, 0
FROM generate_series(0, 119999) g`))
	if err != nil {
		t.Fatal(err)
	}
	// As autovacuum would: the visibility map lets the count read the
	// index alone.
	if _, err := s.pool.Exec(ctx, qualify(s.schema, `VACUUM (ANALYZE) {{schema}}.events_rows`)); err != nil {
		t.Fatal(err)
	}
	rows, err := s.query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "+qualify(s.schema, listAggregatesSQL()), "a", int64(100), int64(10))
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	// A sort of the page's rows is fine; reading or sorting the events
	// of the type (60,000) or of the table is not.
	if !strings.Contains(text, "Index Only Scan using events_aggregates") || strings.Contains(text, "Seq Scan") ||
		strings.Contains(text, "rows=60000") || strings.Contains(text, "rows=120000") {
		t.Errorf("the plan reads the type's events instead of the index of aggregates:\n%s", text)
	}
	list, err := s.ListAggregates(ctx, storage.AggregateQuery{AggregateType: "a", Skip: 100, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if list.Total != 20000 || len(list.Aggregates) != 3 {
		t.Fatalf("Total %d, %d aggregates; want 20000 and 3", list.Total, len(list.Aggregates))
	}
	a := list.Aggregates[0]
	if a.ID != "id-00100" || a.Version != 2 || !a.CreatedAt.Equal(time.UnixMicro(1600)) || !a.UpdatedAt.Equal(time.UnixMicro(1604)) {
		t.Errorf("aggregate %+v, want id-00100 at version 2, created at 1600 µs, updated at 1604 µs", a)
	}
}
