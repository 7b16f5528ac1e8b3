package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
)

// TestLoadAfterSnapshotPlans checks that the reads of a load after a
// snapshot, of a 10,000-event aggregate, search the aggregate's
// (aggregate_type, aggregate_id, sequence) index from a sequence on
// instead of scanning the aggregate's earlier events, that the snapshot is
// read by its key, and that the load returns the 100 events after the
// snapshot's version. (10,000 events, not 100,000: SQLite runs slowly under
// the race detector; the plans do not depend on the size.)
func TestLoadAfterSnapshotPlans(t *testing.T) {
	ctx := context.Background()
	s, err := open(filepath.Join(t.TempDir(), "es.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 9,900 events in 99 versions of 100, then 100 versions of one.
	if _, err := s.writeDB.ExecContext(ctx, `
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 10000)
INSERT INTO events (position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at, feed_sequence)
SELECT n, 'account', 'long', printf('e-%d', n), 'Deposited', '{}',
       CASE WHEN n <= 9900 THEN (n - 1) / 100 + 1 ELSE 99 + (n - 9900) END, n, 1000 + n, n
FROM g;
ANALYZE;`); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveSnapshot(ctx, storage.Snapshot{AggregateType: "account", AggregateID: "long", Version: 99, Data: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.LoadSnapshot(ctx, "account", "long")
	if err != nil || snap.Version != 99 {
		t.Fatalf("LoadSnapshot: version %d, %v", snap.Version, err)
	}
	agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "account", AggregateID: "long", AfterVersion: snap.Version})
	if err != nil || len(agg.Events) != 100 || agg.Version != 199 || agg.Events[0].Sequence != 9901 {
		t.Fatalf("Load after the snapshot: %d events, version %d, %v", len(agg.Events), agg.Version, err)
	}
	for _, stmt := range []struct {
		sql, want string
	}{
		{versionQuery, "USING INDEX sqlite_autoindex_events_1 (aggregate_type=? AND aggregate_id=?)"},
		{versionAtQuery, "USING INDEX sqlite_autoindex_events_1 (aggregate_type=? AND aggregate_id=? AND sequence>?)"},
		{loadQuery, "USING INDEX sqlite_autoindex_events_1 (aggregate_type=? AND aggregate_id=? AND sequence>?)"},
		{`SELECT version, state_version, data, recorded_at FROM snapshots
		WHERE aggregate_type = ? AND aggregate_id = ?`, "USING INDEX sqlite_autoindex_snapshots_1 (aggregate_type=? AND aggregate_id=?)"},
	} {
		args := []any{"account", "long", int64(9900)}[:strings.Count(stmt.sql, "?")]
		text := explainQueryPlan(t, s, stmt.sql, args...)
		if !strings.Contains(text, "SEARCH") || !strings.Contains(text, stmt.want) || strings.Contains(text, "SCAN") {
			t.Errorf("the plan of\n%s\nmust search %q:\n%s", stmt.sql, stmt.want, text)
		}
	}
}
