package storagetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// reactionCases are the cases of storage.ReactionStorage; they are skipped
// for a Storage that does not implement it.
func reactionCases() []testCase {
	return []testCase{
		{"ReactionDefinitions", "reaction definitions are created once (ErrConflict after), read back byte for byte ordered by name, updated with or without their checkpoint, and deleted", testReactionDefinitions},
		{"ScheduleReactionsChecksCheckpoint", "ScheduleReactions writes nothing and fails with ErrConflict unless the checkpoint and spec are those stored", testScheduleCAS},
		{"ScheduleReactionsCancels", "a schedule cancels the definition's pending reactions of the aggregates in Cancel before inserting its own", testScheduleCancel},
		{"ClaimReactionsDueFirst", "claims take due reactions earliest first, up to the limit, with a lease; an ended lease is claimed again; only the current claim may finish", testClaim},
		{"ClaimAndFinishManyReactions", "a claim of hundreds of reactions returns them earliest first, whole, and one FinishReactions records hundreds of outcomes, each with its own state, times and error text byte for byte", testClaimFinishMany},
		{"ClaimReactionsConcurrent", "concurrent claims never take the same reaction twice", testClaimConcurrent},
		{"ListReactions", "ListReactions filters, orders by trigger time then id, pages and counts", testListReactions},
		{"CancelAndExecuteReaction", "only a pending reaction can be cancelled; any but a leased one can be executed anew", testCancelExecute},
		{"DeleteReactionDefinitionCancelsPending", "deleting a definition cancels its pending reactions and keeps the others", testDeleteReactionDef},
		{"DeleteAggregateReactions", "deleting an aggregate's or a type's reactions removes them whatever their state", testDeleteAggReactions},
	}
}

var rt0 = time.Date(2030, 1, 2, 3, 4, 5, 123456000, time.UTC)

func reactionStorage(t *testing.T, h *harness) storage.ReactionStorage {
	t.Helper()
	rs, ok := h.s.(storage.ReactionStorage)
	if !ok {
		t.Skip("the Storage does not implement storage.ReactionStorage")
	}
	return rs
}

func rdef(name string) storage.ReactionDefinitionRecord {
	return storage.ReactionDefinitionRecord{Name: name, Spec: []byte(`{"reactionName":"` + name + `"}`), CreatedAt: rt0, Checkpoint: 7}
}

func newReaction(id, def, agg string, due time.Time) storage.Reaction {
	return storage.Reaction{ID: id, Definition: def, AggregateType: "order", AggregateID: agg, EventID: "e-" + id,
		EventType: "Placed", State: storage.ReactionPending, CreatedAt: rt0, TriggerAt: due, DueAt: due,
		Payload: []byte(`{"event":{"eventId":"e-` + id + `"}}`)}
}

// mustSchedule creates definition def if needed and inserts rs.
func mustSchedule(t *testing.T, s storage.ReactionStorage, def string, rs ...storage.Reaction) {
	t.Helper()
	d, err := s.ReactionDefinition(t.Context(), def)
	if errors.Is(err, storage.ErrNotFound) {
		d = rdef(def)
		if err := s.CreateReactionDefinition(t.Context(), d); err != nil {
			t.Fatalf("CreateReactionDefinition: %v", err)
		}
	} else if err != nil {
		t.Fatalf("ReactionDefinition: %v", err)
	}
	if err := s.ScheduleReactions(t.Context(), storage.ReactionSchedule{Definition: def, Spec: d.Spec,
		From: d.Checkpoint, To: d.Checkpoint + 1, Insert: rs, At: rt0}); err != nil {
		t.Fatalf("ScheduleReactions: %v", err)
	}
}

func mustReaction(t *testing.T, s storage.ReactionStorage, id string) storage.Reaction {
	t.Helper()
	r, err := s.Reaction(t.Context(), id)
	if err != nil {
		t.Fatalf("Reaction %s: %v", id, err)
	}
	return r
}

