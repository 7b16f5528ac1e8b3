package storagetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func codeProjectionCases() []testCase {
	return []testCase{
		{"CodeProjectionApplies", "a projection in Go (Projector.Register) is applied from its feed, read your writes, by aggregate id, by a derived key, and aggregated; its instances are JSON objects", testCodeApplies},
		{"CodeProjectionErrorsChangeNothing", "an event whose Go handler fails (even after changing the state in place) is recorded and changes nothing of its instance; later events apply", testCodeErrors},
		{"CodeProjectionVersions", "a higher Version rebuilds the projection and takes over; a Projector of the lower version stops applying it and never rebuilds it back", testCodeVersions},
		{"CodeProjectionExactlyOnce", "two Projectors registering the same projection in Go, sharing the storage while writers save, apply every event exactly once", testCodeExactlyOnce},
		{"CodeProjectionNotReplacedByDefinitions", "Put, Create and Delete refuse to replace or delete a registered projection in Go (ErrConflict); its definition record lists its version", testCodeGuarded},
	}
}

// tally is the state of the projections in Go of these cases: a count
// and a sum of the events' "n", and the ids of the events seen.
type tally struct {
	Count int      `json:"count"`
	Sum   int      `json:"sum"`
	IDs   []string `json:"ids,omitempty"`
	keep  bool     // keep IDs
	fail  int      // an event whose n is fail fails, after changing the state
	drop  int      // an event whose n is drop drops the instance (when not 0)
	times int      // multiplies n: another version of the code
}

func (s *tally) Apply(e *eventstore.Event) error {
	var d struct{ N int }
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return err
	}
	if s.drop != 0 && d.N == s.drop {
		return eventstore.DropInstance
	}
	s.Count++
	s.Sum += d.N * s.times
	if s.keep {
		s.IDs = append(s.IDs, e.ID)
	}
	if d.N == s.fail {
		return fmt.Errorf("n must not be %d", s.fail)
	}
	return nil
}

func (s *tally) MarshalJSON() ([]byte, error) {
	type plain tally
	return json.Marshal((*plain)(s))
}

// tallyProjection returns a projection in Go of feed "acct" over
// Deposited events, making tally states like proto.
func tallyProjection(name string, version int64, aggregated bool, proto tally) eventstore.CodeProjection {
	return eventstore.CodeProjection{
		Name: name, Feed: "acct", Version: version, Aggregated: aggregated,
		EventTypes: []string{"Deposited"},
		Decode: func(data []byte) (eventstore.CodeState, error) {
			s := proto
			if s.times == 0 {
				s.times = 1
			}
			if data != nil {
				type plain tally
				if err := json.Unmarshal(data, (*plain)(&s)); err != nil {
					return nil, err
				}
			}
			return &s, nil
		},
	}
}

// readTally decodes an instance's data.
func readTally(t *testing.T, data json.RawMessage) tally {
	t.Helper()
	var s struct {
		Count, Sum int
		IDs        []string
	}
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("instance data %s: %v", data, err)
	}
	return tally{Count: s.Count, Sum: s.Sum, IDs: s.IDs}
}

func deposits(ns ...int) []eventstore.NewEvent {
	out := make([]eventstore.NewEvent, len(ns))
	for i, n := range ns {
		out[i] = ev("Deposited", fmt.Sprintf(`{"n":%d,"owner":"o%d"}`, n, n%2))
	}
	return out
}

