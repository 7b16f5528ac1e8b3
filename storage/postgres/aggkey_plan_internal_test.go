package postgres

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestAggregateKeyExpressions checks that the constant forms of the
// aggregate's key and condition (aggKeyOfRow, sameAggregate) are those
// aggKey builds, so that every statement compares the
// expression events_aggregate_key indexes.
func TestAggregateKeyExpressions(t *testing.T) {
	if got := aggKey("tenant::text", "aggregate_type", "aggregate_id"); got != aggKeyOfRow {
		t.Errorf("aggKey of a row = %s; aggKeyOfRow = %s", got, aggKeyOfRow)
	}
	if key := aggKeyOfRow + " = " + aggKey(tenantText, "$1::text", "$2::text") + " AND "; !strings.HasPrefix(sameAggregate, key) {
		t.Errorf("sameAggregate = %s; want it to start with %s", sameAggregate, key)
	}
	if !strings.Contains(migrations[17].sql, aggKeyOfRow) {
		t.Errorf("migration 18 does not index aggKeyOfRow:\n%s", migrations[17].sql)
	}
}

// TestAggregateReadsUseAggregateKey checks that every statement that reads
// one aggregate (schema version 18: events_aggregate_key, the aggregate's
// key and the sequence) finds its rows through that index, reading about
// the rows it needs of events_rows, not the 25,000 of the table, planned
// for its arguments and as a generic plan.
func TestAggregateReadsUseAggregateKey(t *testing.T) {
	s := openBatchTest(t)
	insertLongAggregate(t, s)
	at := time.Now().UTC()
	stale := int64(1)
	cases := []planCase{
		// the 100 events of other-7
		{"load", s.sql.load, 150, "", []any{"account", "other-7"}},
		// versions (19990, 20000] of long, and its head
		{"loadRange", s.sql.loadRange, 100, "", []any{"account", "long", int64(19990), int64(20000), false}},
		{"loadRange to the end", s.sql.loadRange, 100, "", []any{"account", "long", int64(19990), int64(20000), true}},
		// refused: long is at version 20,000
		{"appendLean", s.sql.appendLean, 100, "", []any{"account", "long", "new", "Deposited", []byte(`{}`), at, &stale, nil, nil}},
		{"appendSingle", s.sql.appendSingle, 100, "", []any{"account", "long", &stale, "new", "Deposited", []byte(`{}`), at,
			nil, false, false, int64(0), nil}},
		// the 100 events of other-7, counted twice (scanned, then deleted)
		{"deleteAgg", s.sql.deleteAgg, 250, "", []any{"account", "other-7"}},
		{"saveSnapshot", s.sql.saveSnapshot, 100, "", []any{"account", "long", int64(5), int64(1), []byte(`{}`), at}},
		// a page of 10 aggregates: their first events, then each one's last
		{"listAggregates", listAggregatesSQL(), 100, "", []any{"account", int64(0), int64(10)}},
	}
	for i := range cases {
		cases[i].index = "events_aggregate_key"
	}
	checkPlanReads(t, s, cases)
}