func testReactionDefinitions(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	ctx := t.Context()
	for _, n := range []string{"b", "a"} {
		if err := s.CreateReactionDefinition(ctx, rdef(n)); err != nil {
			t.Fatalf("CreateReactionDefinition %s: %v", n, err)
		}
	}
	if err := s.CreateReactionDefinition(ctx, rdef("a")); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("a second definition named a: got %v, want ErrConflict", err)
	}
	defs, err := s.ReactionDefinitions(ctx)
	if err != nil || len(defs) != 2 || defs[0].Name != "a" || defs[1].Name != "b" {
		t.Fatalf("ReactionDefinitions: got %+v, %v; want a, b", defs, err)
	}
	if d := defs[0]; string(d.Spec) != string(rdef("a").Spec) || !d.CreatedAt.Equal(rt0) || d.Checkpoint != 7 {
		t.Errorf("definition a reads back as %+v, want %+v", d, rdef("a"))
	}
	if err := s.UpdateReactionDefinition(ctx, "a", []byte(`{"v":2}`), -1); err != nil {
		t.Fatal(err)
	}
	if d := mustRDef(t, s, "a"); string(d.Spec) != `{"v":2}` || d.Checkpoint != 7 {
		t.Errorf("after an update keeping the checkpoint: %+v", d)
	}
	if err := s.UpdateReactionDefinition(ctx, "a", []byte(`{"v":3}`), 42); err != nil {
		t.Fatal(err)
	}
	if d := mustRDef(t, s, "a"); string(d.Spec) != `{"v":3}` || d.Checkpoint != 42 {
		t.Errorf("after an update setting the checkpoint to 42: %+v", d)
	}
	if err := s.UpdateReactionDefinition(ctx, "zz", nil, -1); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("updating an unknown definition: got %v, want ErrNotFound", err)
	}
	if err := s.DeleteReactionDefinition(ctx, "a", rt0); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{s.DeleteReactionDefinition(ctx, "a", rt0), func() error { _, err := s.ReactionDefinition(ctx, "a"); return err }()} {
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("a deleted definition: got %v, want ErrNotFound", err)
		}
	}
}

func mustRDef(t *testing.T, s storage.ReactionStorage, name string) storage.ReactionDefinitionRecord {
	t.Helper()
	d, err := s.ReactionDefinition(t.Context(), name)
	if err != nil {
		t.Fatalf("ReactionDefinition %s: %v", name, err)
	}
	return d
}

func testScheduleCAS(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	ctx := t.Context()
	d := rdef("r")
	if err := s.CreateReactionDefinition(ctx, d); err != nil {
		t.Fatal(err)
	}
	r := newReaction("00000000-0000-4000-8000-000000000001", "r", "a", rt0)
	for _, sc := range []storage.ReactionSchedule{
		{Definition: "r", Spec: d.Spec, From: 6, To: 9, Insert: []storage.Reaction{r}},
		{Definition: "r", Spec: []byte(`{}`), From: 7, To: 9, Insert: []storage.Reaction{r}},
	} {
		if err := s.ScheduleReactions(ctx, sc); !errors.Is(err, storage.ErrConflict) {
			t.Errorf("a schedule from %d with spec %s: got %v, want ErrConflict", sc.From, sc.Spec, err)
		}
	}
	if _, err := s.Reaction(ctx, r.ID); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a refused schedule must insert nothing; Reaction: %v", err)
	}
	if err := s.ScheduleReactions(ctx, storage.ReactionSchedule{Definition: "nope", From: 0, To: 1}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("scheduling for an unknown definition: got %v, want ErrNotFound", err)
	}
	if err := s.ScheduleReactions(ctx, storage.ReactionSchedule{Definition: "r", Spec: d.Spec, From: 7, To: 9, Insert: []storage.Reaction{r}}); err != nil {
		t.Fatal(err)
	}
	got := mustReaction(t, s, r.ID)
	if got.State != storage.ReactionPending || !got.DueAt.Equal(rt0) || !got.TriggerAt.Equal(rt0) || !got.CreatedAt.Equal(rt0) ||
		string(got.Payload) != string(r.Payload) || got.AggregateID != "a" || got.EventID != r.EventID || got.Definition != "r" {
		t.Errorf("the scheduled reaction reads back as %+v, want %+v", got, r)
	}
	if d := mustRDef(t, s, "r"); d.Checkpoint != 9 {
		t.Errorf("checkpoint after the schedule: %d, want 9", d.Checkpoint)
	}
}

