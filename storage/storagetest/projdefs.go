package storagetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore/storage"
)

func projectionDefinitionCases() []testCase {
	return []testCase{
		{"DeleteDefinition", "DeleteDefinition removes the definition with its instances and errors, leaves other projections alone, and frees the name; an unknown name is ErrNotFound", testDeleteDefinition},
		{"ResetProjection", "ResetProjection removes every instance and error of the projection and sets its checkpoint to 0, keeping its spec; an unknown name is ErrNotFound", testResetProjection},
		{"RenameProjection", "RenameProjection replaces the projection named to (definition, instances, errors) with the one named from, which is gone afterwards; an unknown from is ErrNotFound and changes nothing", testRenameProjection},
		{"UpdateSpec", "UpdateSpec replaces the spec when the stored one is old, keeping CreatedAt, checkpoint, instances and errors, after which a commit with the old spec is refused; another old is ErrConflict and an unknown name ErrNotFound, both changing nothing", testUpdateSpec},
		{"CommitProjectionChecksSpec", "a commit with a Spec is refused with ErrConflict, writing nothing, when the stored definition's spec is another (it was replaced), even when the checkpoints agree; a matching or nil Spec commits", testCommitChecksSpec},
		{"LoadProjections", "LoadProjections returns the existing instances among ids, in the order of ids, skipping the others without error", testLoadProjections},
		{"CommitProjectionDeletes", "a commit removes the instances in Deletes together with storing its States; a refused commit deletes nothing", testCommitDeletes},
		{"ProjectionStateRoundTrips", "a state's CreatedAt, UpdatedAt and Reference are stored as given, replaced by the next commit of the instance, and returned alike by LoadProjection, LoadProjections and ListProjections", testStateRoundTrip},
		{"CommitProjectionAnyErrorText", "a commit whose error texts hold invalid UTF-8, NUL bytes or 10,000 multi-byte runes succeeds, and the texts read back as valid UTF-8 with their valid parts intact", testErrorTexts},
	}
}

// mustCommit commits and fails the test on error.
func mustCommit(t testing.TB, h *harness, c storage.ProjectionCommit) {
	t.Helper()
	if err := h.s.CommitProjection(t.Context(), c); err != nil {
		t.Fatalf("CommitProjection %q from %d to %d: %v", c.Name, c.From, c.To, err)
	}
}

// projError returns a recorded error for event e.
func projError(e storage.Event, inst, msg string) storage.ProjectionError {
	return storage.ProjectionError{Position: e.Position, EventID: e.ID, EventType: e.Type, InstanceID: inst, Message: msg}
}

// checkGone checks that the instances of name are all gone.
func checkGone(t testing.TB, h *harness, name string, ids []string, rule string) {
	t.Helper()
	for _, id := range ids {
		if _, err := h.s.LoadProjection(t.Context(), name, id); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("%s: LoadProjection %q/%q must wrap ErrNotFound, got %v", rule, name, id, err)
		}
	}
	list, err := h.s.ListProjections(t.Context(), storage.ProjectionQuery{Name: name, Limit: 100})
	if err != nil {
		t.Errorf("%s: ListProjections %q: %v", rule, name, err)
	} else if list.Total != 0 || len(list.States) != 0 {
		t.Errorf("%s: ListProjections %q must find no instance, got Total %d and %d states", rule, name, list.Total, len(list.States))
	}
}

