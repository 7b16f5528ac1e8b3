package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// TestGroupNeverReusesDeletedNumbers deletes the latest batches, then
// appends a group (the appendGroup statement) and a group that falls back
// to one statement per request: both continue above the deleted numbers,
// positions and FeedSequences.
func TestGroupNeverReusesDeletedNumbers(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	var nums numbering // positions as numbered without gaps
	nums.checkResults(t, s.runBatch(ctx, []storage.AppendRequest{
		request("x", 0, batchEvent("A")), request("y", 0, batchEvent("A"), batchEvent("B")),
	}), []appendResult{ok(1, 1), ok(1, 3)})
	feedSeq := func() int64 { // the highest FeedSequence of t so far
		t.Helper()
		head, err := s.FeedHead(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		return head
	}
	given := feedSeq()
	if err := s.DeleteAggregate(ctx, "t", "y"); err != nil {
		t.Fatal(err)
	}
	// One statement: y again from version 1, after the deleted position
	// and FeedSequence.
	nums.checkResults(t, s.runBatch(ctx, []storage.AppendRequest{
		request("y", 0, batchEvent("C")), request("z", 0, batchEvent("C")),
	}), []appendResult{ok(1, 4), ok(1, 5)})
	for _, id := range []string{"y", "z"} {
		agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: id})
		if err != nil || len(agg.Events) != 1 || agg.Events[0].FeedSequence <= given {
			t.Fatalf("%s after the deletion = %+v, %v; want one event with a FeedSequence above %d", id, agg, err, given)
		}
		given = agg.Events[0].FeedSequence
	}
	if head := feedSeq(); head != given {
		t.Errorf("FeedHead(t) = %d; want the last batch's FeedSequence %d", head, given)
	}
	if err := s.DeleteAggregateType(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	// x at version 1 is refused, so the group falls back to savepoints.
	nums.checkResults(t, s.runBatch(ctx, []storage.AppendRequest{
		request("x", 1, batchEvent("D")), request("w", 0, batchEvent("D")),
	}), []appendResult{{Err: storage.ErrConflict}, ok(1, 6)})
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 10})
	if err != nil || len(page.Events) != 1 || page.Events[0].AggregateID != "w" || page.Events[0].FeedSequence <= given {
		t.Fatalf("feed after the deletions = %+v, %v; want w alone with a FeedSequence above %d", page.Events, err, given)
	}
	if head := feedSeq(); head != page.Events[0].FeedSequence {
		t.Errorf("FeedHead(t) = %d; want w's FeedSequence %d", head, page.Events[0].FeedSequence)
	}
}

// TestAppendAllOneTransaction checks that AppendAll writes its batches
// with one transaction, and that a refused batch (a conflict, or input the
// server rejects) leaves nothing behind, also when a batch before it was a
// duplicate.
func TestAppendAllOneTransaction(t *testing.T) {
	s, schema := openBatchTestSchema(t)
	ctx := context.Background()
	a := batchEvent("A")
	res, err := s.AppendAll(ctx, []storage.AppendRequest{
		request("x", 0, a), request("y", 0, batchEvent("A"), batchEvent("B")), request("z", -1, batchEvent("A")),
	})
	if err != nil || len(res) != 3 || res[2].Version != 1 || res[2].Duplicate || res[0].Position >= res[1].Position-1 || res[1].Position >= res[2].Position {
		t.Fatalf("AppendAll = %+v, %v; want three batches written in request order", res, err)
	}
	head := res[2].Position
	if n := xmins(t, s, schema, 1, math.MaxInt64); n != 1 {
		t.Errorf("AppendAll wrote with %d transactions, want 1", n)
	}
	for name, c := range map[string]struct {
		reqs  []storage.AppendRequest
		index int
		err   error
	}{
		"conflict":              {[]storage.AppendRequest{request("x", -1, a), request("v", 0, batchEvent("C")), request("y", 0, batchEvent("C"))}, 2, storage.ErrConflict},
		"bad input":             {[]storage.AppendRequest{request("v", 0, batchEvent("C")), request("u", 0, batchEvent("Bad\x00"))}, 1, storage.ErrInvalid},
		"lone conflict":         {[]storage.AppendRequest{request("x", 5, batchEvent("C"))}, 0, storage.ErrConflict},
		"lone conflict, two":    {[]storage.AppendRequest{request("x", 5, batchEvent("C"), batchEvent("D"))}, 0, storage.ErrConflict},
		"same aggregate, stale": {[]storage.AppendRequest{request("v", 0, batchEvent("C")), request("v", 0, batchEvent("D"))}, 1, storage.ErrConflict},
	} {
		_, err := s.AppendAll(ctx, c.reqs)
		var be *storage.BatchError
		if !errors.As(err, &be) || be.Index != c.index || !errors.Is(err, c.err) || be.AggregateID != c.reqs[c.index].AggregateID {
			t.Errorf("%s: AppendAll = %v; want a *BatchError for request %d wrapping %v", name, err, c.index, c.err)
		}
		if got, err := s.FeedHead(ctx, ""); err != nil || got != head {
			t.Errorf("%s: FeedHead after a refused AppendAll = %d, %v; want %d (nothing written)", name, got, err, head)
		}
		if page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 100}); err != nil || len(page.Events) != 4 {
			t.Errorf("%s: a refused AppendAll wrote: the feed holds %d events, %v; want 4", name, len(page.Events), err)
		}
	}
	// A duplicate among new batches: the others are written after it.
	res, err = s.AppendAll(ctx, []storage.AppendRequest{request("x", -1, a), request("v", 0, batchEvent("C"))})
	if err != nil || !res[0].Duplicate || res[0].Position != 1 || res[1].Version != 1 || res[1].Duplicate || res[1].Position <= head {
		t.Errorf("AppendAll with a duplicate = %+v, %v; want x's original position 1, then v at version 1 above position %d", res, err, head)
	}
}