func testCodeApplies(t *testing.T, h *harness) {
	ctx := t.Context()
	p := eventstore.NewProjector(h.store, nil)
	byOwner := tallyProjection("byOwner", 1, false, tally{})
	byOwner.Key = func(e *eventstore.Event) (string, error) {
		var d struct{ Owner string }
		if err := json.Unmarshal(e.Data, &d); err != nil || d.Owner == "" {
			return "", errors.New("no owner")
		}
		return d.Owner, nil
	}
	for _, cp := range []eventstore.CodeProjection{tallyProjection("perAcct", 1, false, tally{}), tallyProjection("all", 1, true, tally{}), byOwner} {
		if err := p.Register(ctx, cp); err != nil {
			t.Fatalf("Register %s: %v", cp.Name, err)
		}
	}
	mustSave(t, h, "acct", "a1", deposits(1, 2, 3), nil)
	mustSave(t, h, "acct", "a2", deposits(10), nil)
	mustSave(t, h, "acct", "a1", []eventstore.NewEvent{ev("Withdrawn", `{"n":100}`)}, nil)
	mustSave(t, h, "other", "a1", deposits(1000), nil)
	mustSave(t, h, "acct", "a3", []eventstore.NewEvent{ev("Deposited", `{"n":5}`)}, nil) // no owner: an error of byOwner

	pj, err := p.Single(ctx, "perAcct", "a1")
	if err != nil {
		t.Fatalf("Single perAcct a1: %v", err)
	}
	if got := readTally(t, pj.Data); got.Count != 3 || got.Sum != 6 {
		t.Errorf("perAcct a1 = %s, want count 3 and sum 6 (Withdrawn and the other feed are not handled)", pj.Data)
	}
	if pj.Position == 0 || pj.CreatedAt.IsZero() || pj.UpdatedAt.Before(pj.CreatedAt) {
		t.Errorf("perAcct a1: position %d, created %v, updated %v: want the last event's position and times", pj.Position, pj.CreatedAt, pj.UpdatedAt)
	}
	agg, err := p.Aggregated(ctx, "all")
	if err != nil {
		t.Fatalf("Aggregated all: %v", err)
	}
	if got := readTally(t, agg.Data); got.Count != 5 || got.Sum != 21 {
		t.Errorf("all = %s, want count 5 and sum 21", agg.Data)
	}
	page, err := p.List(ctx, "perAcct", eventstore.ListOptions{})
	if err != nil {
		t.Fatalf("List perAcct: %v", err)
	}
	if len(page.Projections) != 3 || page.Total != 3 || page.Projections[0].ID != "a1" || page.Projections[2].ID != "a3" {
		t.Errorf("List perAcct = %+v, want a1, a2, a3", page)
	}
	if n, err := p.Count(ctx, "byOwner", eventstore.Reference{}); err != nil || n != 2 {
		t.Errorf("Count byOwner = %d, %v; want 2 (o0 and o1)", n, err)
	}
	odd, err := p.Single(ctx, "byOwner", "o1")
	if err != nil {
		t.Fatalf("Single byOwner o1: %v", err)
	}
	if got := readTally(t, odd.Data); got.Count != 2 || got.Sum != 4 {
		t.Errorf("byOwner o1 = %s, want the events with n 1 and 3", odd.Data)
	}
	st, err := p.Status(ctx, "byOwner")
	if err != nil {
		t.Fatalf("Status byOwner: %v", err)
	}
	if len(st.Errors) != 1 || st.Errors[0].Message == "" {
		t.Errorf("Status byOwner errors = %+v, want the one event without an owner", st.Errors)
	}
	if st.Definition.Code == nil || st.Definition.Code.Version != 1 || st.Definition.Feed != "acct" || len(st.Definition.Handlers) != 1 {
		t.Errorf("Status byOwner definition = %+v, want a code definition of version 1 over acct", st.Definition)
	}
	if _, err := p.Single(ctx, "all", "x"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Single of an aggregated projection in Go = %v, want ErrNotFound", err)
	}

	// AwaitSingle waits for an instance another Store's save creates.
	other, err := eventstore.New(h.s, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		pj, err := p.AwaitSingle(ctx, "perAcct", "late")
		if err == nil && readTally(t, pj.Data).Sum != 7 {
			err = fmt.Errorf("late = %s", pj.Data)
		}
		got <- err
	}()
	if _, err := other.Save(ctx, "acct", "late", deposits(7), nil); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Errorf("AwaitSingle: %v", err)
	}
}