// definitionNames returns the names Definitions lists.
func definitionNames(t testing.TB, h *harness) []string {
	t.Helper()
	defs, err := h.s.Definitions(t.Context())
	if err != nil {
		t.Fatalf("Definitions: %v", err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	return names
}

func testDeleteDefinition(t *testing.T, h *harness) {
	ctx := t.Context()
	events := savedPositions(t, h, 3)
	mustCreate(t, h, newDef("p"))
	mustCreate(t, h, newDef("q"))
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", To: events[1].Position,
		States: []storage.ProjectionState{state("p", "a", `{"n":1}`, events[0]), state("p", "b", `{"n":2}`, events[1])},
		Errors: []storage.ProjectionError{projError(events[1], "b", "cannot add")}})
	qa := state("q", "a", `{"q":1}`, events[2])
	mustCommit(t, h, storage.ProjectionCommit{Name: "q", To: events[2].Position, States: []storage.ProjectionState{qa}})

	if err := h.s.DeleteDefinition(ctx, "p"); err != nil {
		t.Fatalf("DeleteDefinition p: %v", err)
	}
	if _, err := h.s.Definition(ctx, "p"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Definition of a deleted projection must wrap ErrNotFound, got %v", err)
	}
	checkGone(t, h, "p", []string{"a", "b"}, "a deleted projection's instances must be gone")
	if names := definitionNames(t, h); !slices.Equal(names, []string{"q"}) {
		t.Errorf("Definitions must no longer list a deleted projection: got %q, want [q]", names)
	}
	checkState(t, ctx, h, qa, "deleting p must leave q's instances alone")
	if got := mustDefinition(t, h, "q").Checkpoint; got != events[2].Position {
		t.Errorf("deleting p must leave q's checkpoint at %d, got %d", events[2].Position, got)
	}
	for _, name := range []string{"p", "nope", ""} {
		if err := h.s.DeleteDefinition(ctx, name); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("DeleteDefinition of %q, which does not exist, must wrap ErrNotFound, got %v", name, err)
		}
	}

	again := newDef("p")
	again.Spec = json.RawMessage(`{"second":true}`)
	mustCreate(t, h, again)
	d := mustDefinition(t, h, "p")
	if d.Checkpoint != 0 || len(d.Errors) != 0 || !bytes.Equal(d.Spec, again.Spec) {
		t.Errorf("a definition created under a deleted name starts afresh: got checkpoint %d, %d errors, spec %s", d.Checkpoint, len(d.Errors), d.Spec)
	}
	checkGone(t, h, "p", []string{"a", "b"}, "a definition created under a deleted name has no instances")
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", From: 0, To: events[0].Position})
}

func testResetProjection(t *testing.T, h *harness) {
	ctx := t.Context()
	events := savedPositions(t, h, 3)
	def := newDef("p")
	mustCreate(t, h, def)
	mustCreate(t, h, newDef("q"))
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", To: events[2].Position,
		States: []storage.ProjectionState{state("p", "a", `{"n":1}`, events[0]), state("p", "", `{"all":2}`, events[2])},
		Errors: []storage.ProjectionError{projError(events[1], "a", "cannot add")}})
	qa := state("q", "a", `{"q":1}`, events[1])
	mustCommit(t, h, storage.ProjectionCommit{Name: "q", To: events[1].Position, States: []storage.ProjectionState{qa}})

	if err := h.s.ResetProjection(ctx, "p"); err != nil {
		t.Fatalf("ResetProjection p: %v", err)
	}
	d := mustDefinition(t, h, "p")
	if d.Checkpoint != 0 || len(d.Errors) != 0 {
		t.Errorf("a reset projection has checkpoint 0 and no errors, got %d and %+v", d.Checkpoint, d.Errors)
	}
	if !bytes.Equal(d.Spec, def.Spec) || !d.CreatedAt.Equal(def.CreatedAt) {
		t.Errorf("a reset keeps the definition: spec %s, CreatedAt %v", d.Spec, d.CreatedAt)
	}
	checkGone(t, h, "p", []string{"a", ""}, "a reset projection has no instances")
	checkState(t, ctx, h, qa, "resetting p must leave q's instances alone")
	if got := mustDefinition(t, h, "q").Checkpoint; got != events[1].Position {
		t.Errorf("resetting p must leave q's checkpoint at %d, got %d", events[1].Position, got)
	}
	if err := h.s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: events[2].Position, To: events[2].Position}); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("after a reset a commit from the old checkpoint must fail with ErrConflict, got %v", err)
	}
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", From: 0, To: events[0].Position})
	if err := h.s.ResetProjection(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("ResetProjection of an unknown projection must wrap ErrNotFound, got %v", err)
	}
}

