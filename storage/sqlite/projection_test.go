package sqlite_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// commitStates creates projection name when needed and commits states
// from checkpoint from to from+1.
func commitStates(t *testing.T, s storage.Storage, name string, from int64, states []storage.ProjectionState, deletes ...string) {
	t.Helper()
	if from == 0 {
		if err := s.CreateDefinition(ctx, storage.DefinitionRecord{Name: name, Spec: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CommitProjection(ctx, storage.ProjectionCommit{Name: name, From: from, To: from + 1, States: states, Deletes: deletes}); err != nil {
		t.Fatal(err)
	}
}

func ids(states []storage.ProjectionState) []string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = st.InstanceID
	}
	return out
}

// TestListProjections lists instances with every kind of reference, in
// every order, filtered and paged.
func TestListProjections(t *testing.T) {
	s := openTemp(t)
	t0 := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	num := func(n float64, text string) storage.Reference {
		return storage.Reference{Kind: storage.RefNumber, Number: n, Text: text}
	}
	txt := func(s string) storage.Reference { return storage.Reference{Kind: storage.RefText, Text: s} }
	refs := map[string]storage.Reference{
		"a": txt("b"), "b": num(10, "10"), "c": {}, "d": num(-2.5, "-2.5"), "e": txt("B"),
		"f": num(10, "1e1"), "g": txt("b\xff"), "h": {},
	}
	var states []storage.ProjectionState
	for i, id := range []string{"h", "g", "f", "e", "d", "c", "b", "a"} {
		states = append(states, storage.ProjectionState{InstanceID: id, Data: json.RawMessage(`{}`), Position: int64(i + 1),
			CreatedAt: t0.Add(time.Duration(i) * time.Hour), UpdatedAt: t0.Add(time.Duration(8-i%3) * time.Hour), Reference: refs[id]})
	}
	commitStates(t, s, "p", 0, states)
	list := func(q storage.ProjectionQuery) ([]string, int64) {
		t.Helper()
		q.Name = "p"
		l, err := s.ListProjections(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return ids(l.States), l.Total
	}
	for _, c := range []struct {
		q     storage.ProjectionQuery
		want  []string
		total int64
	}{
		{storage.ProjectionQuery{Limit: 10}, []string{"a", "b", "c", "d", "e", "f", "g", "h"}, 8},
		{storage.ProjectionQuery{Sort: storage.SortByReference, Limit: 10}, []string{"d", "b", "f", "e", "a", "g", "c", "h"}, 8},
		{storage.ProjectionQuery{Sort: storage.SortByReference, Descending: true, Limit: 3, Skip: 1}, []string{"c", "g", "a"}, 8},
		{storage.ProjectionQuery{Sort: storage.SortByCreatedAt, Limit: 3}, []string{"h", "g", "f"}, 8},
		{storage.ProjectionQuery{Sort: storage.SortByUpdatedAt, Limit: 4}, []string{"c", "f", "a", "d"}, 8},
		{storage.ProjectionQuery{Sort: storage.SortByReference, Limit: 10, Reference: num(10, "")}, []string{"b", "f"}, 2},
		{storage.ProjectionQuery{Sort: storage.SortByReference, Limit: 10, From: txt("B"), To: txt("b")}, []string{"e", "a"}, 2},
		{storage.ProjectionQuery{Sort: storage.SortByReference, Limit: 10, From: num(0, "")}, []string{"b", "f"}, 2},
		{storage.ProjectionQuery{Limit: 10, From: num(0, ""), To: txt("z")}, []string{}, 0},
		{storage.ProjectionQuery{Limit: 10, IDs: []string{"g", "c", "x"}}, []string{"c", "g"}, 2},
		{storage.ProjectionQuery{Limit: 0}, []string{}, 8},
	} {
		got, total := list(c.q)
		if !slices.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.q, got, c.want)
		}
		if total != c.total {
			t.Errorf("%+v: total %d, want %d", c.q, total, c.total)
		}
	}
	if _, total := list(storage.ProjectionQuery{Sort: storage.SortByReference, Limit: 1, From: txt("")}); total != 3 {
		t.Errorf("texts counted %d, want 3", total)
	}
	if got, total := list(storage.ProjectionQuery{Limit: 0}); len(got) != 0 || total != 8 {
		t.Errorf("count only: %v, total %d", got, total)
	}
	st, err := s.LoadProjection(ctx, "p", "f")
	if err != nil || st.Reference != num(10, "1e1") || !st.CreatedAt.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("state f: %+v, %v", st, err)
	}
	if l, err := s.ListProjections(ctx, storage.ProjectionQuery{Name: "nope", Limit: 5}); err != nil || l.Total != 0 || len(l.States) != 0 {
		t.Fatalf("unknown projection: %+v, %v", l, err)
	}
	got, err := s.LoadProjections(ctx, "p", []string{"g", "x", "a", "c"})
	if err != nil || !slices.Equal(ids(got), []string{"g", "a", "c"}) || got[0].Reference != txt("b\xff") {
		t.Fatalf("LoadProjections: %+v, %v", got, err)
	}
}

