package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// TestTypeFeedAfterSequencesOfEveryVersion reads a type's feed after
// FeedSequences numbered both ways: per type (1, 2, 3, ..., below the
// positions), as schema versions before 6 numbered batches, and by first
// position, as appends number them since. It builds a version 1 schema in
// which type a holds every third position (counters 1..1000 at positions
// 3..3000, type b the rest), lets Open migrate it, appends new batches of
// a, then checks that a read after any FeedSequence returns exactly the
// events with a higher one, in position order, and that the statement
// reading it (feedSeq) does not scan rows it then drops: none for cursors
// among or after the old numbers, at most the rest of the cursor's batch
// for new ones.
func TestTypeFeedAfterSequencesOfEveryVersion(t *testing.T) {
	s, schema, _ := version1Schema(t, "v1fs_", `
INSERT INTO {{schema}}.events (position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at)
SELECT p, CASE WHEN p % 3 = 0 THEN 'a' ELSE 'b' END, 'x' || p, gen_random_uuid()::text, 'E', NULL, 1, 1, now()
FROM generate_series(1, 3000) p;`)
	ctx := context.Background()
	m, err := open(ctx, s.pool, &Options{Schema: schema})
	if err != nil {
		t.Fatalf("open a version 1 schema: %v", err)
	}
	defer m.Close()
	for i := range 5 { // new batches of 1, 2, 3, 1, 2 events
		req := request(fmt.Sprint("new", i), 0, batchEvent("A"))
		for range i % 3 {
			req.Events = append(req.Events, batchEvent("A"))
		}
		req.AggregateType = "a"
		if _, err := m.Append(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	all, err := m.ReadFeed(ctx, storage.FeedQuery{AggregateType: "a", Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Events) != 1000+9 || all.Events[999].FeedSequence != 1000 || all.Events[999].Position != 3000 {
		t.Fatalf("type a holds %d events, the 1000th with FeedSequence %d at %d; want 1009, the 1000th numbered 1000 at 3000",
			len(all.Events), all.Events[999].FeedSequence, all.Events[999].Position)
	}
	var cursors []int64
	for _, e := range all.Events {
		if len(cursors) == 0 || cursors[len(cursors)-1] != e.FeedSequence {
			cursors = append(cursors, e.FeedSequence)
		}
	}
	for _, c := range append([]int64{0}, cursors...) {
		page, err := m.ReadFeed(ctx, storage.FeedQuery{AggregateType: "a", AfterFeedSequence: c, Limit: 5000})
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for _, e := range all.Events {
			if e.FeedSequence > c {
				want = append(want, e.Position)
			}
		}
		var got []int64
		for _, e := range page.Events {
			got = append(got, e.Position)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("feed of a after FeedSequence %d: positions %v, want %v", c, got, want)
		}
	}
	newFirst := cursors[1000] // the first batch appended after the migration
	for c, most := range map[int64]float64{1: 0, 500: 0, 999: 0, 1000: 0, newFirst: 0, cursors[1001]: 1} {
		for _, generic := range []bool{false, true} {
			if removed := feedSeqRowsRemoved(t, m, c, generic); removed > most {
				t.Errorf("reading a after FeedSequence %d (generic plan %v) scanned %v rows it dropped, want at most %v",
					c, generic, removed, most)
			}
		}
	}
}

// feedSeqRowsRemoved runs feedSeq for type a after FeedSequence after
// under EXPLAIN ANALYZE, planned for the arguments or (generic) as a
// prepared statement's generic plan, which is what the Storage runs after
// a few executions, and returns the rows its plan read and dropped.
func feedSeqRowsRemoved(t *testing.T, m *store, after int64, generic bool) float64 {
	t.Helper()
	ctx := context.Background()
	tx, err := m.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, setTenantSQL, m.tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('eventstore.wm', '9223372036854775807', true)`); err != nil {
		t.Fatal(err)
	}
	var plan []struct{ Plan map[string]any }
	if generic {
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			t.Fatal(err)
		}
		// PREPARE outlives the transaction: a name of its own, deallocated
		// on the same connection (not DEALLOCATE ALL: pgx's own statements
		// are prepared on it too).
		name := fmt.Sprintf("feed_seq_plan_%d", time.Now().UnixNano())
		if _, err := tx.Exec(ctx, "PREPARE "+name+" AS "+m.sql.feedSeq); err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = tx.Exec(ctx, "DEALLOCATE "+name) }()
		q := fmt.Sprintf("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE %s(%d, 5000, 'a', 0)", name, after)
		if err := tx.QueryRow(ctx, q).Scan(&plan); err != nil {
			t.Fatal(err)
		}
	} else if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+m.sql.feedSeq, after, 5000, "a", 0).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var removed float64
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if v, ok := n["Rows Removed by Filter"].(float64); ok {
			removed += v
		}
		if kids, ok := n["Plans"].([]any); ok {
			for _, k := range kids {
				walk(k.(map[string]any))
			}
		}
	}
	walk(plan[0].Plan)
	if removed > 0 {
		out, _ := json.MarshalIndent(plan, "", " ")
		t.Logf("plan after %d:\n%s", after, out)
	}
	return removed
}