func testRenameProjection(t *testing.T, h *harness) {
	ctx := t.Context()
	events := savedPositions(t, h, 5)
	mustCreate(t, h, newDef("p"))
	mustCreate(t, h, newDef("other"))
	rebuilt := newDef("p-rebuild")
	rebuilt.CreatedAt = rebuilt.CreatedAt.Add(time.Hour)
	mustCreate(t, h, rebuilt)
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", To: events[1].Position,
		States: []storage.ProjectionState{state("p", "a", `{"old":1}`, events[0]), state("p", "b", `{"old":2}`, events[1])},
		Errors: []storage.ProjectionError{projError(events[1], "b", "old error")}})
	otherA := state("other", "a", `{"x":1}`, events[0])
	mustCommit(t, h, storage.ProjectionCommit{Name: "other", To: events[0].Position, States: []storage.ProjectionState{otherA}})
	newErrs := []storage.ProjectionError{projError(events[2], "c", "new error 1"), projError(events[3], "b", "new error 2")}
	mustCommit(t, h, storage.ProjectionCommit{Name: "p-rebuild", To: events[4].Position,
		States: []storage.ProjectionState{state("p-rebuild", "b", `{"new":2}`, events[4]), state("p-rebuild", "c", `{"new":3}`, events[3])},
		Errors: newErrs})

	if err := h.s.RenameProjection(ctx, "nope", "p"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("RenameProjection from an unknown projection must wrap ErrNotFound, got %v", err)
	}
	checkState(t, ctx, h, state("p", "a", `{"old":1}`, events[0]), "a refused rename must change nothing")

	if err := h.s.RenameProjection(ctx, "p-rebuild", "p"); err != nil {
		t.Fatalf("RenameProjection p-rebuild to p: %v", err)
	}
	d := mustDefinition(t, h, "p")
	if d.Name != "p" || !bytes.Equal(d.Spec, rebuilt.Spec) || !d.CreatedAt.Equal(rebuilt.CreatedAt) || d.Checkpoint != events[4].Position {
		t.Errorf("after the rename p must have p-rebuild's spec, CreatedAt and checkpoint %d: got name %q, spec %s, CreatedAt %v, checkpoint %d", events[4].Position, d.Name, d.Spec, d.CreatedAt, d.Checkpoint)
	}
	if !slices.Equal(d.Errors, newErrs) {
		t.Errorf("after the rename p must have exactly p-rebuild's errors %+v, got %+v", newErrs, d.Errors)
	}
	if _, err := h.s.Definition(ctx, "p-rebuild"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("the renamed projection must be gone under its old name, got %v", err)
	}
	if names := definitionNames(t, h); !slices.Equal(names, []string{"other", "p"}) {
		t.Errorf("after the rename Definitions must list [other p], got %q", names)
	}
	checkGone(t, h, "p-rebuild", []string{"b", "c"}, "instances must be gone under the old name")
	if _, err := h.s.LoadProjection(ctx, "p", "a"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("the replaced projection's instances must be gone: p/a loads with %v", err)
	}
	pb, pc := state("p", "b", `{"new":2}`, events[4]), state("p", "c", `{"new":3}`, events[3])
	checkState(t, ctx, h, pb, "the renamed projection's instances belong to the new name")
	checkState(t, ctx, h, pc, "the renamed projection's instances belong to the new name")
	list, err := h.s.ListProjections(ctx, storage.ProjectionQuery{Name: "p", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if list.Total != 2 || len(list.States) != 2 || diffState(list.States[0], pb) != "" || diffState(list.States[1], pc) != "" {
		t.Errorf("after the rename ListProjections p must return exactly b and c under the name p, got Total %d, %+v", list.Total, list.States)
	}
	checkState(t, ctx, h, otherA, "a rename must leave other projections alone")
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", From: events[4].Position, To: events[4].Position})

	// Renaming to a free name is a plain rename.
	if err := h.s.RenameProjection(ctx, "p", "fresh"); err != nil {
		t.Fatalf("RenameProjection p to a free name: %v", err)
	}
	if names := definitionNames(t, h); !slices.Equal(names, []string{"fresh", "other"}) {
		t.Errorf("after renaming p to fresh Definitions must list [fresh other], got %q", names)
	}
	checkState(t, ctx, h, state("fresh", "c", `{"new":3}`, events[3]), "a rename to a free name keeps the instances")
	if got := mustDefinition(t, h, "fresh").Checkpoint; got != events[4].Position {
		t.Errorf("a rename keeps the checkpoint %d, got %d", events[4].Position, got)
	}
}

func testUpdateSpec(t *testing.T, h *harness) {
	ctx := t.Context()
	events := savedPositions(t, h, 3)
	def := newDef("p")
	mustCreate(t, h, def)
	mustCreate(t, h, newDef("other"))
	errs := []storage.ProjectionError{projError(events[1], "a", "an error")}
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", To: events[1].Position, Spec: def.Spec,
		States: []storage.ProjectionState{state("p", "a", `{"n":1}`, events[0]), state("p", "b", `{"n":2}`, events[1])},
		Errors: errs})
	described := json.RawMessage(`{"projectionName":"p","description":"Orders.","feedName":"order","handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`)

	unchanged := func(rule string) {
		t.Helper()
		d := mustDefinition(t, h, "p")
		if !bytes.Equal(d.Spec, def.Spec) || d.Checkpoint != events[1].Position {
			t.Errorf("%s: p must keep its spec and checkpoint %d, got %s and %d", rule, events[1].Position, d.Spec, d.Checkpoint)
		}
	}
	if err := h.s.UpdateSpec(ctx, "p", []byte(`{"another":true}`), described); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("UpdateSpec with an old spec that is not the stored one must wrap ErrConflict, got %v", err)
	}
	unchanged("a refused UpdateSpec")
	if err := h.s.UpdateSpec(ctx, "nope", def.Spec, described); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("UpdateSpec of an unknown projection must wrap ErrNotFound, got %v", err)
	}
	if _, err := h.s.Definition(ctx, "nope"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("UpdateSpec of an unknown projection must create nothing: Definition = %v", err)
	}

	spec := bytes.Clone(described)
	if err := h.s.UpdateSpec(ctx, "p", def.Spec, spec); err != nil {
		t.Fatalf("UpdateSpec p: %v", err)
	}
	copy(spec, `XXXXXXXX`) // the storage must not retain the caller's slice
	d := mustDefinition(t, h, "p")
	if !bytes.Equal(d.Spec, described) {
		t.Errorf("after UpdateSpec the spec must be the new one byte for byte: got %s", d.Spec)
	}
	if !d.CreatedAt.Equal(def.CreatedAt) || d.Checkpoint != events[1].Position || !slices.Equal(d.Errors, errs) {
		t.Errorf("UpdateSpec must keep CreatedAt %v, checkpoint %d and errors %+v: got %v, %d, %+v",
			def.CreatedAt, events[1].Position, errs, d.CreatedAt, d.Checkpoint, d.Errors)
	}
	checkState(t, ctx, h, state("p", "a", `{"n":1}`, events[0]), "UpdateSpec keeps the instances")
	checkState(t, ctx, h, state("p", "b", `{"n":2}`, events[1]), "UpdateSpec keeps the instances")
	if list, err := h.s.ListProjections(ctx, storage.ProjectionQuery{Name: "p", Limit: 10}); err != nil || list.Total != 2 {
		t.Errorf("after UpdateSpec ListProjections p must count 2 instances, got %+v, %v", list, err)
	}
	if o := mustDefinition(t, h, "other"); !bytes.Equal(o.Spec, newDef("other").Spec) {
		t.Errorf("UpdateSpec of p must leave other alone: its spec is %s", o.Spec)
	}

	// A projector still holding the old spec is refused; one with the new
	// spec commits from the kept checkpoint.
	err := h.s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: events[1].Position, To: events[2].Position, Spec: def.Spec})
	if !errors.Is(err, storage.ErrConflict) {
		t.Errorf("after UpdateSpec a commit with the old spec must wrap ErrConflict, got %v", err)
	}
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", From: events[1].Position, To: events[2].Position, Spec: described,
		States: []storage.ProjectionState{state("p", "a", `{"n":3}`, events[2])}})
	checkState(t, ctx, h, state("p", "a", `{"n":3}`, events[2]), "a commit with the updated spec writes its states")

	// The old spec no longer matches: updating from it again is refused.
	if err := h.s.UpdateSpec(ctx, "p", def.Spec, def.Spec); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("UpdateSpec from a spec already replaced must wrap ErrConflict, got %v", err)
	}
	if d := mustDefinition(t, h, "p"); !bytes.Equal(d.Spec, described) {
		t.Errorf("a refused UpdateSpec must keep the spec, got %s", d.Spec)
	}
}