func testScheduleCancel(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	mustSchedule(t, s, "r", newReaction("1", "r", "a", rt0), newReaction("2", "r", "b", rt0))
	mustSchedule(t, s, "other", newReaction("3", "other", "a", rt0))
	d := mustRDef(t, s, "r")
	at := rt0.Add(time.Hour)
	if err := s.ScheduleReactions(t.Context(), storage.ReactionSchedule{Definition: "r", Spec: d.Spec, From: d.Checkpoint,
		To: d.Checkpoint + 1, Cancel: []string{"a"}, Insert: []storage.Reaction{newReaction("4", "r", "a", rt0)}, At: at}); err != nil {
		t.Fatal(err)
	}
	want := map[string]storage.ReactionState{"1": storage.ReactionCanceled, "2": storage.ReactionPending,
		"3": storage.ReactionPending, "4": storage.ReactionPending}
	for id, st := range want {
		r := mustReaction(t, s, id)
		if r.State != st {
			t.Errorf("reaction %s: state %d, want %d", id, r.State, st)
		}
		if st == storage.ReactionCanceled && !r.FinishedAt.Equal(at) {
			t.Errorf("reaction %s: FinishedAt %v, want %v", id, r.FinishedAt, at)
		}
	}
}

func testClaim(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	ctx := t.Context()
	mustSchedule(t, s, "r", newReaction("c", "r", "a", rt0.Add(3*time.Second)), newReaction("a", "r", "a", rt0.Add(time.Second)),
		newReaction("b", "r", "a", rt0.Add(2*time.Second)), newReaction("z", "r", "a", rt0.Add(time.Hour)))
	now := rt0.Add(time.Minute)
	if due, ok, err := s.NextReactionDue(ctx); err != nil || !ok || !due.Equal(rt0.Add(time.Second)) {
		t.Errorf("NextReactionDue: %v %v %v, want %v", due, ok, err, rt0.Add(time.Second))
	}
	got, err := s.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now.Add(time.Minute), Claim: "k1", Limit: 2})
	if err != nil || len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" {
		t.Fatalf("claiming 2: got %v, %v; want a, b", reactionIDs(got), err)
	}
	if r := got[0]; r.State != storage.ReactionOngoing || r.Claim != "k1" || r.Attempts != 1 || !r.DueAt.Equal(now.Add(time.Minute)) || len(r.Payload) == 0 {
		t.Errorf("a claimed reaction: %+v", r)
	}
	got, _ = s.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now.Add(time.Minute), Claim: "k2", Limit: 10})
	if len(got) != 1 || got[0].ID != "c" {
		t.Fatalf("the next claim: got %v, want c (z is not due, a and b are leased)", reactionIDs(got))
	}
	later := now.Add(2 * time.Minute)
	got, _ = s.ClaimReactions(ctx, storage.ReactionClaim{Now: later, Until: later.Add(time.Minute), Claim: "k3", Limit: 1})
	if len(got) != 1 || got[0].ID != "a" || got[0].Attempts != 2 {
		t.Fatalf("after the lease ended: got %+v, want a again with 2 attempts", got)
	}
	if err := finishOne(ctx, s, storage.ReactionOutcome{ID: "a", Claim: "k1", State: storage.ReactionCompleted, At: later}); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("finishing under a lost claim: got %v, want ErrConflict", err)
	}
	if err := finishOne(ctx, s, storage.ReactionOutcome{ID: "a", Claim: "k3", State: storage.ReactionCompleted, At: later}); err != nil {
		t.Fatal(err)
	}
	if r := mustReaction(t, s, "a"); r.State != storage.ReactionCompleted || !r.FinishedAt.Equal(later) {
		t.Errorf("a completed reaction: %+v", r)
	}
	retry := later.Add(time.Hour)
	if err := finishOne(ctx, s, storage.ReactionOutcome{ID: "b", Claim: "k1", State: storage.ReactionPending, DueAt: retry, Error: "answered 500"}); err != nil {
		t.Fatal(err)
	}
	if r := mustReaction(t, s, "b"); r.State != storage.ReactionPending || !r.DueAt.Equal(retry) || r.LastError != "answered 500" || r.Attempts != 1 {
		t.Errorf("a reaction to retry: %+v", r)
	}
	if err := finishOne(ctx, s, storage.ReactionOutcome{ID: "nope", Claim: "k1"}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("finishing an unknown reaction: %v, want ErrNotFound", err)
	}
	// Several outcomes at once: each applies or fails alone.
	errs, err := s.FinishReactions(ctx, []storage.ReactionOutcome{
		{ID: "c", Claim: "k2", State: storage.ReactionFailed, At: later, Error: "gave up"},
		{ID: "a", Claim: "k3", State: storage.ReactionCompleted, At: later},
		{ID: "nope", Claim: "k1"},
	})
	if err != nil || len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], storage.ErrConflict) || !errors.Is(errs[2], storage.ErrNotFound) {
		t.Errorf("FinishReactions of an applicable, a finished and an unknown reaction: %v, %v; want nil, ErrConflict, ErrNotFound", errs, err)
	}
	if r := mustReaction(t, s, "c"); r.State != storage.ReactionFailed || r.LastError != "gave up" || !r.FinishedAt.Equal(later) {
		t.Errorf("a failed reaction: %+v", r)
	}
	// Two outcomes for one reaction in one batch (an attempt under a lost
	// claim and the current one): only the current claim's applies.
	mustSchedule(t, s, "r", newReaction("d", "r", "a", rt0))
	if got, _ = s.ClaimReactions(ctx, storage.ReactionClaim{Now: later, Until: later.Add(time.Minute), Claim: "k4", Limit: 1}); len(got) != 1 || got[0].ID != "d" {
		t.Fatalf("claiming d: got %v", reactionIDs(got))
	}
	errs, err = s.FinishReactions(ctx, []storage.ReactionOutcome{
		{ID: "d", Claim: "k0", State: storage.ReactionCompleted, At: later},
		{ID: "d", Claim: "k4", State: storage.ReactionPending, DueAt: retry, Error: "answered 503"},
	})
	if err != nil || len(errs) != 2 || !errors.Is(errs[0], storage.ErrConflict) || errs[1] != nil {
		t.Errorf("FinishReactions of a lost and the current claim of one reaction: %v, %v; want ErrConflict, nil", errs, err)
	}
	if r := mustReaction(t, s, "d"); r.State != storage.ReactionPending || !r.DueAt.Equal(retry) || r.LastError != "answered 503" {
		t.Errorf("d after the current claim's outcome: %+v", r)
	}
}

