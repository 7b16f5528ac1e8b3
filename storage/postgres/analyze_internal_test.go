package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
)

// TestAnalyzesAfterAppends checks that a Storage analyzes its tables once
// it has appended analyzeAfter[0] events (statistics that autovacuum may
// not have gathered yet), and that a lookup of an aggregate then plans on
// the aggregate's index, not on an index that matches only the tenant.
func TestAnalyzesAfterAppends(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	// A table big enough for an index to beat reading it whole.
	if _, err := s.pool.Exec(ctx, qualify(s.schema, `INSERT INTO {{schema}}.events_rows
SELECT -g, 'acct', 'o' || (g % 2000), gen_random_uuid()::text, 'T', NULL, g / 2000 + 1, g / 2000 + 1, now(), -g, NULL, 0, $1::uuid
FROM generate_series(1, 20000) g`), DefaultTenant); err != nil {
		t.Fatal(err)
	}
	analyzed := func() bool {
		var at *time.Time
		if err := s.pool.QueryRow(ctx, `SELECT greatest(last_analyze, last_autoanalyze) FROM pg_stat_user_tables
WHERE relid = to_regclass($1)`, s.schema+".events_rows").Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at != nil
	}
	for i := range analyzeAfter[0] {
		if _, err := s.Append(ctx, storage.AppendRequest{AggregateType: "acct", AggregateID: fmt.Sprint("a", i%4),
			Events: []storage.Event{{ID: uuid.NewString(), Type: "T", RecordedAt: time.Now().UTC()}}}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for !analyzed() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !analyzed() {
		t.Fatalf("the events table was not analyzed after %d appends", analyzeAfter[0])
	}
	rows, err := s.query(ctx, "EXPLAIN "+s.sql.load, "acct", "a1")
	if err != nil {
		t.Fatal(err)
	}
	var plan string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan += line + "\n"
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "events_aggregate_key") {
		t.Errorf("the load of an aggregate does not plan on an aggregate's index:\n%s", plan)
	}
}