func testCommitChecksSpec(t *testing.T, h *harness) {
	ctx := t.Context()
	events := savedPositions(t, h, 3)
	old := newDef("p")
	mustCreate(t, h, old)
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", To: events[0].Position, Spec: old.Spec,
		States: []storage.ProjectionState{state("p", "a", `{"old":1}`, events[0])}})
	// The replacement is built to the same checkpoint and swapped in.
	next := newDef("p/next")
	mustCreate(t, h, next)
	mustCommit(t, h, storage.ProjectionCommit{Name: "p/next", To: events[0].Position, Spec: next.Spec,
		States: []storage.ProjectionState{state("p/next", "a", `{"new":1}`, events[0])}})
	if err := h.s.RenameProjection(ctx, "p/next", "p"); err != nil {
		t.Fatalf("RenameProjection p/next to p: %v", err)
	}
	// A projector still holding the old definition commits the next page.
	err := h.s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: events[0].Position, To: events[1].Position,
		Spec: old.Spec, States: []storage.ProjectionState{state("p", "a", `{"old":2}`, events[1])},
		Errors: []storage.ProjectionError{projError(events[1], "a", "from the old definition")}})
	if !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("a commit computed from a replaced definition must wrap ErrConflict, got %v", err)
	}
	checkState(t, ctx, h, state("p", "a", `{"new":1}`, events[0]), "a commit refused for its spec writes no state")
	if d := mustDefinition(t, h, "p"); d.Checkpoint != events[0].Position || len(d.Errors) != 0 {
		t.Errorf("a commit refused for its spec must leave the checkpoint at %d and record no error, got %d and %+v",
			events[0].Position, d.Checkpoint, d.Errors)
	}
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", From: events[0].Position, To: events[1].Position,
		Spec: next.Spec, States: []storage.ProjectionState{state("p", "a", `{"new":2}`, events[1])}})
	checkState(t, ctx, h, state("p", "a", `{"new":2}`, events[1]), "a commit with the current spec writes its states")
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", From: events[1].Position, To: events[2].Position})
	if d := mustDefinition(t, h, "p"); d.Checkpoint != events[2].Position {
		t.Errorf("a commit without a Spec checks only the checkpoint: want %d, got %d", events[2].Position, d.Checkpoint)
	}
}

