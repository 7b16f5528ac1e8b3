package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
)

// TestMigrateQueuesActiveReactions builds a schema at version 9 with a
// pending reaction that is due, one due later, one being attempted and
// one completed, and checks that Open queues exactly the pending and
// ongoing ones (schema version 10), with their state and due time, and
// that deliveries go on from there: the due one is claimed, the ongoing
// one only once its lease ends, the completed one again after an Execute.
func TestMigrateQueuesActiveReactions(t *testing.T) {
	s, other := openBatchTestSchema(t)
	ctx := context.Background()
	schema := "v9_" + other[1:len(other)-1]
	quoted := pgx.Identifier{schema}.Sanitize()
	t.Cleanup(func() { _, _ = s.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+quoted+" CASCADE") })
	now := time.Now().UTC().Truncate(time.Microsecond)
	at := func(d time.Duration) int64 { return now.Add(d).UnixMicro() }
	var rows strings.Builder
	for i, r := range []struct {
		id    string
		state int
		due   int64
		claim string
	}{
		{"r-due", 0, at(-time.Minute), ""},
		{"r-later", 0, at(time.Hour), ""},
		{"r-ongoing", 1, at(2 * time.Second), "old-claim"},
		{"r-done", 2, at(-time.Hour), ""},
	} {
		fmt.Fprintf(&rows, `INSERT INTO {{schema}}.reactions_rows (tenant, id, definition, aggregate_type, aggregate_id, event_id,
	event_type, state, created_at, trigger_at, due_at, finished_at, attempts, claim, last_error, payload)
VALUES ('%s', '%s', 'r', 'order', 'o-%d', 'e-%d', 'placed', %d, %d, %d, %d, 0, 1, '%s', '', '\x7b7d');
`, DefaultTenant, r.id, i, i, r.state, at(-time.Hour), r.due, r.due, r.claim)
	}
	var sql strings.Builder
	sql.WriteString(`CREATE SCHEMA {{schema}};
CREATE TABLE {{schema}}.schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
`)
	for v := 1; v <= 9; v++ {
		fmt.Fprintf(&sql, "%s\nINSERT INTO {{schema}}.schema_migrations (version) VALUES (%d);\n", migrations[v-1].sql, v)
	}
	sql.WriteString(`INSERT INTO {{schema}}.reaction_definitions_rows (tenant, name, spec, created_at, checkpoint)
VALUES ('` + DefaultTenant + `', 'r', '\x7b7d', 0, 0);
` + rows.String())
	if _, err := s.pool.Exec(ctx, qualify(quoted, sql.String())); err != nil {
		t.Fatal(err)
	}

	m, err := open(ctx, s.pool, &Options{Schema: schema})
	if err != nil {
		t.Fatalf("open a version 9 schema: %v", err)
	}
	defer m.Close()
	queue := func() string {
		t.Helper()
		rs, err := s.pool.Query(ctx, qualify(quoted, `SELECT id, state, due_at FROM {{schema}}.reaction_queue_rows ORDER BY id`))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rs.Next() {
			var id string
			var state int16
			var due int64
			if err := rs.Scan(&id, &state, &due); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s:%d:%d", id, state, due))
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, " ")
	}
	if got, want := queue(), fmt.Sprintf("r-due:0:%d r-later:0:%d r-ongoing:1:%d", at(-time.Minute), at(time.Hour), at(2*time.Second)); got != want {
		t.Fatalf("queue after the migration:\n got %s\nwant %s", got, want)
	}
	if due, ok, err := m.NextReactionDue(ctx); err != nil || !ok || !due.Equal(now.Add(-time.Minute)) {
		t.Errorf("NextReactionDue = %v, %v, %v; want %v", due, ok, err, now.Add(-time.Minute))
	}
	claim := func(at time.Time, want ...string) {
		t.Helper()
		got, err := m.ClaimReactions(ctx, storage.ReactionClaim{Now: at, Until: at.Add(time.Minute), Claim: "c-" + at.String(), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.ID)
			if errs, err := m.FinishReactions(ctx, []storage.ReactionOutcome{{ID: r.ID, Claim: r.Claim, State: storage.ReactionCompleted, At: at}}); err != nil || errs[0] != nil {
				t.Fatalf("finish %s: %v, %v", r.ID, errs, err)
			}
		}
		if strings.Join(ids, " ") != strings.Join(want, " ") {
			t.Errorf("claim at %v took %v, want %v", at.Sub(now), ids, want)
		}
	}
	claim(now, "r-due")
	claim(now.Add(3*time.Second), "r-ongoing")
	if err := m.ExecuteReaction(ctx, "r-done", now.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	claim(now.Add(5*time.Second), "r-done")
	if got, want := queue(), fmt.Sprintf("r-later:0:%d", at(time.Hour)); got != want {
		t.Errorf("queue after the deliveries:\n got %s\nwant %s", got, want)
	}
}