func testCodeErrors(t *testing.T, h *harness) {
	ctx := t.Context()
	p := eventstore.NewProjector(h.store, &eventstore.ProjectorOptions{MaxInstanceBytes: 400})
	// keep: every event appends its id, so a failing event changes a
	// slice in place before it fails; n 13 fails; n 9 drops the instance.
	if err := p.Register(ctx, tallyProjection("t", 1, false, tally{keep: true, fail: 13, drop: 9})); err != nil {
		t.Fatal(err)
	}
	ok := deposits(1, 2)
	mustSave(t, h, "acct", "a1", ok, nil)
	if _, err := p.Single(ctx, "t", "a1"); err != nil { // commits a1 once
		t.Fatal(err)
	}
	bad := deposits(13, 4, 13)
	mustSave(t, h, "acct", "a1", bad, nil)
	mustSave(t, h, "acct", "a2", deposits(5, 9, 6), nil)
	pj, err := p.Single(ctx, "t", "a1")
	if err != nil {
		t.Fatal(err)
	}
	got := readTally(t, pj.Data)
	want := []string{ok[0].ID, ok[1].ID, bad[1].ID}
	if got.Count != 3 || got.Sum != 7 || fmt.Sprint(got.IDs) != fmt.Sprint(want) {
		t.Errorf("a1 = %s, want count 3, sum 7 and ids %v: the failing events changed nothing", pj.Data, want)
	}
	pj2, err := p.Single(ctx, "t", "a2")
	if err != nil {
		t.Fatal(err)
	}
	if got := readTally(t, pj2.Data); got.Count != 1 || got.Sum != 6 {
		t.Errorf("a2 = %s, want only the event after the drop", pj2.Data)
	}
	st, err := p.Status(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Errors) != 2 || st.Errors[0].EventID != bad[0].ID || st.Errors[1].EventID != bad[2].ID || st.Errors[0].InstanceID != "a1" {
		t.Errorf("errors = %+v, want the two events with n 13 of a1", st.Errors)
	}

	// An event after which the state is over MaxInstanceBytes is an error
	// and changes nothing; the events around it apply.
	many := make([]int, 12)
	for i := range many {
		many[i] = 100 + i
	}
	mustSave(t, h, "acct", "big", deposits(many...), nil)
	pj, err = p.Single(ctx, "t", "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(pj.Data) > 400 {
		t.Errorf("big is %d bytes, over the limit", len(pj.Data))
	}
	got = readTally(t, pj.Data)
	st, err = p.Status(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if got.Count == 0 || got.Count+len(st.Errors)-2 != len(many) || len(got.IDs) != got.Count {
		t.Errorf("big holds %d events with %d errors, want every one of %d either applied or recorded", got.Count, len(st.Errors)-2, len(many))
	}
}

func testCodeVersions(t *testing.T, h *harness) {
	ctx := t.Context()
	quiet := slog.New(slog.DiscardHandler)
	second, err := eventstore.New(h.s, &eventstore.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	oldP := eventstore.NewProjector(h.store, nil)
	if err := oldP.Register(ctx, tallyProjection("t", 1, true, tally{})); err != nil {
		t.Fatal(err)
	}
	mustSave(t, h, "acct", "a1", deposits(1, 2), nil)
	if _, err := oldP.Aggregated(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	// Version 2 doubles: registered in another Projector (a newer
	// process), it is rebuilt beside version 1 and takes over.
	newP := eventstore.NewProjector(second, nil)
	if err := newP.Register(ctx, tallyProjection("t", 2, true, tally{times: 2})); err != nil {
		t.Fatal(err)
	}
	// A third Projector of version 2 (a third process) knows the
	// projection before the swap, which another Projector makes.
	third := eventstore.NewProjector(second, nil)
	if err := third.Register(ctx, tallyProjection("t", 2, true, tally{times: 2})); err != nil {
		t.Fatal(err)
	}
	if _, err := third.Aggregated(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if st, err := newP.Status(ctx, "t"); err != nil || !st.Rebuilding || st.Definition.Code.Version != 1 {
		t.Errorf("Status after registering version 2 = %+v, %v; want version 1 current, rebuilding", st, err)
	}
	mustSave(t, h, "acct", "a1", deposits(3), nil)
	if err := newP.CatchUp(ctx, "t"); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	check := func(p *eventstore.Projector, who string, sum int) {
		t.Helper()
		agg, err := p.Aggregated(ctx, "t")
		if err != nil {
			t.Fatalf("%s: Aggregated: %v", who, err)
		}
		if got := readTally(t, agg.Data); got.Count != 3 || got.Sum != sum {
			t.Errorf("%s: t = %s, want count 3 and sum %d", who, agg.Data, sum)
		}
	}
	check(newP, "the newer Projector", 12)
	// The older Projector stops applying: its queries answer from what
	// version 2 committed, and a save it makes is applied by version 2.
	check(oldP, "the older Projector", 12)
	mustSave(t, h, "acct", "a1", deposits(4), nil)
	if _, err := oldP.Aggregated(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	if err := oldP.CatchUp(ctx); err != nil {
		t.Fatalf("CatchUp of the older Projector: %v", err)
	}
	st, err := oldP.Status(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if st.Definition.Code.Version != 2 || st.Rebuilding {
		t.Errorf("after the swap: %+v, want version 2, not rebuilding", st)
	}
	before := st.Checkpoint
	if err := newP.CatchUp(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	agg, err := newP.Aggregated(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := readTally(t, agg.Data); got.Count != 4 || got.Sum != 20 {
		t.Errorf("t after a save = %s, want version 2's count 4 and sum 20", agg.Data)
	}
	if st, _ := newP.Status(ctx, "t"); st.Checkpoint <= before {
		t.Errorf("checkpoint %d, want past %d: the newer Projector applied the save", st.Checkpoint, before)
	}
	// The third Projector, which did not make the swap, applies version 2
	// from then on.
	mustSave(t, h, "acct", "a1", deposits(5), nil)
	agg, err = third.Aggregated(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := readTally(t, agg.Data); got.Count != 5 || got.Sum != 30 {
		t.Errorf("t read through the third Projector = %s, want count 5 and sum 30: it applies version 2 after another's swap", agg.Data)
	}
	// A Projector of version 1 started again neither rebuilds nor applies.
	again := eventstore.NewProjector(h.store, nil)
	if err := again.Register(ctx, tallyProjection("t", 1, true, tally{})); err != nil {
		t.Fatalf("Register of an older version: %v", err)
	}
	if err := again.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := again.Status(ctx, "t"); err != nil || st.Rebuilding || st.Definition.Code.Version != 2 {
		t.Errorf("after an older version registered again: %+v, %v; want version 2 kept, not rebuilding", st, err)
	}
	agg, err = again.Aggregated(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := readTally(t, agg.Data); got.Sum != 30 {
		t.Errorf("t = %s, want version 2's sum 30", agg.Data)
	}
}

func testCodeExactlyOnce(t *testing.T, h *harness) {
	const writers, saves = 4, 12
	ctx := t.Context()
	other, err := eventstore.New(h.s, nil)
	if err != nil {
		t.Fatal(err)
	}
	projectors := []*eventstore.Projector{eventstore.NewProjector(h.store, nil), eventstore.NewProjector(other, nil)}
	for _, p := range projectors {
		for _, cp := range []eventstore.CodeProjection{tallyProjection("all", 1, true, tally{}), tallyProjection("each", 1, false, tally{keep: true})} {
			if err := p.Register(ctx, cp); err != nil {
				t.Fatalf("Register %s: %v", cp.Name, err)
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, writers*saves+2*len(projectors))
	for w := range writers {
		wg.Go(func() {
			st := []*eventstore.Store{h.store, other}[w%2]
			for i := range saves {
				batch := deposits(i%3+1, 1)
				if _, err := st.Save(ctx, "acct", fmt.Sprint("w", w), batch, nil); err != nil {
					errs <- err
					return
				}
				if _, err := projectors[(w+i)%2].Aggregated(ctx, "all"); err != nil {
					errs <- fmt.Errorf("Aggregated: %w", err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("writer: %v", err)
	}
	for _, p := range projectors {
		if err := p.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
	}
	agg, err := projectors[0].Aggregated(ctx, "all")
	if err != nil {
		t.Fatal(err)
	}
	wantSum := 0
	for i := range saves {
		wantSum += i%3 + 2
	}
	if got := readTally(t, agg.Data); got.Count != 2*writers*saves || got.Sum != writers*wantSum {
		t.Errorf("all = %s, want count %d and sum %d", agg.Data, 2*writers*saves, writers*wantSum)
	}
	for w := range writers {
		pj, err := projectors[1].Single(ctx, "each", fmt.Sprint("w", w))
		if err != nil {
			t.Fatal(err)
		}
		got := readTally(t, pj.Data)
		seen := make(map[string]bool)
		for _, id := range got.IDs {
			if seen[id] {
				t.Errorf("w%d: event %s applied twice", w, id)
			}
			seen[id] = true
		}
		if len(got.IDs) != 2*saves {
			t.Errorf("w%d applied %d events, want %d", w, len(got.IDs), 2*saves)
		}
	}
}

func testCodeGuarded(t *testing.T, h *harness) {
	ctx := t.Context()
	p := eventstore.NewProjector(h.store, nil)
	if err := p.Register(ctx, tallyProjection("t", 3, false, tally{})); err != nil {
		t.Fatal(err)
	}
	if err := p.Register(ctx, tallyProjection("t", 3, false, tally{})); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("a second Register of the name = %v, want ErrConflict", err)
	}
	def := eventstore.Definition{Name: "t", Feed: "acct", Handlers: []eventstore.Handler{{EventType: "Deposited",
		Functions: []eventstore.Function{{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"}}}}}
	if _, err := p.Put(ctx, def); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("Put over a projection in Go = %v, want ErrConflict", err)
	}
	if err := p.Create(ctx, def); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("Create over a projection in Go = %v, want ErrConflict", err)
	}
	if err := p.Delete(ctx, "t"); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("Delete of a registered projection in Go = %v, want ErrConflict", err)
	}
	// Another process's Projector, which does not register it, cannot
	// replace it either.
	other := eventstore.NewProjector(h.store, nil)
	if _, err := other.Put(ctx, def); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("Put over a projection in Go from another Projector = %v, want ErrConflict", err)
	}
	d, err := other.Definition(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if d.Code == nil || d.Code.Version != 3 || d.Feed != "acct" || len(d.Handlers) != 1 || d.Handlers[0].EventType != "Deposited" {
		t.Errorf("Definition = %+v, want version 3 over acct/Deposited", d)
	}
	if _, err := p.Put(ctx, eventstore.Definition{Name: "x", Feed: "acct", Code: &eventstore.CodeSpec{Version: 1},
		Handlers: def.Handlers}); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("Put of a Definition with a CodeSpec = %v, want ErrInvalid", err)
	}
	// A stored Definition's name cannot be registered.
	if err := p.Create(ctx, eventstore.Definition{Name: "json", Feed: "acct", Handlers: def.Handlers}); err != nil {
		t.Fatal(err)
	}
	if err := p.Register(ctx, tallyProjection("json", 1, false, tally{})); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("Register over a Definition = %v, want ErrConflict", err)
	}
	if err := p.Register(ctx, eventstore.CodeProjection{Name: "bad", Feed: "acct"}); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("Register without version, event types or Decode = %v, want ErrInvalid", err)
	}
	// One no longer registered anywhere can be deleted from Go.
	if err := other.Delete(ctx, "t"); err != nil {
		t.Errorf("Delete from a Projector that does not register it: %v", err)
	}
}