// TestInstanceCount checks the count of instances that definitions keep
// for unfiltered lists against the rows, through new and replaced states,
// deletes, a refused commit, reset and rename.
func TestInstanceCount(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	for _, name := range []string{"p", "q"} {
		if err := s.CreateDefinition(ctx, storage.DefinitionRecord{Name: name, Spec: []byte(`{}`), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	states := func(name string, ids ...string) []storage.ProjectionState {
		var out []storage.ProjectionState
		for _, id := range ids {
			out = append(out, storage.ProjectionState{Name: name, InstanceID: id, Data: []byte(`{}`), Position: 1,
				CreatedAt: time.Now(), UpdatedAt: time.Now()})
		}
		return out
	}
	check := func(step, name string, want int64) {
		t.Helper()
		var rows int64
		if err := s.queryRow(ctx, qualify(s.schema, `SELECT count(*) FROM {{schema}}.projection_states WHERE name = $1`), name).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		list, err := s.ListProjections(ctx, storage.ProjectionQuery{Name: name})
		if err != nil || list.Total != want || rows != want {
			t.Errorf("%s: %s has Total %d (%v) and %d rows, want %d", step, name, list.Total, err, rows, want)
		}
	}
	commit := func(c storage.ProjectionCommit) error { return s.CommitProjection(ctx, c) }
	if err := commit(storage.ProjectionCommit{Name: "p", From: 0, To: 1, States: states("p", "a", "b", "c")}); err != nil {
		t.Fatal(err)
	}
	check("three new", "p", 3)
	if err := commit(storage.ProjectionCommit{Name: "p", From: 1, To: 2, States: states("p", "a", "d"), Deletes: []string{"b", "nope"}}); err != nil {
		t.Fatal(err)
	}
	check("one replaced, one new, one deleted, one unknown deleted", "p", 3)
	if err := commit(storage.ProjectionCommit{Name: "p", From: 1, To: 3, States: states("p", "e"), Deletes: []string{"a"}}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("stale commit: %v, want ErrConflict", err)
	}
	check("refused commit", "p", 3)
	if err := commit(storage.ProjectionCommit{Name: "q", From: 0, To: 1, States: states("q", "a")}); err != nil {
		t.Fatal(err)
	}
	if err := s.RenameProjection(ctx, "p", "q"); err != nil {
		t.Fatal(err)
	}
	check("renamed over q", "q", 3)
	check("renamed away", "p", 0)
	if err := s.ResetProjection(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	check("reset", "q", 0)
}

// TestListPlansUseIndexes checks that PostgreSQL serves each order of
// ListProjections from an index, without sorting the projection's
// instances, on a projection of 20,000 instances.
func TestListPlansUseIndexes(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, qualify(s.schema, inDefaultTenant+`
INSERT INTO {{schema}}.definitions (name, spec, created_at, instances) VALUES ('p', '{}', now(), 20000), ('q', '{}', now(), 20000);
INSERT INTO {{schema}}.projection_states (name, instance_id, data, position, created_at, updated_at, ref_rank, ref_num, ref_text)
SELECT n, 'i' || g, '{}', g, now() - g * interval '1 s', now(), g % 3, CASE WHEN g % 3 = 0 THEN g ELSE 0 END, CASE WHEN g % 3 = 1 THEN 'r' || g ELSE '' END
FROM generate_series(1, 20000) g, (VALUES ('p'), ('q')) v(n);
ANALYZE {{schema}}.projection_states_rows;`))
	if err != nil {
		t.Fatal(err)
	}
	for _, sort := range []storage.ProjectionSort{storage.SortByID, storage.SortByReference, storage.SortByCreatedAt, storage.SortByUpdatedAt} {
		for _, desc := range []bool{false, true} {
			q := storage.ProjectionQuery{Name: "p", Sort: sort, Descending: desc, Skip: 10, Limit: 100}
			sql, args := s.listSQL(q)
			rows, err := s.query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "+sql, args...)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			text := strings.Join(plan, "\n")
			if !strings.Contains(text, "Index") || strings.Contains(text, "Seq Scan") ||
				strings.Contains(text, "rows=20000") || strings.Contains(text, "rows=40000") {
				t.Errorf("sort %d descending %v: the plan reads the whole projection:\n%s", sort, desc, text)
			}
			list, err := s.ListProjections(ctx, q)
			if err != nil || len(list.States) != 100 || list.Total != 20000 {
				t.Errorf("sort %d descending %v: %d states, Total %d, %v", sort, desc, len(list.States), list.Total, err)
			}
		}
	}
	list, err := s.ListProjections(ctx, storage.ProjectionQuery{Name: "p", From: storage.Reference{Kind: storage.RefText, Text: "r100"},
		To: storage.Reference{Kind: storage.RefText, Text: "r199"}, Sort: storage.SortByReference, Limit: 3})
	var ids []string
	for _, st := range list.States {
		ids = append(ids, fmt.Sprint(st.InstanceID, "=", st.Reference.Text))
	}
	// The same range computed here: texts compare by bytes, ties by id.
	var want []string
	for g := 1; g <= 20000; g++ {
		if text := fmt.Sprint("r", g); g%3 == 1 && text >= "r100" && text <= "r199" {
			want = append(want, fmt.Sprint("i", g, "=", text))
		}
	}
	slices.SortFunc(want, func(a, b string) int {
		return strings.Compare(a[strings.IndexByte(a, '='):], b[strings.IndexByte(b, '='):])
	})
	if err != nil || list.Total != int64(len(want)) || !slices.Equal(ids, want[:3]) {
		t.Errorf("text range: %v, Total %d, %v; want %v, Total %d", ids, list.Total, err, want[:3], len(want))
	}
}

// TestGroupNumbersEachType checks the FeedSequences that one appendGroup
// statement gives to a group mixing aggregate types: each type's batches
// continue that type's numbering, in request order.
func TestGroupNumbersEachType(t *testing.T) {
	s, schema := openBatchTestSchema(t)
	ctx := context.Background()
	typed := func(typ, id string) storage.AppendRequest {
		r := request(id, -1, batchEvent("A"))
		r.AggregateType = typ
		return r
	}
	var nums numbering // positions as numbered without gaps
	nums.checkResults(t, s.runBatch(ctx, []storage.AppendRequest{typed("u", "a")}), []appendResult{ok(1, 1)})
	nums.checkResults(t, s.runBatch(ctx, []storage.AppendRequest{
		typed("t", "a"), typed("u", "b"), typed("t", "b"), typed("v", "a"), typed("u", "c"), typed("t", "c"),
	}), []appendResult{ok(1, 2), ok(1, 3), ok(1, 4), ok(1, 5), ok(1, 6), ok(1, 7)})
	if n := xmins(t, s, schema, nums.pos(t, 1)+1, math.MaxInt64); n != 1 {
		t.Fatalf("the group was written by %d transactions, want 1 (one statement)", n)
	}
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	// Each type's batches get rising FeedSequences in request order, one
	// each (they may have gaps: here they are the batches' positions).
	var got []string
	for _, e := range page.Events {
		got = append(got, e.AggregateType+e.AggregateID)
	}
	if want := "ua ta ub tb va uc tc"; strings.Join(got, " ") != want {
		t.Errorf("batches in position order = %v, want %s", got, want)
	}
	checkFeedNumbers(t, page, 7)
}
