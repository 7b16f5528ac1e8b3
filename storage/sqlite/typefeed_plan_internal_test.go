package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
)

// TestTypeFeedPlansNearTheHead checks that a read of a type's feed after
// a FeedSequence (what a Store's ReadFeed of a type runs) or after a
// position (typeFeedStart's look-ups, then the same read) searches
// events_by_feed from the cursor, in its order, and never scans the events
// table nor sorts, in a store of three types in batches of 10 events and
// 1-event batches near the head, as the growth benchmark fills it: without
// statistics (SQLite's defaults, what a file has unless someone runs
// ANALYZE) and after ANALYZE. It also reads the last 1,000 events of the
// type after a cursor near the head through ReadFeed. (The PostgreSQL
// backend's test of the same name checks its plans; SQLite's plans do not
// depend on the size, so 30,000 events suffice.)
func TestTypeFeedPlansNearTheHead(t *testing.T) {
	ctx := context.Background()
	s, err := open(filepath.Join(t.TempDir(), "es.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Events 1..27,000: batch b (from 0) of 10 events, of type b mod 3
	// on aggregate b mod 900 (version b / 900 + 1), with the type's
	// b / 3 + 1-th feed sequence; then 3,000 batches of one event.
	const batched, single = 27_000, 3_000
	if _, err := s.writeDB.ExecContext(ctx, `
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 30000),
b(n, b, k) AS (SELECT n, CASE WHEN n <= ?1 THEN (n - 1) / 10 ELSE ?1 / 10 + n - ?1 - 1 END,
	CASE WHEN n <= ?1 THEN (n - 1) % 10 ELSE 0 END FROM g)
INSERT INTO events (position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at, feed_sequence)
SELECT n, CASE b % 3 WHEN 0 THEN 'order' WHEN 1 THEN 'customer' ELSE 'item' END, printf('a%d', b % 900),
       printf('e-%d', n), 'Changed', '{"n":1}', b / 900 + 1, n, 1000 + n, b / 3 + 1
FROM b;`, batched); err != nil {
		t.Fatal(err)
	}
	const limit = 1000
	batches := int64(batched/10 + single)
	orders := (batches + 2) / 3
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := s.writeDB.ExecContext(ctx, "ANALYZE"); err != nil {
				t.Fatal(err)
			}
		}
		// After the 1,000th last batch of "order", by FeedSequence.
		page, err := s.ReadFeed(ctx, storage.FeedQuery{AggregateType: "order", AfterFeedSequence: orders - limit, Limit: limit + 2})
		if err != nil || len(page.Events) != limit || page.Events[0].FeedSequence != orders-limit+1 {
			t.Fatalf("ReadFeed after feed sequence %d: %d events, %v", orders-limit, len(page.Events), err)
		}
		// After a position near the head, that of an "order" event.
		after := page.Events[0].Position
		page, err = s.ReadFeed(ctx, storage.FeedQuery{AggregateType: "order", After: after, Limit: limit + 2})
		if err != nil || len(page.Events) != limit-1 || page.Events[0].Position <= after {
			t.Fatalf("ReadFeed after position %d: %d events, %v", after, len(page.Events), err)
		}
		for _, c := range []struct {
			query string
			args  []any
			want  string
		}{
			{feedTypeQuery, []any{"order", orders - limit + 1, 0, limit + 2},
				"SEARCH events USING INDEX events_by_feed (aggregate_type=? AND feed_sequence>?)"},
			{feedTypeQuery, []any{"order", orders - limit + 1, after, limit + 2},
				"SEARCH events USING INDEX events_by_feed (aggregate_type=? AND feed_sequence>?)"},
			{typeAtQuery, []any{after, "order"}, "SEARCH events USING INTEGER PRIMARY KEY (rowid=?)"},
			{typeLastQuery, []any{"order"}, "SEARCH events USING COVERING INDEX events_by_feed (aggregate_type=?)"},
			{typeFirstFromQuery, []any{"order", orders - limit}, "SEARCH events USING COVERING INDEX events_by_feed (aggregate_type=? AND feed_sequence>?)"},
			// The type's head, which a Store reads after the page.
			{`SELECT max(feed_sequence, ` + latestFeedSequence + `) FROM feeds WHERE aggregate_type = ?`, []any{"order"},
				"SEARCH e USING COVERING INDEX events_by_feed (aggregate_type=?)"},
		} {
			plan := explainQueryPlan(t, s, c.query, c.args...)
			if !strings.Contains(plan, c.want) || strings.Contains(plan, "SCAN") || strings.Contains(plan, "TEMP B-TREE") {
				t.Errorf("analyzed %v: the plan of\n%s\nmust %s, neither scan nor sort:\n%s", analyzed, c.query, c.want, plan)
			}
		}
	}
}