func testClaimFinishMany(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	ctx := t.Context()
	const n = 600
	var rs []storage.Reaction
	for i := range n {
		// Inserted out of due order, ids not in due order either.
		j := (i * 7) % n
		r := newReaction(fmt.Sprintf("m-%03d", (j*13)%n), "r", fmt.Sprint("a-", j), rt0.Add(time.Duration(j)*time.Millisecond))
		r.Payload = []byte(fmt.Sprintf(`{"n":%d,"text":"\u00e9 \"quoted\""}`, j))
		rs = append(rs, r)
	}
	mustSchedule(t, s, "r", rs...)
	now := rt0.Add(time.Hour)
	got, err := s.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now.Add(time.Minute), Claim: "big", Limit: n + 10})
	if err != nil || len(got) != n {
		t.Fatalf("claiming %d: got %d, %v", n, len(got), err)
	}
	for i, r := range got {
		want := rt0.Add(time.Duration(i) * time.Millisecond)
		if r.TriggerAt.Compare(want) != 0 || r.State != storage.ReactionOngoing || r.Claim != "big" || r.Attempts != 1 ||
			!r.DueAt.Equal(now.Add(time.Minute)) || r.AggregateID != fmt.Sprint("a-", i) ||
			string(r.Payload) != fmt.Sprintf(`{"n":%d,"text":"\u00e9 \"quoted\""}`, i) {
			t.Fatalf("claimed reaction %d: %+v (payload %s), want the one triggered at %v, ongoing under the claim", i, r, r.Payload, want)
		}
	}
	odd := "quote \" \\ back, tab\t newline\n, ünïcode ✓, percent %s, nul-free"
	outcomes := make([]storage.ReactionOutcome, 0, n)
	for i, r := range got {
		o := storage.ReactionOutcome{ID: r.ID, Claim: "big", At: now.Add(time.Duration(i) * time.Microsecond)}
		switch i % 3 {
		case 0:
			o.State = storage.ReactionCompleted
		case 1:
			o.State, o.Error = storage.ReactionFailed, fmt.Sprint(odd, " #", i)
		case 2:
			o.State, o.DueAt, o.Error = storage.ReactionPending, now.Add(time.Duration(i)*time.Second), fmt.Sprint("retry #", i)
		}
		outcomes = append(outcomes, o)
	}
	errs, err := s.FinishReactions(ctx, outcomes)
	if err != nil || len(errs) != n {
		t.Fatalf("FinishReactions of %d: %d errors, %v", n, len(errs), err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("outcome %d: %v", i, e)
		}
	}
	for i, r := range got {
		g := mustReaction(t, s, r.ID)
		o := outcomes[i]
		ok := g.State == o.State && g.LastError == o.Error && g.Claim == ""
		switch o.State {
		case storage.ReactionPending:
			ok = ok && g.DueAt.Equal(o.DueAt) && g.FinishedAt.IsZero()
		default:
			ok = ok && g.FinishedAt.Equal(o.At)
		}
		if !ok {
			t.Fatalf("reaction %d after its outcome %+v: %+v", i, o, g)
		}
	}
	// The same outcomes again: the claim is spent, nothing applies.
	errs, err = s.FinishReactions(ctx, outcomes)
	if err != nil || len(errs) != n {
		t.Fatalf("FinishReactions again: %d errors, %v", len(errs), err)
	}
	for i, e := range errs {
		if !errors.Is(e, storage.ErrConflict) {
			t.Fatalf("outcome %d again: %v, want ErrConflict", i, e)
		}
	}
}

