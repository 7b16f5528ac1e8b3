package storagetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

func definitionCases() []testCase {
	return []testCase{
		{"CreateDefinition", "a created definition reads back with its spec byte for byte and checkpoint 0", testCreateDefinition},
		{"DefinitionNameIsUnique", "creating a definition whose name exists fails with ErrConflict and keeps the original", testDefinitionDuplicate},
		{"DefinitionUnknown", "an unknown projection or projection instance is ErrNotFound, for reads and commits alike", testDefinitionUnknown},
		{"DefinitionsSortedByName", "Definitions returns every definition ordered by name", testDefinitionsSorted},
		{"CommitProjection", "a commit moves the checkpoint and upserts the states it carries; LoadProjection returns them", testCommit},
		{"CommitProjectionChecksFrom", "a commit whose From is not the stored checkpoint fails with ErrConflict and writes nothing", testCommitCAS},
		{"CommitProjectionRecordsErrors", "commits record errors, keeping at least the last MaxRecordedErrors, oldest first", testCommitErrors},
		{"CommitProjectionConcurrent", "of concurrent commits from the same checkpoint exactly one wins, and only its states are stored", testCommitConcurrent},
	}
}

// newDef returns a definition record with a small spec.
func newDef(name string) storage.DefinitionRecord {
	return storage.DefinitionRecord{
		Name:      name,
		Spec:      json.RawMessage(`{"projectionName":"` + name + `","feedName":"order","handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`),
		CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 678901000, time.UTC),
	}
}

func mustCreate(t testing.TB, h *harness, def storage.DefinitionRecord) {
	t.Helper()
	if err := h.s.CreateDefinition(t.Context(), def); err != nil {
		t.Fatalf("CreateDefinition %q: %v", def.Name, err)
	}
}

func mustDefinition(t testing.TB, h *harness, name string) storage.DefinitionRecord {
	t.Helper()
	d, err := h.s.Definition(t.Context(), name)
	if err != nil {
		t.Fatalf("Definition %q: %v", name, err)
	}
	return d
}

// savedPositions saves n events, one per save, and returns their positions.
func savedPositions(t testing.TB, h *harness, n int) []storage.Event {
	t.Helper()
	for i := range n {
		mustSave(t, h, "order", "o"+string(rune('a'+i%5)), evs("Placed", 1), nil)
	}
	return feedEvents(t, h)
}

func testCreateDefinition(t *testing.T, h *harness) {
	def := newDef("orders")
	spec := bytes.Clone(def.Spec)
	def.Checkpoint = 7 // must be ignored: a definition starts at 0
	mustCreate(t, h, def)
	copy(def.Spec, `XXXXXXXX`) // the storage must not retain the caller's slice

	got := mustDefinition(t, h, "orders")
	if got.Name != "orders" {
		t.Errorf("Definition must return the name, got %q", got.Name)
	}
	if !bytes.Equal(got.Spec, spec) {
		t.Errorf("the spec must round-trip byte for byte: got %q, want %q", got.Spec, spec)
	}
	if !got.CreatedAt.Equal(def.CreatedAt) {
		t.Errorf("CreatedAt must round-trip: got %v, want %v", got.CreatedAt, def.CreatedAt)
	}
	if got.Checkpoint != 0 {
		t.Errorf("a new definition has checkpoint 0, got %d", got.Checkpoint)
	}
	if len(got.Errors) != 0 {
		t.Errorf("a new definition has no recorded errors, got %+v", got.Errors)
	}
	copy(got.Spec, `YYYYYYYY`)
	if again := mustDefinition(t, h, "orders"); !bytes.Equal(again.Spec, spec) {
		t.Errorf("the spec returned by Definition belongs to the caller: after changing it, a reread gives %q", again.Spec)
	}
}