func testLoadProjections(t *testing.T, h *harness) {
	ctx := t.Context()
	events := savedPositions(t, h, 4)
	mustCreate(t, h, newDef("p"))
	mustCreate(t, h, newDef("q"))
	sa, sb, sc, sall := state("p", "a", `{"a":1}`, events[0]), state("p", "b", `{"b":1}`, events[1]), state("p", "c", `{"c":1}`, events[2]), state("p", "", `{"all":1}`, events[3])
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", To: events[3].Position, States: []storage.ProjectionState{sa, sb, sc, sall}})
	mustCommit(t, h, storage.ProjectionCommit{Name: "q", To: events[0].Position, States: []storage.ProjectionState{state("q", "x", `{}`, events[0])}})

	many := []string{"c"}
	for i := range 2500 {
		many = append(many, fmt.Sprintf("missing-%d", i))
	}
	many = append(many, "a")
	for _, c := range []struct {
		ids  []string
		want []storage.ProjectionState
	}{
		{[]string{"c", "x", "a", ""}, []storage.ProjectionState{sc, sa, sall}},
		{[]string{"b", "a", "c"}, []storage.ProjectionState{sb, sa, sc}},
		{[]string{"x"}, nil},
		{nil, nil},
		{many, []storage.ProjectionState{sc, sa}},
	} {
		got, err := h.s.LoadProjections(ctx, "p", c.ids)
		if err != nil {
			t.Errorf("LoadProjections of %d ids: %v", len(c.ids), err)
			continue
		}
		if len(got) != len(c.want) {
			t.Errorf("LoadProjections of %d ids must return the %d existing ones, got %d", len(c.ids), len(c.want), len(got))
			continue
		}
		for i := range got {
			if msg := diffState(got[i], c.want[i]); msg != "" {
				t.Errorf("LoadProjections of %d ids must return the existing instances in the order of ids: result %d: %s", len(c.ids), i, msg)
			}
		}
	}
	got, err := h.s.LoadProjections(ctx, "p", []string{"a"})
	if err == nil && len(got) == 1 {
		copy(got[0].Data, "XXXX")
	}
	checkState(t, ctx, h, sa, "the Data returned by LoadProjections belongs to the caller")
}

