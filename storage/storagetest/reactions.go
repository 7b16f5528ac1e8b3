package storagetest

import (
	"errors"
	"slices"
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
		{"ReactionsRace", "claims, outcome records, executes, cancels and deletions on the same reactions at once fail with nothing but ErrConflict or ErrNotFound, and every reaction left is then delivered to the end", testReactionsRace},
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