// TestAggregateHeadsReadOneRow checks that the statements that read the
// last (or first) event of an aggregate read about one row of events_rows
// for an aggregate of 20,000 events whose length the statistics do not
// know (they were taken when every aggregate had 10 events), planned for
// their arguments and as generic plans. With the tenant, type and id
// compared inside the look-up (schema version 18 before lastOfAggregate),
// the planner expected one row and read all 20,000 through a bitmap scan
// and a sort: every save of a long aggregate read all its events.
func TestAggregateHeadsReadOneRow(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, qualify(s.schema, inDefaultTenant+`
INSERT INTO {{schema}}.events (position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence,
	recorded_at, feed_sequence, tx)
SELECT g, 'account', 'a-' || g % 100, gen_random_uuid()::text, 'Deposited', '{}', g / 100 + 1, g / 100 + 1,
	now(), g, 0
FROM generate_series(0, 999) g;
ANALYZE {{schema}}.events_rows;
INSERT INTO {{schema}}.events (position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence,
	recorded_at, feed_sequence, tx)
SELECT 1000 + g, 'account', 'long', 'e' || g, 'Deposited', '{"cents":100}', g, g, now(), 1000 + g, 0
FROM generate_series(1, 20000) g;`))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC()
	stale := int64(1) // long is at version 20,000: every append is refused
	cases := []planCase{
		{"appendLean", s.sql.appendLean, 100, "", []any{"account", "long", "new", "Deposited", []byte(`{}`), at, &stale, nil, nil}},
		{"appendSingle", s.sql.appendSingle, 100, "", []any{"account", "long", &stale, "new", "Deposited", []byte(`{}`), at,
			nil, false, false, int64(0), nil}},
		{"appendOne", s.sql.appendOne, 100, "", []any{"account", "long", &stale, []string{"new"}, []string{"Deposited"},
			[][]byte{[]byte(`{}`)}, []time.Time{at}, nil, false, false, int64(0), nil}},
		{"append", s.sql.append, 100, "", []any{"account", "long", []string{"new"}, &stale, []string{"Deposited"},
			[][]byte{[]byte(`{}`)}, []time.Time{at}, nil, int64(0), nil}},
		{"appendGroup", s.sql.appendGroup, 100, "", []any{[]string{"account", "account"}, []string{"long", "a-1"},
			[]*int64{&stale, &stale}, []int64{1, 1}, []int64{1, 2}, []string{"new", "x"}, []string{"Deposited", "Deposited"},
			[][]byte{[]byte(`{}`), []byte(`{}`)}, []time.Time{at, at}, nil, []int64{1, 1}, int64(0), false,
			[]bool{false, false}, nil}},
		{"loadRange", s.sql.loadRange, 100, "", []any{"account", "long", int64(19990), int64(20000), false}},
		{"loadRange to the end", s.sql.loadRange, 100, "", []any{"account", "long", int64(19990), int64(20000), true}},
		{"saveSnapshot", s.sql.saveSnapshot, 100, "", []any{"account", "long", int64(5), int64(1), []byte(`{}`), at}},
	}
	checkPlanReads(t, s, cases)
}

// insertLongAggregate stores the events of the plan tests of one
// aggregate: account "long" of 20,000 events (ids e1 to e20000) and
// accounts other-0 to other-49 of 100 events each, and analyzes the table.
func insertLongAggregate(t *testing.T, s *store) {
	t.Helper()
	_, err := s.pool.Exec(context.Background(), qualify(s.schema, inDefaultTenant+`
INSERT INTO {{schema}}.events (position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence,
	recorded_at, feed_sequence, tx)
SELECT g, 'account', 'long', 'e' || g, 'Deposited', '{"cents":100}', g, g, now(), g, 0
FROM generate_series(1, 20000) g;
INSERT INTO {{schema}}.events (position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence,
	recorded_at, feed_sequence, tx)
SELECT 20000 + g, 'account', 'other-' || g % 50, gen_random_uuid()::text, 'Deposited', '{}', g / 50 + 1, g / 50 + 1,
	now(), 20000 + g, 0
FROM generate_series(1, 5000) g;
ANALYZE {{schema}}.events_rows;`))
	if err != nil {
		t.Fatal(err)
	}
}

// planCase is a statement a plan test runs with its arguments, and the
// most rows of events_rows it may read; index, when set, must be in its
// plan.
type planCase struct {
	name  string
	sql   string
	most  float64
	index string
	args  []any
}

// checkPlanReads runs each case's statement under EXPLAIN ANALYZE, planned
// for its arguments and as a generic plan, and fails the test when it
// reads more rows of events_rows than the case allows or plans without
// its index.
func checkPlanReads(t *testing.T, s *store, cases []planCase) {
	t.Helper()
	for _, c := range cases {
		for _, mode := range []string{"auto", "force_generic_plan"} {
			plan := explainReactions(t, s, mode, c.sql, c.args...)
			read := eventRowsRead(t, plan)
			t.Logf("%s, plan_cache_mode %s: %v rows of events_rows read", c.name, mode, read)
			if read > c.most || (c.index != "" && !strings.Contains(string(plan), c.index)) {
				t.Errorf("%s, plan_cache_mode %s: read %v rows of events_rows (want at most %v), index %q:\n%s",
					c.name, mode, read, c.most, c.index, plan)
			}
		}
	}
}
