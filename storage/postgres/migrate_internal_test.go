package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
)

// TestMigrateFromVersion1 builds a schema as the first version of the
// package left it, with events and projection states, and checks that
// Open migrates it: existing batches get FeedSequences in position order,
// states a CreatedAt and no reference, definitions their instance counts,
// and appends go on after the existing numbers.
func TestMigrateFromVersion1(t *testing.T) {
	s, schema, q := version1Schema(t, "v1_", "")
	ctx := context.Background()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	// Batches in position order: a/x v1 (1, 2), b/y v1 (3), a/z v1 (4),
	// a/x v2 (5, 6, 7), b/y v2 (8).
	rows := []struct {
		typ, id      string
		version, seq int64
	}{{"a", "x", 1, 1}, {"a", "x", 1, 2}, {"b", "y", 1, 1}, {"a", "z", 1, 1}, {"a", "x", 2, 3}, {"a", "x", 2, 4}, {"a", "x", 2, 5}, {"b", "y", 2, 2}}
	for i, r := range rows {
		_, err := s.pool.Exec(ctx, qualify(q, `INSERT INTO {{schema}}.events
(position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at)
VALUES ($1, $2, $3, gen_random_uuid()::text, 'E', NULL, $4, $5, $6)`), i+1, r.typ, r.id, r.version, r.seq, at)
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.pool.Exec(ctx, qualify(q, `
INSERT INTO {{schema}}.definitions (name, spec, created_at, checkpoint) VALUES ('p', '{}', now(), 8), ('empty', '{}', now(), 0);
INSERT INTO {{schema}}.projection_states (name, instance_id, data, position, updated_at)
VALUES ('p', 'x', '{"n":1}', 7, '2026-01-02 03:04:05+00'), ('p', 'z', '{"n":2}', 4, '2026-01-02 03:04:05+00');`))
	if err != nil {
		t.Fatal(err)
	}

	m, err := open(ctx, s.pool, &Options{Schema: schema})
	if err != nil {
		t.Fatalf("open a version 1 schema: %v", err)
	}
	defer m.Close()
	page, err := m.ReadFeed(ctx, storage.FeedQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	wantSeq := []int64{1, 1, 1, 2, 3, 3, 3, 2}
	if len(page.Events) != len(wantSeq) {
		t.Fatalf("migrated feed has %d events, want %d", len(page.Events), len(wantSeq))
	}
	for i, e := range page.Events {
		if e.FeedSequence != wantSeq[i] || e.EncryptedData != "" {
			t.Errorf("migrated event at %d: FeedSequence %d, EncryptedData %q; want %d, \"\"", e.Position, e.FeedSequence, e.EncryptedData, wantSeq[i])
		}
	}
	for typ, want := range map[string]int64{"a": 3, "b": 2, "": 8} {
		if head, err := m.FeedHead(ctx, typ); err != nil || head != want {
			t.Errorf("FeedHead(%q) after migration = %d, %v; want %d", typ, head, err, want)
		}
	}
	aggs, err := m.ListAggregates(ctx, storage.AggregateQuery{AggregateType: "a", Limit: 10})
	if err != nil || aggs.Total != 2 || len(aggs.Aggregates) != 2 || aggs.Aggregates[0].ID != "x" || aggs.Aggregates[0].Version != 2 ||
		aggs.Aggregates[1].ID != "z" || aggs.Aggregates[1].Version != 1 || !aggs.Aggregates[0].CreatedAt.Equal(at) {
		t.Errorf("ListAggregates after migration = %+v, %v; want a/x at version 2 (created %v) and a/z at 1", aggs, err, at)
	}
	// Appends go on above the migrated numbers (not necessarily right
	// after them: numbers may have gaps).
	res, err := m.Append(ctx, request("w", 0, batchEvent("A")))
	if err != nil || res.Position <= 8 {
		t.Fatalf("append after migration = %+v, %v; want a position above 8", res, err)
	}
	agg, err := m.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: "w"})
	if err != nil || agg.Events[0].FeedSequence < 1 {
		t.Errorf("first batch of a new type after migration: %+v, %v; want a FeedSequence of at least 1", agg, err)
	}
	next := request("x", 2, batchEvent("A"), batchEvent("B"))
	next.AggregateType = "a"
	res2, err := m.Append(ctx, next)
	if err != nil || res2.Version != 3 || res2.Position <= res.Position+1 {
		t.Fatalf("append of two events to a/x after migration = %+v, %v; want version 3 above position %d", res2, err, res.Position)
	}
	ax, err := m.Load(ctx, storage.LoadQuery{AggregateType: "a", AggregateID: "x", AfterVersion: 2})
	if err != nil || len(ax.Events) != 2 || ax.Events[0].FeedSequence <= 3 || ax.Events[1].FeedSequence != ax.Events[0].FeedSequence ||
		ax.Events[1].Position != res2.Position || ax.Events[0].Position != res2.Position-1 {
		t.Errorf("a's next batch after migration = %+v, %v; want two events ending at %d with one FeedSequence above the migrated 3", ax, err, res2.Position)
	}
	if head, err := m.FeedHead(ctx, "a"); err != nil || head != ax.Events[0].FeedSequence {
		t.Errorf("FeedHead(\"a\") after its next batch = %d, %v; want %d", head, err, ax.Events[0].FeedSequence)
	}
	list, err := m.ListProjections(ctx, storage.ProjectionQuery{Name: "p", Sort: storage.SortByCreatedAt, Limit: 10})
	if err != nil || list.Total != 2 || len(list.States) != 2 {
		t.Fatalf("list migrated states = %+v, %v; want 2", list, err)
	}
	for _, st := range list.States {
		if !st.CreatedAt.Equal(st.UpdatedAt) || st.Reference != (storage.Reference{}) {
			t.Errorf("migrated state %q: CreatedAt %v (UpdatedAt %v), Reference %+v; want CreatedAt = UpdatedAt, no reference",
				st.InstanceID, st.CreatedAt, st.UpdatedAt, st.Reference)
		}
	}
	if list, err := m.ListProjections(ctx, storage.ProjectionQuery{Name: "empty"}); err != nil || list.Total != 0 {
		t.Errorf("count of a migrated projection without instances = %+v, %v", list, err)
	}
	var version int
	if err := s.pool.QueryRow(ctx, qualify(q, `SELECT max(version) FROM {{schema}}.schema_migrations`)).Scan(&version); err != nil || version != len(migrations) {
		t.Errorf("schema version after Open = %d, %v; want %d", version, err, len(migrations))
	}
}

// version1Schema creates a schema, named prefix and a random suffix and
// dropped after the test, as the first version of the package left it,
// then runs rows (SQL with {{schema}}, may be empty) in it. It returns a
// Storage on another schema of the same database, for its pool, and the
// schema's name and quoted name.
func version1Schema(t *testing.T, prefix, rows string) (s *store, schema, quoted string) {
	t.Helper()
	s, other := openBatchTestSchema(t)
	schema = prefix + other[1:len(other)-1]
	quoted = pgx.Identifier{schema}.Sanitize()
	t.Cleanup(func() { _, _ = s.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+quoted+" CASCADE") })
	if _, err := s.pool.Exec(context.Background(), qualify(quoted, `
CREATE SCHEMA {{schema}};
CREATE TABLE {{schema}}.schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());
`+migrations[0].sql+`
INSERT INTO {{schema}}.schema_migrations (version) VALUES (1);
`+rows)); err != nil {
		t.Fatal(err)
	}
	return s, schema, quoted
}
