package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDatedReadPlans checks that the reads by date use the indexes on
// recorded_at and the position, never a scan of the whole table.
func TestDatedReadPlans(t *testing.T) {
	s, err := open(filepath.Join(t.TempDir(), "es.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		query string
		args  []any
		want  []string
	}{
		{datedCountQuery, []any{1, 2, 3, 4}, []string{"USING COVERING INDEX events_by_time (recorded_at>? AND recorded_at<?)"}},
		{datedTypeCountQuery, []any{"t", 1, 2, 3, 4}, []string{"USING INDEX events_by_time (recorded_at>? AND recorded_at<?)"}},
		{datedPickQuery, []any{1, 2, 3, 4}, []string{"USING COVERING INDEX events_by_time (recorded_at>? AND recorded_at<?)"}},
		{datedTypePickQuery, []any{"t", 1, 2, 3, 4}, []string{"USING INDEX events_by_time (recorded_at>? AND recorded_at<?)"}},
		{datedSpanQuery, []any{1, 2, 3, 4, nil}, []string{"USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"}},
		{datedRowsQuery, []any{1, 2, 3, 4}, []string{"USING INTEGER PRIMARY KEY (rowid=?)", "USING COVERING INDEX events_by_time"}},
		{datedTypeRowsQuery, []any{"t", 1, 2, 3, 4}, []string{"USING INTEGER PRIMARY KEY (rowid=?)", "USING INDEX events_by_time (recorded_at>? AND recorded_at<?)"}},
		{recordedSpanQuery, nil, []string{"SEARCH events USING COVERING INDEX events_by_time"}},
		{coveredQuery, []any{1, 2, 3, 4}, []string{"USING INTEGER PRIMARY KEY (rowid>?)"}},
		{coveredTypeQuery, []any{"t", 1, 2, 3, 4, 5}, []string{"USING INDEX events_by_feed (aggregate_type=? AND feed_sequence>?)"}},
		{typeFirstAfterQuery, []any{"t", 1}, []string{"USING COVERING INDEX events_by_feed"}},
	} {
		all := explainQueryPlan(t, s, c.query, c.args...)
		for _, w := range c.want {
			if !strings.Contains(all, w) {
				t.Errorf("plan of %s\n%s\ndoes not use %s", c.query, all, w)
			}
		}
		if (c.query == coveredQuery || c.query == coveredTypeQuery || c.query == datedSpanQuery) && strings.Contains(all, "TEMP B-TREE") {
			t.Errorf("plan of %s sorts the rows: %s", c.query, all)
		}
		for _, d := range strings.Split(all, "\n") {
			if strings.HasPrefix(d, "SCAN events") {
				t.Errorf("plan of %s scans the table: %s", c.query, all)
			}
		}
	}
}