func reactionIDs(rs []storage.Reaction) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func testClaimConcurrent(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	var rs []storage.Reaction
	for i := range 60 {
		rs = append(rs, newReaction(fmt.Sprintf("r%02d", i), "r", "a", rt0.Add(time.Duration(i)*time.Millisecond)))
	}
	mustSchedule(t, s, "r", rs...)
	now := rt0.Add(time.Hour)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for {
				got, err := s.ClaimReactions(t.Context(), storage.ReactionClaim{Now: now, Until: now.Add(time.Hour), Claim: fmt.Sprint("w", w), Limit: 3})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					seen[r.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("ClaimReactions: %v", err)
	}
	if len(seen) != 60 {
		t.Errorf("claimed %d distinct reactions, want 60", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("reaction %s was claimed %d times", id, n)
		}
	}
}

func testListReactions(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	mustSchedule(t, s, "r", newReaction("3", "r", "a", rt0.Add(3*time.Second)), newReaction("1", "r", "b", rt0.Add(time.Second)),
		newReaction("2", "r", "a", rt0.Add(2*time.Second)))
	mustSchedule(t, s, "q", newReaction("4", "q", "a", rt0.Add(4*time.Second)))
	if err := s.CancelReaction(t.Context(), "2", rt0); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		q     storage.ReactionQuery
		want  []string
		total int64
	}{
		{storage.ReactionQuery{Limit: 10}, []string{"1", "2", "3", "4"}, 4},
		{storage.ReactionQuery{Skip: 1, Limit: 2}, []string{"2", "3"}, 4},
		{storage.ReactionQuery{Limit: 0}, nil, 4},
		{storage.ReactionQuery{Definition: "r", AggregateID: "a", Limit: 10}, []string{"2", "3"}, 2},
		{storage.ReactionQuery{States: []storage.ReactionState{storage.ReactionPending}, Limit: 10}, []string{"1", "3", "4"}, 3},
		{storage.ReactionQuery{States: []storage.ReactionState{storage.ReactionPending}, DueBefore: rt0.Add(3 * time.Second), Limit: 10}, []string{"1", "3"}, 2},
		{storage.ReactionQuery{States: []storage.ReactionState{storage.ReactionPending}, DueAfter: rt0.Add(3 * time.Second), Limit: 10}, []string{"4"}, 1},
		{storage.ReactionQuery{EventID: "e-4", Limit: 10}, []string{"4"}, 1},
		{storage.ReactionQuery{From: rt0.Add(2 * time.Second), To: rt0.Add(3 * time.Second), Limit: 10}, []string{"2", "3"}, 2},
	} {
		got, err := s.ListReactions(t.Context(), c.q)
		if err != nil {
			t.Fatalf("ListReactions %+v: %v", c.q, err)
		}
		if !slices.Equal(reactionIDs(got.Reactions), c.want) || got.Total != c.total {
			t.Errorf("ListReactions %+v: got %v total %d, want %v total %d", c.q, reactionIDs(got.Reactions), got.Total, c.want, c.total)
		}
	}
}

