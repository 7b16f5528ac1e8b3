package sqlite

import (
	"context"
	"strings"
	"testing"
)

// explainQueryPlan returns the lines of EXPLAIN QUERY PLAN of query with
// args, as a read connection plans it, one a line.
func explainQueryPlan(t *testing.T, s *store, query string, args ...any) string {
	t.Helper()
	rows, err := s.readDB.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := closeRows(rows); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}
