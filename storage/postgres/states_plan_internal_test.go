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

// TestLoadStatesPlan checks that loadStates (LoadProjections, which a
// projector runs for every page it applies) reads only the instances
// asked for, through the primary key, planned for its arguments and as
// the generic plan of a prepared statement, in a projection of 20,000
// instances whose table was analyzed while empty (as a Storage does after
// its first appends, before any projection has instances), once the
// Storage has analyzed it again after the commits (analyzeStatesAfter).
// On the statistics of the empty table the planner read every instance
// of the projection through another index and filtered them.
func TestLoadStatesPlan(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	now := time.Now().UTC()
	if err := s.CreateDefinition(ctx, storage.DefinitionRecord{Name: "p", Spec: []byte(`{}`), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	commit := func(from, to int64, first, n int) {
		t.Helper()
		c := storage.ProjectionCommit{Name: "p", From: from, To: to}
		for i := first; i < first+n; i++ {
			c.States = append(c.States, storage.ProjectionState{Name: "p", InstanceID: fmt.Sprintf("i%06d", i),
				Data: []byte(`{"count":1}`), Position: to, CreatedAt: now, UpdatedAt: now})
		}
		if err := s.CommitProjection(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	// Statistics of the table while empty, as a Storage gathers them
	// after its first events (analyzeAfter) before any projection has
	// instances.
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.q("{{schema}}.projection_states_rows")); err != nil {
		t.Fatal(err)
	}
	for k := range 20 {
		commit(int64(k), int64(k+1), 50+k*1000, 1000)
	}
	// The commits passed analyzeStatesAfter[1]: wait for the second
	// analysis since the one above.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT analyze_count FROM pg_stat_user_tables WHERE relid = to_regclass($1)`,
			s.schema+".projection_states_rows").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("projection_states analyzed %d times, want 3", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var ids []string
	for i := 50; i < 20_050; i += 200 {
		ids = append(ids, fmt.Sprintf("i%06d", i))
	}
	states, err := s.LoadProjections(ctx, "p", ids)
	if err != nil || len(states) != len(ids) {
		t.Fatalf("LoadProjections: %d states, %v; want %d", len(states), err, len(ids))
	}
	for _, generic := range []bool{false, true} {
		plan := explainStates(t, s, generic, ids)
		read := 0.0
		var walk func(n map[string]any)
		walk = func(n map[string]any) {
			if n["Relation Name"] == "projection_states_rows" {
				loops, _ := n["Actual Loops"].(float64)
				rows, _ := n["Actual Rows"].(float64)
				read += rows * loops
				if v, ok := n["Rows Removed by Filter"].(float64); ok {
					read += v
				}
				if n["Index Name"] != "projection_states_pkey" {
					read += 1e9 // any other way in fails the test
				}
			}
			if kids, ok := n["Plans"].([]any); ok {
				for _, k := range kids {
					walk(k.(map[string]any))
				}
			}
		}
		var tree []struct{ Plan map[string]any }
		if err := json.Unmarshal(plan, &tree); err != nil {
			t.Fatal(err)
		}
		walk(tree[0].Plan)
		if read != float64(len(ids)) {
			t.Errorf("generic plan %v: loading %d instances read %v rows of projection_states (other than by its primary key: 1e9 each); want %d:\n%s",
				generic, len(ids), read, len(ids), plan)
		}
	}
}

// explainStates runs loadStates for ids of projection p under EXPLAIN
// ANALYZE, planned for the arguments or (generic) as the generic plan of
// a prepared statement.
func explainStates(t *testing.T, s *store, generic bool, ids []string) json.RawMessage {
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
	mode := "force_custom_plan"
	if generic {
		mode = "force_generic_plan"
	}
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = "+mode); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("load_states_plan_%d", time.Now().UnixNano())
	if _, err := tx.Exec(ctx, "PREPARE "+name+" AS "+s.sql.loadStates); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = tx.Exec(ctx, "DEALLOCATE "+name) }()
	var plan json.RawMessage
	q := fmt.Sprintf("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE %s('p', '{%s}')", name, strings.Join(ids, ","))
	if err := tx.QueryRow(ctx, q).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	return plan
}