func testDefinitionDuplicate(t *testing.T, h *harness) {
	first := newDef("orders")
	mustCreate(t, h, first)
	second := newDef("orders")
	second.Spec = json.RawMessage(`{"other":true}`)
	if err := h.s.CreateDefinition(t.Context(), second); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("creating a definition with a taken name must fail with ErrConflict, got %v", err)
	}
	if got := mustDefinition(t, h, "orders"); !bytes.Equal(got.Spec, first.Spec) {
		t.Errorf("a refused duplicate must not replace the original: spec is %q", got.Spec)
	}
	if defs, err := h.s.Definitions(t.Context()); err != nil || len(defs) != 1 {
		t.Errorf("a refused duplicate must not add a definition: Definitions returned %d, %v", len(defs), err)
	}
}

func testDefinitionUnknown(t *testing.T, h *harness) {
	ctx := t.Context()
	if _, err := h.s.Definition(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Definition of an unknown name must wrap ErrNotFound, got %v", err)
	}
	if _, err := h.s.LoadProjection(ctx, "nope", "a"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("LoadProjection of an unknown projection must wrap ErrNotFound, got %v", err)
	}
	err := h.s.CommitProjection(ctx, storage.ProjectionCommit{Name: "nope",
		States: []storage.ProjectionState{{Name: "nope", InstanceID: "a", Data: json.RawMessage(`{}`)}}})
	if !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("CommitProjection of an unknown projection must wrap ErrNotFound, got %v", err)
	}
	if _, err := h.s.LoadProjection(ctx, "nope", "a"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a refused commit must write no state: LoadProjection returned %v", err)
	}
	mustCreate(t, h, newDef("known"))
	for _, inst := range []string{"a", ""} {
		if _, err := h.s.LoadProjection(ctx, "known", inst); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("LoadProjection of an instance no commit touched (%q) must wrap ErrNotFound, got %v", inst, err)
		}
	}
}

func testDefinitionsSorted(t *testing.T, h *harness) {
	defs, err := h.s.Definitions(t.Context())
	if err != nil || len(defs) != 0 {
		t.Errorf("Definitions of an empty store must return none and no error, got %d, %v", len(defs), err)
	}
	for _, n := range []string{"zeta", "alpha", "mid", "alphabet", "beta"} {
		mustCreate(t, h, newDef(n))
	}
	defs, err = h.s.Definitions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"alpha", "alphabet", "beta", "mid", "zeta"}
	var got []string
	for _, d := range defs {
		got = append(got, d.Name)
		if want := newDef(d.Name); !bytes.Equal(d.Spec, want.Spec) || d.Checkpoint != 0 {
			t.Errorf("Definitions must return each definition in full: %q has spec %q and checkpoint %d", d.Name, d.Spec, d.Checkpoint)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("Definitions must return every definition: got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("Definitions must be ordered by name: got %q, want %q", got, want)
		}
	}
}

// state returns a projection state of instance inst at event e.
func state(name, inst, data string, e storage.Event) storage.ProjectionState {
	return storage.ProjectionState{Name: name, InstanceID: inst, Data: json.RawMessage(data), Position: e.Position, CreatedAt: e.RecordedAt, UpdatedAt: e.RecordedAt}
}

// checkState loads one instance and compares it with want.
func checkState(t testing.TB, ctx context.Context, h *harness, want storage.ProjectionState, rule string) {
	t.Helper()
	got, err := h.s.LoadProjection(ctx, want.Name, want.InstanceID)
	if err != nil {
		t.Errorf("%s: LoadProjection %q/%q: %v", rule, want.Name, want.InstanceID, err)
		return
	}
	if msg := diffState(got, want); msg != "" {
		t.Errorf("%s: LoadProjection %q/%q: %s", rule, want.Name, want.InstanceID, msg)
	}
}

