package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// typeFeedPlanEvents is how many events TestTypeFeedPlansNearTheHead
// stores: enough for the planner to have preferred a bitmap of a third of
// the type, sorted (a scan of the table at 3,000,000), to the reading of
// a type's feed after a FeedSequence near the head through
// events_type_position, the index of schema versions 8 to 15 (seen at
// 200,000 and 600,000).
const typeFeedPlanEvents = 200_000

// TestTypeFeedPlansNearTheHead checks that a read of a type's feed, after
// a position (feedType) or after a FeedSequence (feedSeq, what a Store's
// ReadFeed of a type runs), reads the page through events_type_key in
// position order, and no other rows, at the start, in the middle and near
// the head of a store of typeFeedPlanEvents events of three types in
// batches of 10 (statistics fresh), planned for its arguments and as the
// generic plan of a prepared statement. Before the bound on position was
// given to the planner as a parameter (it was only the result of an
// InitPlan, for which it assumes a third of the type), a cursor near the
// head was read by a (parallel) scan of the table and a sort.
func TestTypeFeedPlansNearTheHead(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	// Event g (from 1) is the (g-1)%10+1-th of batch (g-1)/10, whose
	// type is the batch's number mod 3, on aggregate batch mod 10,000
	// (versions 1, 2, ...), with the batch's first position as its
	// FeedSequence, as appends number them; every row is committed.
	_, err := s.pool.Exec(ctx, qualify(s.schema, inDefaultTenant+fmt.Sprintf(`
INSERT INTO {{schema}}.events (position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence,
	recorded_at, feed_sequence, tx)
SELECT g, (ARRAY['order', 'customer', 'item'])[b %% 3 + 1], 'a' || (b %% 10000), 'e' || g, 'Happened', '{"n":1}',
       b / 10000 + 1, b / 10000 * 10 + (g - 1) %% 10 + 1, timestamptz '2026-01-01 00:00:00+00' + g * interval '1 ms',
       b * 10 + 1, 1
FROM generate_series(1, %d) g, LATERAL (SELECT (g - 1) / 10 AS b) x;
ANALYZE {{schema}}.events_rows;`, typeFeedPlanEvents)))
	if err != nil {
		t.Fatal(err)
	}
	const limit, batches = 1000, typeFeedPlanEvents / 10
	// Batches 0, 3, 6, ... are of type order: at the start, in the
	// middle, and the batch before the last 1,000 events of the type.
	for _, batch := range []int64{0, batches / 2, batches - 3 - 3*limit/10} {
		want := min(limit, 10*((batches-1-batch)/3))
		for _, c := range []struct {
			name string
			sql  string
			args string
		}{
			// After the batch's FeedSequence, its first position.
			{"feedSeq", s.sql.feedSeq, fmt.Sprintf("%d, %d, 'order', 0", batch*10+1, limit)},
			// After the batch's last position.
			{"feedType", s.sql.feedType, fmt.Sprintf("%d, %d, 'order'", batch*10+10, limit)},
		} {
			for _, generic := range []bool{false, true} {
				plan := explainTypeFeed(t, s, c.sql, c.args, generic)
				scans, read, returned := typeFeedPlanReads(t, plan)
				if returned != float64(want) || read > float64(want+20) || len(scans) != 1 ||
					scans[0] != "Index Scan events_type_key" {
					t.Errorf("%s after batch %d (generic plan %v): returned %v events reading %v rows of the table by %v; "+
						"want %d by an index scan of events_type_key reading at most %d:\n%s",
						c.name, batch, generic, returned, read, scans, want, want+20, plan)
				}
			}
		}
	}
}

// explainTypeFeed explains sql, a statement of the type feed, with args
// (SQL literals) under EXPLAIN ANALYZE, as ReadFeed runs it after the
// watermark statement: planned for the arguments or (generic) as the
// generic plan of a prepared statement, which is what a pooled connection
// runs after a few executions.
func explainTypeFeed(t *testing.T, s *store, sql, args string, generic bool) json.RawMessage {
	t.Helper()
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, s.sql.watermark, s.tenant); err != nil {
		t.Fatal(err)
	}
	mode := "force_custom_plan"
	if generic {
		mode = "force_generic_plan"
	}
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	// EXPLAIN of a statement with parameters plans it for their values;
	// only EXECUTE of a prepared statement runs its generic plan. PREPARE
	// outlives the transaction: a name of its own, deallocated on the
	// same connection.
	name := fmt.Sprintf("type_feed_plan_%d", time.Now().UnixNano())
	if _, err := tx.Exec(ctx, "PREPARE "+name+" AS "+sql); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = tx.Exec(ctx, "DEALLOCATE "+name) }()
	var plan json.RawMessage
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE "+name+"("+args+")").Scan(&plan); err != nil {
		t.Fatal(err)
	}
	return plan
}

// typeFeedPlanReads returns the scans of events_rows in plan other than
// those of the head (the backward scan of events_pkey and the partial
// index of rows older than schema version 6), as "node type index name",
// how many rows they read (returned and removed by a filter or recheck),
// and how many of them the scans of events_type_key returned.
func typeFeedPlanReads(t *testing.T, plan json.RawMessage) (scans []string, read, returned float64) {
	t.Helper()
	var tree []struct{ Plan map[string]any }
	if err := json.Unmarshal(plan, &tree); err != nil {
		t.Fatal(err)
	}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		index, _ := n["Index Name"].(string)
		if n["Relation Name"] == "events_rows" && index != "events_pkey" && index != "events_type_feed_before_v6" {
			scans = append(scans, strings.TrimSpace(fmt.Sprint(n["Node Type"], " ", index)))
			loops, _ := n["Actual Loops"].(float64)
			rows, _ := n["Actual Rows"].(float64)
			read += rows * loops
			if index == "events_type_key" {
				returned += rows * loops
			}
			for _, k := range []string{"Rows Removed by Filter", "Rows Removed by Index Recheck"} {
				if v, ok := n[k].(float64); ok {
					read += v
				}
			}
		}
		if kids, ok := n["Plans"].([]any); ok {
			for _, k := range kids {
				walk(k.(map[string]any))
			}
		}
	}
	walk(tree[0].Plan)
	return scans, read, returned
}