func testCancelExecute(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	ctx := t.Context()
	mustSchedule(t, s, "r", newReaction("p", "r", "a", rt0), newReaction("q", "r", "a", rt0))
	if err := s.CancelReaction(ctx, "p", rt0); err != nil {
		t.Fatal(err)
	}
	if err := s.CancelReaction(ctx, "p", rt0); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("cancelling a cancelled reaction: %v, want ErrConflict", err)
	}
	if err := s.CancelReaction(ctx, "nope", rt0); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("cancelling an unknown reaction: %v, want ErrNotFound", err)
	}
	now := rt0.Add(time.Hour)
	if err := s.ExecuteReaction(ctx, "p", now); err != nil {
		t.Fatal(err)
	}
	if r := mustReaction(t, s, "p"); r.State != storage.ReactionPending || !r.DueAt.Equal(now) || !r.FinishedAt.IsZero() || r.Attempts != 0 {
		t.Errorf("an executed reaction: %+v", r)
	}
	got, _ := s.ClaimReactions(ctx, storage.ReactionClaim{Now: now, Until: now.Add(time.Minute), Claim: "k", Limit: 1})
	if len(got) != 1 {
		t.Fatalf("claim: %v", reactionIDs(got))
	}
	if err := s.ExecuteReaction(ctx, got[0].ID, now); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("executing a leased reaction: %v, want ErrConflict", err)
	}
	if err := s.ExecuteReaction(ctx, "nope", now); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("executing an unknown reaction: %v, want ErrNotFound", err)
	}
}

func testDeleteReactionDef(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	ctx := t.Context()
	mustSchedule(t, s, "r", newReaction("p", "r", "a", rt0), newReaction("d", "r", "a", rt0))
	mustSchedule(t, s, "o", newReaction("o", "o", "a", rt0))
	got, _ := s.ClaimReactions(ctx, storage.ReactionClaim{Now: rt0, Until: rt0.Add(time.Minute), Claim: "k", Limit: 1})
	if len(got) != 1 {
		t.Fatal("claim failed")
	}
	if err := finishOne(ctx, s, storage.ReactionOutcome{ID: got[0].ID, Claim: "k", State: storage.ReactionCompleted, At: rt0}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteReactionDefinition(ctx, "r", rt0); err != nil {
		t.Fatal(err)
	}
	states := map[storage.ReactionState]int{}
	for _, id := range []string{"p", "d"} {
		states[mustReaction(t, s, id).State]++
	}
	if r := mustReaction(t, s, "o"); r.State != storage.ReactionPending && r.State != storage.ReactionCompleted {
		t.Errorf("another definition's reaction: %+v", r)
	}
	if states[storage.ReactionPending] != 0 || states[storage.ReactionCanceled]+states[storage.ReactionCompleted] != 2 {
		t.Errorf("after deleting the definition its reactions have states %v; want none pending", states)
	}
}

func testDeleteAggReactions(t *testing.T, h *harness) {
	s := reactionStorage(t, h)
	ctx := t.Context()
	b := newReaction("b", "r", "b", rt0)
	other := newReaction("x", "r", "a", rt0)
	other.AggregateType = "invoice"
	mustSchedule(t, s, "r", newReaction("a1", "r", "a", rt0), newReaction("a2", "r", "a", rt0), b, other)
	if err := s.CancelReaction(ctx, "a2", rt0); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAggregateReactions(ctx, "order", "a"); err != nil {
		t.Fatal(err)
	}
	list, _ := s.ListReactions(ctx, storage.ReactionQuery{Limit: 10})
	if !slices.Equal(reactionIDs(list.Reactions), []string{"b", "x"}) {
		t.Errorf("after deleting order/a: %v, want b, x", reactionIDs(list.Reactions))
	}
	if err := s.DeleteAggregateReactions(ctx, "order", ""); err != nil {
		t.Fatal(err)
	}
	list, _ = s.ListReactions(ctx, storage.ReactionQuery{Limit: 10})
	if !slices.Equal(reactionIDs(list.Reactions), []string{"x"}) {
		t.Errorf("after deleting type order: %v, want x", reactionIDs(list.Reactions))
	}
	if _, ok, _ := s.NextReactionDue(ctx); !ok {
		t.Errorf("invoice/a's reaction is still due")
	}
}

// finishOne records one outcome with FinishReactions.
func finishOne(ctx context.Context, s storage.ReactionStorage, o storage.ReactionOutcome) error {
	errs, err := s.FinishReactions(ctx, []storage.ReactionOutcome{o})
	if err != nil {
		return err
	}
	if len(errs) != 1 {
		return fmt.Errorf("FinishReactions returned %d errors for 1 outcome", len(errs))
	}
	return errs[0]
}
