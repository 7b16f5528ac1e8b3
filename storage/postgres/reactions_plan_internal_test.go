package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// TestFinishReactionsPlan checks that FinishReactions' statement finds
// its reactions by primary key, planned for its arguments and as the
// generic plan a prepared statement gets after a few executions, among
// 20,000 active reactions: through another index it would read every
// active reaction for each batch of outcomes.
func TestFinishReactionsPlan(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	def := storage.ReactionDefinitionRecord{Name: "r", Spec: []byte(`{}`), CreatedAt: t0}
	if err := s.CreateReactionDefinition(ctx, def); err != nil {
		t.Fatal(err)
	}
	var in []storage.Reaction
	for i := range 20_000 {
		due := t0.Add(time.Duration(i) * time.Millisecond)
		in = append(in, storage.Reaction{ID: fmt.Sprintf("r-%04d", i), Definition: "r", AggregateType: "order",
			AggregateID: fmt.Sprint("o-", i), EventID: fmt.Sprint("e-", i), EventType: "placed",
			CreatedAt: due, TriggerAt: due, DueAt: due, Payload: []byte(`{}`)})
	}
	if err := s.ScheduleReactions(ctx, storage.ReactionSchedule{Definition: "r", Spec: def.Spec, To: 1, Insert: in, At: t0}); err != nil {
		t.Fatal(err)
	}
	// Statistics as autovacuum gathers them after such a change. With
	// them, below a few thousand reactions the planner rightly reads the
	// whole table (1 to 2 ms). Without any (a table never analyzed, as
	// where autovacuum is off), it takes a tenant for 0.5 % of the rows
	// and reads them all through another index (4.6 ms at 30,000), still
	// less than the statement per outcome this one replaced took among
	// 5,000 (9 to 35 ms per 50).
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.q("{{schema}}.reactions_rows, {{schema}}.reaction_queue_rows")); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	got, err := s.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now.Add(time.Minute), Claim: "k", Limit: 50})
	if err != nil || len(got) != 50 {
		t.Fatalf("claim: %d, %v", len(got), err)
	}
	checkFinishPlan(t, s, got, "k")
}

// TestClaimReactionsPlan checks that ClaimReactions' statement reads the
// due reactions from their index and updates them by primary key, reading
// no other row of the table, planned for its arguments and as a generic
// plan, with statistics taken while every reaction was pending and a
// table that then filled with finished ones (and, without vacuum, their
// dead versions); then the same for FinishReactions' statement. (The join
// the claim replaced, and the outcome record, read the whole table in some
// benchmark runs under such statistics; this test did not make the planner
// choose that, so it guards the statements as they are rather than the
// difference.)
func TestClaimReactionsPlan(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour)
	def := storage.ReactionDefinitionRecord{Name: "r", Spec: []byte(`{}`), CreatedAt: t0}
	if err := s.CreateReactionDefinition(ctx, def); err != nil {
		t.Fatal(err)
	}
	// Payloads of a usual event's size: how many rows fit a page weighs
	// in the planner's choice.
	payload := []byte(`{"metadata":{"aggregateId":"o-1","aggregateType":"order"},"event":{"data":{"note":"` + strings.Repeat("x", 300) + `"}}}`)
	schedule := func(from, n int, checkpoint int64) {
		var in []storage.Reaction
		for i := from; i < from+n; i++ {
			due := t0.Add(time.Duration(i) * time.Millisecond)
			in = append(in, storage.Reaction{ID: fmt.Sprintf("r-%05d", i), Definition: "r", AggregateType: "order",
				AggregateID: fmt.Sprint("o-", i), EventID: fmt.Sprint("e-", i), EventType: "placed",
				CreatedAt: due, TriggerAt: due, DueAt: due, Payload: payload})
		}
		if err := s.ScheduleReactions(ctx, storage.ReactionSchedule{Definition: "r", Spec: def.Spec, From: checkpoint, To: checkpoint + 1, Insert: in, At: t0}); err != nil {
			t.Fatal(err)
		}
	}
	schedule(0, 2000, 0)
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.q("{{schema}}.reactions_rows, {{schema}}.reaction_queue_rows")); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for {
		got, err := s.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now.Add(time.Minute), Claim: "k", Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		var outcomes []storage.ReactionOutcome
		for _, r := range got {
			outcomes = append(outcomes, storage.ReactionOutcome{ID: r.ID, Claim: "k", State: storage.ReactionCompleted, At: now})
		}
		if _, err := s.FinishReactions(ctx, outcomes); err != nil {
			t.Fatal(err)
		}
	}
	schedule(2000, 200, 1)
	for _, mode := range []string{"auto", "force_generic_plan"} {
		plan := explainReactions(t, s, mode, claimReactionsSQL,
			time.Now().UnixMicro(), 64, time.Now().Add(time.Minute).UnixMicro(), "x")
		claimed, read := tableRowsRead(t, plan)
		if claimed != 64 || read > 2*64 {
			t.Errorf("plan_cache_mode %s: claimed %v reactions reading %v rows of the table; want 64 reading 128 at most:\n%s",
				mode, claimed, read, plan)
		}
	}
	// And FinishReactions' statement, for 64 of them claimed.
	got, err := s.ClaimReactions(ctx, storage.ReactionClaim{Now: time.Now(), Until: time.Now().Add(time.Minute), Claim: "k2", Limit: 64})
	if err != nil || len(got) != 64 {
		t.Fatalf("claim: %d, %v", len(got), err)
	}
	checkFinishPlan(t, s, got, "k2")
}