func testCommitDeletes(t *testing.T, h *harness) {
	ctx := t.Context()
	events := savedPositions(t, h, 4)
	mustCreate(t, h, newDef("p"))
	sa, sb, sc := state("p", "a", `{"a":1}`, events[0]), state("p", "b", `{"b":1}`, events[0]), state("p", "c", `{"c":1}`, events[0])
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", To: events[0].Position, States: []storage.ProjectionState{sa, sb, sc}})

	sa2 := state("p", "a", `{"a":2}`, events[1])
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", From: events[0].Position, To: events[1].Position,
		States: []storage.ProjectionState{sa2}, Deletes: []string{"b"}})
	if _, err := h.s.LoadProjection(ctx, "p", "b"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("an instance in a commit's Deletes must be gone: p/b loads with %v", err)
	}
	checkState(t, ctx, h, sa2, "a commit with Deletes must also store its States")
	checkState(t, ctx, h, sc, "a commit must leave instances outside its States and Deletes unchanged")
	if list, err := h.s.ListProjections(ctx, storage.ProjectionQuery{Name: "p", Limit: 10}); err != nil || list.Total != 2 {
		t.Errorf("after deleting one of three instances ListProjections must count 2, got %d, %v", list.Total, err)
	}

	err := h.s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: events[0].Position, To: events[2].Position, Deletes: []string{"c", "a"}})
	if !errors.Is(err, storage.ErrConflict) {
		t.Errorf("a commit from a stale checkpoint must fail with ErrConflict, got %v", err)
	}
	checkState(t, ctx, h, sc, "a refused commit must delete nothing")
	checkState(t, ctx, h, sa2, "a refused commit must delete nothing")

	sb2 := state("p", "b", `{"b":"again"}`, events[3])
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", From: events[1].Position, To: events[3].Position,
		States: []storage.ProjectionState{sb2}, Deletes: []string{"a", "c"}})
	checkState(t, ctx, h, sb2, "a deleted instance's id can be stored again")
	for _, id := range []string{"a", "c"} {
		if _, err := h.s.LoadProjection(ctx, "p", id); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("an instance in a commit's Deletes must be gone: p/%s loads with %v", id, err)
		}
	}
}