func testCommit(t *testing.T, h *harness) {
	ctx := t.Context()
	events := savedPositions(t, h, 5)
	mustCreate(t, h, newDef("p"))
	a1 := state("p", "oa", `{"count":1}`, events[0])
	all1 := state("p", "", `{"total":3,"big":12345678901234567890.5}`, events[2])
	c := storage.ProjectionCommit{Name: "p", From: 0, To: events[2].Position, States: []storage.ProjectionState{a1, all1}}
	if err := h.s.CommitProjection(ctx, c); err != nil {
		t.Fatalf("a commit from the stored checkpoint must succeed: %v", err)
	}
	c.States[0].Data[2] = 'X' // the storage must not retain the caller's slices
	a1.Data = json.RawMessage(`{"count":1}`)
	if got := mustDefinition(t, h, "p").Checkpoint; got != events[2].Position {
		t.Errorf("a commit must move the checkpoint to To: got %d, want %d", got, events[2].Position)
	}
	checkState(t, ctx, h, a1, "a commit must store its states")
	checkState(t, ctx, h, all1, "a commit must store the aggregated instance (id \"\")")

	loaded, err := h.s.LoadProjection(ctx, "p", "oa")
	if err == nil {
		copy(loaded.Data, `!!!!!`)
	}
	checkState(t, ctx, h, a1, "the Data returned by LoadProjection belongs to the caller")

	a2 := state("p", "oa", `{"count":2}`, events[4])
	b1 := state("p", "ob", `{"count":1}`, events[3])
	if err := h.s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: events[2].Position, To: events[4].Position, States: []storage.ProjectionState{a2, b1}}); err != nil {
		t.Fatalf("a second commit from the new checkpoint must succeed: %v", err)
	}
	checkState(t, ctx, h, a2, "a commit must replace the state of an instance it carries")
	checkState(t, ctx, h, b1, "a commit must insert a new instance")
	checkState(t, ctx, h, all1, "a commit must leave instances it does not carry unchanged")
	if got := mustDefinition(t, h, "p").Checkpoint; got != events[4].Position {
		t.Errorf("a commit must move the checkpoint to To: got %d, want %d", got, events[4].Position)
	}
	// Other projections are independent.
	mustCreate(t, h, newDef("q"))
	if got := mustDefinition(t, h, "q").Checkpoint; got != 0 {
		t.Errorf("a commit must only move its own projection's checkpoint: q is at %d", got)
	}
	if _, err := h.s.LoadProjection(ctx, "q", "oa"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("states belong to one projection: q/oa must be ErrNotFound, got %v", err)
	}
}

func testCommitCAS(t *testing.T, h *harness) {
	ctx := t.Context()
	events := savedPositions(t, h, 4)
	mustCreate(t, h, newDef("p"))
	a1 := state("p", "oa", `{"v":1}`, events[1])
	if err := h.s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: 0, To: events[1].Position, States: []storage.ProjectionState{a1}}); err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{0, events[0].Position, events[3].Position} {
		err := h.s.CommitProjection(ctx, storage.ProjectionCommit{
			Name: "p", From: from, To: events[3].Position,
			States: []storage.ProjectionState{state("p", "oa", `{"v":"stale"}`, events[3]), state("p", "new", `{}`, events[3])},
			Errors: []storage.ProjectionError{{Position: events[2].Position, EventID: events[2].ID, EventType: "Placed", Message: "stale"}},
		})
		if !errors.Is(err, storage.ErrConflict) {
			t.Errorf("a commit from %d when the checkpoint is %d must fail with ErrConflict, got %v", from, events[1].Position, err)
		}
	}
	d := mustDefinition(t, h, "p")
	if d.Checkpoint != events[1].Position {
		t.Errorf("a refused commit must not move the checkpoint: it is %d, want %d", d.Checkpoint, events[1].Position)
	}
	if len(d.Errors) != 0 {
		t.Errorf("a refused commit must record no errors, got %+v", d.Errors)
	}
	checkState(t, ctx, h, a1, "a refused commit must not change states")
	if _, err := h.s.LoadProjection(ctx, "p", "new"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a refused commit must not insert states: LoadProjection p/new returned %v", err)
	}
}

