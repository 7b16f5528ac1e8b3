package postgres

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
)

// eventRowsRead returns the rows of events_rows that the scans of an
// EXPLAIN (ANALYZE, FORMAT JSON) plan read: returned, or read and dropped
// by a filter.
func eventRowsRead(t *testing.T, plan json.RawMessage) float64 {
	t.Helper()
	var tree []struct{ Plan map[string]any }
	if err := json.Unmarshal(plan, &tree); err != nil {
		t.Fatal(err)
	}
	var read float64
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if n["Relation Name"] == "events_rows" {
			loops, _ := n["Actual Loops"].(float64)
			rows, _ := n["Actual Rows"].(float64)
			read += rows * loops
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
	return read
}

// TestLoadAfterSnapshotReadsOnlyTheTail checks that the load that follows
// a snapshot (Load with AfterVersion, no limit) of a 100,000-event
// aggregate reads about the 100 events after the snapshot's version from
// the aggregate's index, not its earlier events, planned for its
// arguments and as a generic plan, and that the snapshot is read by its
// key.
func TestLoadAfterSnapshotReadsOnlyTheTail(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	// 99,900 events in 999 versions of 100, then 100 versions of one: the
	// snapshot is at version 999.
	_, err := s.pool.Exec(ctx, qualify(s.schema, inDefaultTenant+`
INSERT INTO {{schema}}.events (position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence,
	recorded_at, feed_sequence, tx)
SELECT g, 'account', 'long', gen_random_uuid()::text, 'Deposited', '{"cents":100}',
	CASE WHEN g <= 99900 THEN (g - 1) / 100 + 1 ELSE 999 + (g - 99900) END, g, now(), g, 0
FROM generate_series(1, 100000) g;
INSERT INTO {{schema}}.events (position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence,
	recorded_at, feed_sequence, tx)
SELECT 100001 + g, 'account', 'other-' || g % 50, gen_random_uuid()::text, 'Deposited', '{}', g / 50 + 1, g / 50 + 1, now(), 100001 + g, 0
FROM generate_series(0, 4999) g;
ANALYZE {{schema}}.events_rows;`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSnapshot(ctx, storage.Snapshot{AggregateType: "account", AggregateID: "long", Version: 999, Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.LoadSnapshot(ctx, "account", "long")
	if err != nil || snap.Version != 999 {
		t.Fatalf("LoadSnapshot: version %d, %v", snap.Version, err)
	}
	agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "account", AggregateID: "long", AfterVersion: snap.Version})
	if err != nil || len(agg.Events) != 100 || agg.Version != 1099 || agg.Events[0].Sequence != 99901 {
		t.Fatalf("Load after the snapshot: %d events, version %d, %v", len(agg.Events), agg.Version, err)
	}
	for _, mode := range []string{"auto", "force_generic_plan"} {
		plan := explainReactions(t, s, mode, s.sql.loadRange, "account", "long", int64(999), int64(math.MaxInt64), true)
		read := eventRowsRead(t, plan)
		t.Logf("plan_cache_mode %s: %v rows of events_rows read for the 100 events after the snapshot", mode, read)
		if read > 400 {
			t.Errorf("plan_cache_mode %s: the load after version 999 read %v rows of events_rows for 100 events; want at most 400:\n%s",
				mode, read, plan)
		}
		plan = explainReactions(t, s, mode, s.sql.loadSnapshot, "account", "long")
		var tree []struct{ Plan map[string]any }
		if err := json.Unmarshal(plan, &tree); err != nil {
			t.Fatal(err)
		}
		if nt := tree[0].Plan["Node Type"]; nt != "Index Scan" {
			t.Errorf("plan_cache_mode %s: LoadSnapshot's statement must be an index scan, got %v:\n%s", mode, nt, plan)
		}
	}
}