func testStateRoundTrip(t *testing.T, h *harness) {
	ctx := t.Context()
	events := savedPositions(t, h, 3)
	mustCreate(t, h, newDef("p"))
	created := time.Date(2024, 3, 1, 8, 0, 0, 123456000, time.UTC)
	refs := []storage.Reference{
		{},
		{Kind: storage.RefNumber, Number: 12.5, Text: "12.50"},
		{Kind: storage.RefNumber, Number: -0.001, Text: "-0.001"},
		{Kind: storage.RefNumber, Number: 1.7e308, Text: "1.7e308"},
		{Kind: storage.RefNumber, Number: 1714557600000, Text: "1714557600000"},
		{Kind: storage.RefText, Text: "ünïcödé ✓"},
		{Kind: storage.RefText, Text: ""},
	}
	var first []storage.ProjectionState
	for i, ref := range refs {
		st := storage.ProjectionState{Name: "p", InstanceID: fmt.Sprintf("i%d", i), Data: json.RawMessage(`{"v":1}`),
			Position: events[0].Position, CreatedAt: created, UpdatedAt: events[0].RecordedAt, Reference: ref}
		first = append(first, st)
	}
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", To: events[0].Position, States: first})
	check := func(want []storage.ProjectionState, rule string) {
		t.Helper()
		ids := make([]string, len(want))
		for i, st := range want {
			checkState(t, ctx, h, st, rule)
			ids[i] = st.InstanceID
		}
		got, err := h.s.LoadProjections(ctx, "p", ids)
		if err != nil || len(got) != len(want) {
			t.Fatalf("%s: LoadProjections returned %d states, %v", rule, len(got), err)
		}
		list, err := h.s.ListProjections(ctx, storage.ProjectionQuery{Name: "p", Limit: 100})
		if err != nil || len(list.States) != len(want) {
			t.Fatalf("%s: ListProjections returned %d states, %v", rule, len(list.States), err)
		}
		for i := range want {
			if msg := diffState(got[i], want[i]); msg != "" {
				t.Errorf("%s: LoadProjections: %s", rule, msg)
			}
			if msg := diffState(list.States[i], want[i]); msg != "" { // ids i0..i6 sort as given
				t.Errorf("%s: ListProjections: %s", rule, msg)
			}
		}
	}
	check(first, "CreatedAt, UpdatedAt and Reference must round-trip")

	// The projector keeps CreatedAt and moves UpdatedAt; references change.
	var second []storage.ProjectionState
	for i, st := range first {
		st.Data = json.RawMessage(`{"v":2}`)
		st.Position, st.UpdatedAt = events[2].Position, events[2].RecordedAt
		st.Reference = refs[(i+1)%len(refs)]
		second = append(second, st)
	}
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", From: events[0].Position, To: events[2].Position, States: second})
	check(second, "a commit replaces the whole state: CreatedAt as given, the new UpdatedAt and Reference")
}

func testErrorTexts(t *testing.T, h *harness) {
	events := savedPositions(t, h, 2)
	mustCreate(t, h, newDef("p"))
	long := strings.Repeat("€", 10_000)
	type text struct{ msg, prefix, suffix string }
	texts := []text{
		{"bad \xff\xfe bytes", "bad ", " bytes"},
		{"nul \x00 inside", "nul ", " inside"},
		{"surrogate \xed\xa0\x80 half", "surrogate ", " half"},
		{"cut rune \xe2\x82", "cut rune ", ""},
		{long, long, long},
		{"plain", "plain", "plain"},
	}
	var errs []storage.ProjectionError
	for _, x := range texts {
		errs = append(errs, projError(events[1], "a", x.msg))
	}
	if err := h.s.CommitProjection(t.Context(), storage.ProjectionCommit{Name: "p", To: events[1].Position, Errors: errs}); err != nil {
		t.Fatalf("a commit must not fail because of its error texts: %v", err)
	}
	d := mustDefinition(t, h, "p")
	if d.Checkpoint != events[1].Position {
		t.Errorf("the commit must have moved the checkpoint to %d, it is at %d", events[1].Position, d.Checkpoint)
	}
	if len(d.Errors) != len(texts) {
		t.Fatalf("the commit must record its %d errors, got %d", len(texts), len(d.Errors))
	}
	for i, x := range texts {
		got := d.Errors[i].Message
		if !utf8.ValidString(got) {
			t.Errorf("error %d: texts must read back as valid UTF-8, got %q", i, clipText(got))
		}
		if !strings.HasPrefix(got, x.prefix) || !strings.HasSuffix(got, x.suffix) {
			t.Errorf("error %d: only the bytes that cannot be stored may be replaced: %q reads back as %q", i, clipText(x.msg), clipText(got))
		}
		if want := projError(events[1], "a", got); d.Errors[i] != want {
			t.Errorf("error %d: the other fields must round-trip: got %+v, want %+v", i, d.Errors[i], want)
		}
	}
}