func testCommitErrors(t *testing.T, h *harness) {
	ctx := t.Context()
	events := savedPositions(t, h, 4)
	mustCreate(t, h, newDef("p"))
	var all []storage.ProjectionError
	perCommit := []int{2, 45, 45, 45}
	from := int64(0)
	for i, n := range perCommit {
		var errs []storage.ProjectionError
		for j := range n {
			e := storage.ProjectionError{
				Position: events[i].Position, EventID: events[i].ID, EventType: "Placed",
				InstanceID: fmt.Sprintf("o%d", j%7),
				Message:    fmt.Sprintf("cannot add: input is not a number (error %d)", len(all)),
			}
			errs = append(errs, e)
			all = append(all, e)
		}
		c := storage.ProjectionCommit{Name: "p", From: from, To: events[i].Position, Errors: errs}
		if err := h.s.CommitProjection(ctx, c); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
		from = c.To
		got := mustDefinition(t, h, "p").Errors
		if min(len(all), storage.MaxRecordedErrors) > len(got) || len(got) > len(all) {
			t.Errorf("after %d errors, at least the last min(n, MaxRecordedErrors=%d) must be kept: got %d", len(all), storage.MaxRecordedErrors, len(got))
			continue
		}
		suffix := all[len(all)-len(got):]
		for k := range got {
			if got[k] != suffix[k] {
				t.Errorf("after %d errors, the recorded errors must be the most recent ones, oldest first: entry %d is %+v, want %+v", len(all), k, got[k], suffix[k])
				break
			}
		}
	}
}

func testCommitConcurrent(t *testing.T, h *harness) {
	const committers, rounds = 8, 3
	ctx := t.Context()
	events := savedPositions(t, h, committers*rounds)
	mustCreate(t, h, newDef("p"))
	from := int64(0)
	for r := range rounds {
		errs := make(chan error, committers)
		won := make(chan int, committers)
		start := make(chan struct{})
		for g := range committers {
			go func() {
				<-start
				e := events[r*committers+g]
				err := h.s.CommitProjection(ctx, storage.ProjectionCommit{
					Name: "p", From: from, To: e.Position,
					States: []storage.ProjectionState{
						state("p", "shared", `{"by":"`+string(rune('a'+g))+`"}`, e),
						state("p", "only-"+string(rune('a'+g))+string(rune('0'+r)), `{}`, e),
					},
				})
				if err == nil {
					won <- g
				}
				errs <- err
			}()
		}
		close(start)
		wins := 0
		for range committers {
			if err := <-errs; err != nil && !errors.Is(err, storage.ErrConflict) {
				t.Errorf("round %d: a commit that loses the race must fail with ErrConflict, got %v", r, err)
			}
		}
		close(won)
		winner := -1
		for g := range won {
			wins++
			winner = g
		}
		if wins != 1 {
			t.Fatalf("round %d: of %d concurrent commits from checkpoint %d exactly one must win, %d did", r, committers, from, wins)
		}
		e := events[r*committers+winner]
		if got := mustDefinition(t, h, "p").Checkpoint; got != e.Position {
			t.Errorf("round %d: the checkpoint must be the winner's To %d, got %d", r, e.Position, got)
		}
		checkState(t, ctx, h, state("p", "shared", `{"by":"`+string(rune('a'+winner))+`"}`, e), "only the winning commit's states may be stored")
		for g := range committers {
			_, err := h.s.LoadProjection(ctx, "p", "only-"+string(rune('a'+g))+string(rune('0'+r)))
			if g == winner && err != nil {
				t.Errorf("round %d: the winner's state must be stored: %v", r, err)
			}
			if g != winner && !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("round %d: a losing commit must write no state, but its instance loads with %v", r, err)
			}
		}
		from = e.Position
	}
}

// diffState describes how two projection states differ, or returns "".
func diffState(got, want storage.ProjectionState) string {
	switch {
	case got.Name != want.Name || got.InstanceID != want.InstanceID:
		return fmt.Sprintf("instance %q/%q, want %q/%q", got.Name, got.InstanceID, want.Name, want.InstanceID)
	case !bytes.Equal(got.Data, want.Data):
		return fmt.Sprintf("Data %s, want %s", got.Data, want.Data)
	case got.Position != want.Position:
		return fmt.Sprintf("Position %d, want %d", got.Position, want.Position)
	case !got.CreatedAt.Equal(want.CreatedAt):
		return fmt.Sprintf("CreatedAt %v, want %v", got.CreatedAt, want.CreatedAt)
	case !got.UpdatedAt.Equal(want.UpdatedAt):
		return fmt.Sprintf("UpdatedAt %v, want %v", got.UpdatedAt, want.UpdatedAt)
	case got.Reference != want.Reference:
		return fmt.Sprintf("Reference %+v, want %+v", got.Reference, want.Reference)
	}
	return ""
}