// tableRowsRead returns the rows an EXPLAIN (ANALYZE, FORMAT JSON) plan
// of an UPDATE of the reactions wrote, and the rows its scans of the
// reactions table read (returned, or read and dropped by a filter).
func tableRowsRead(t *testing.T, plan json.RawMessage) (updated, read float64) {
	t.Helper()
	var tree []struct{ Plan map[string]any }
	if err := json.Unmarshal(plan, &tree); err != nil {
		t.Fatal(err)
	}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if n["Relation Name"] == "reactions_rows" && n["Node Type"] != "ModifyTable" {
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
	updated, _ = tree[0].Plan["Actual Rows"].(float64)
	return updated, read
}

// checkFinishPlan explains FinishReactions' statement completing rs,
// claimed under claim, planned for its arguments and as a generic plan,
// and fails t unless it updates them all reading no more than twice as
// many rows of the table.
func checkFinishPlan(t *testing.T, s *store, rs []storage.Reaction, claim string) {
	t.Helper()
	now := time.Now()
	n := len(rs)
	ids, claims, states, dues, finished, errs := make([]string, n), make([]string, n), make([]int16, n), make([]int64, n), make([]int64, n), make([]string, n)
	for i, r := range rs {
		ids[i], claims[i], states[i], dues[i], finished[i] = r.ID, claim, int16(storage.ReactionCompleted), -1, now.UnixMicro()
	}
	for _, mode := range []string{"auto", "force_generic_plan"} {
		plan := explainReactions(t, s, mode, finishReactionsSQL, ids, claims, states, dues, finished, errs)
		updated, read := tableRowsRead(t, plan)
		if updated != float64(n) || read > float64(2*n) {
			t.Errorf("plan_cache_mode %s: updated %v reactions reading %v rows of the table; want %d reading %d at most:\n%s",
				mode, updated, read, n, 2*n, plan)
		}
	}
}

// explainReactions prepares statement sql of this package and runs it with
// args under EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE with plan_cache_mode
// mode ("auto": its first execution, planned for the arguments;
// "force_generic_plan": the plan a prepared statement settles on after a
// few executions; t fails unless the server ran that kind), in s's tenant,
// in a transaction it rolls back, and returns the plan. The transaction's
// eventstore.base is set, as an append's reserve statement sets it, for
// the append statements.
func explainReactions(t *testing.T, s *store, mode, sql string, args ...any) json.RawMessage {
	t.Helper()
	ctx := context.Background()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, setTenantSQL, s.tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('eventstore.base', '100000', true)`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	// EXPLAIN of a statement with parameters plans it for their values
	// whatever plan_cache_mode says; only EXECUTE of a prepared statement
	// runs the plan that mode picks. PREPARE outlives the transaction: a
	// name of its own, deallocated on the same connection.
	name := fmt.Sprintf("reactions_plan_%d", time.Now().UnixNano())
	if _, err := tx.Exec(ctx, "PREPARE "+name+" AS "+s.q(sql)); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = tx.Exec(ctx, "DEALLOCATE "+name) }()
	// EXECUTE takes no bound parameters (a utility statement declares
	// none): each argument goes in as a literal of the parameter's type,
	// which the server writes.
	var types []string
	if err := tx.QueryRow(ctx, "SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = $1", name).Scan(&types); err != nil {
		t.Fatal(err)
	}
	if len(types) != len(args) {
		t.Fatalf("statement takes %d parameters, given %d", len(types), len(args))
	}
	literals := make([]string, len(args))
	for i, a := range args {
		var lit string
		if err := tx.QueryRow(ctx, "SELECT quote_nullable($1::"+types[i]+")", a).Scan(&lit); err != nil {
			t.Fatal(err)
		}
		literals[i] = lit + "::" + types[i]
	}
	var plan json.RawMessage
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE "+name+"("+strings.Join(literals, ", ")+")").Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var generic, custom int64
	if err := tx.QueryRow(ctx, "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = $1", name).Scan(&generic, &custom); err != nil {
		t.Fatal(err)
	}
	if want := mode == "force_generic_plan"; (generic == 1) != want || generic+custom != 1 {
		t.Fatalf("plan_cache_mode %s: the statement ran %d generic and %d custom plans", mode, generic, custom)
	}
	return plan
}