// TestProjectionLifecycle commits deletions and unstorable error texts,
// then resets, renames and deletes projections.
func TestProjectionLifecycle(t *testing.T) {
	s := openTemp(t)
	state := func(id string) storage.ProjectionState {
		return storage.ProjectionState{InstanceID: id, Data: json.RawMessage(`{"id":"` + id + `"}`), Position: 1}
	}
	commitStates(t, s, "old", 0, []storage.ProjectionState{state("1"), state("2")})
	commitStates(t, s, "old", 1, []storage.ProjectionState{state("2")}, "1", "never-stored")
	err := s.CommitProjection(ctx, storage.ProjectionCommit{Name: "old", From: 2, To: 3,
		Errors: []storage.ProjectionError{{Position: 3, EventID: "e\x00", EventType: "t\xfe", InstanceID: "2", Message: "bad \xff\x00byte"}}})
	if err != nil {
		t.Fatalf("commit with unstorable error texts: %v", err)
	}
	def, err := s.Definition(ctx, "old")
	if err != nil || len(def.Errors) != 1 || def.Errors[0].Message != "bad \uFFFDbyte" || def.Errors[0].EventID != "e" || def.Errors[0].EventType != "t\uFFFD" {
		t.Fatalf("recorded error: %+v, %v", def.Errors, err)
	}
	if _, err := s.LoadProjection(ctx, "old", "1"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("deleted instance: %v", err)
	}
	commitStates(t, s, "new", 0, []storage.ProjectionState{state("9")})
	if err := s.RenameProjection(ctx, "old", "new"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Definition(ctx, "old"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("renamed-away definition: %v", err)
	}
	def, err = s.Definition(ctx, "new")
	if err != nil || def.Checkpoint != 3 || len(def.Errors) != 1 {
		t.Fatalf("renamed definition: %+v, %v", def, err)
	}
	l, err := s.ListProjections(ctx, storage.ProjectionQuery{Name: "new", Limit: 10})
	if err != nil || !slices.Equal(ids(l.States), []string{"2"}) || l.States[0].Name != "new" || l.Total != 1 {
		t.Fatalf("renamed instances: %+v, %v", l, err)
	}
	if err := s.RenameProjection(ctx, "old", "new"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("rename of an unknown projection: %v", err)
	}
	if err := s.RenameProjection(ctx, "new", "new"); err != nil {
		t.Fatalf("rename to itself: %v", err)
	}
	if err := s.ResetProjection(ctx, "new"); err != nil {
		t.Fatal(err)
	}
	def, err = s.Definition(ctx, "new")
	if err != nil || def.Checkpoint != 0 || len(def.Errors) != 0 {
		t.Fatalf("reset definition: %+v, %v", def, err)
	}
	if l, err := s.ListProjections(ctx, storage.ProjectionQuery{Name: "new"}); err != nil || l.Total != 0 {
		t.Fatalf("reset instances: %+v, %v", l, err)
	}
	if err := s.CommitProjection(ctx, storage.ProjectionCommit{Name: "new", From: 0, To: 1, States: []storage.ProjectionState{state("3")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDefinition(ctx, "new"); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{s.DeleteDefinition(ctx, "new"), s.ResetProjection(ctx, "new")} {
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("unknown projection: %v, want ErrNotFound", err)
		}
	}
	// A new definition of the name starts empty.
	if err := s.CreateDefinition(ctx, storage.DefinitionRecord{Name: "new", Spec: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadProjection(ctx, "new", "3"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("instance of a deleted definition: %v", err)
	}
}

// TestLoadProjectionsManyIDs asks for more ids than one statement binds.
func TestLoadProjectionsManyIDs(t *testing.T) {
	s := openTemp(t)
	var states []storage.ProjectionState
	var want []string
	for i := range 12_000 {
		id := fmt.Sprint(i)
		if i%2 == 0 {
			states = append(states, storage.ProjectionState{InstanceID: id, Data: json.RawMessage(`{}`)})
			want = append(want, id)
		}
	}
	commitStates(t, s, "p", 0, states)
	var ask []string
	for i := 11_999; i >= 0; i-- {
		ask = append(ask, fmt.Sprint(i))
	}
	slices.Reverse(want)
	got, err := s.LoadProjections(ctx, "p", ask)
	if err != nil || !slices.Equal(ids(got), want) {
		t.Fatalf("LoadProjections: %d states, %v", len(got), err)
	}
	l, err := s.ListProjections(ctx, storage.ProjectionQuery{Name: "p", IDs: ask, Limit: 1, Descending: true})
	if err != nil || l.Total != int64(len(want)) || l.States[0].InstanceID != "9998" {
		t.Fatalf("list by %d ids: total %d, %v", len(ask), l.Total, err)
	}
}
