package storagetest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

func projectionListCases() []testCase {
	return []testCase{
		{"ListProjectionsSort", "ListProjections sorts by id, reference (numbers by value, then texts by bytes, then none), createdAt or updatedAt, ascending or descending (the exact reverse), ties broken by instance id", testListSort},
		{"ListProjectionsPaging", "ListProjections leaves out Skip matches and returns at most Limit, so pages concatenate to the whole order; Total counts every match whatever the page; Limit 0 returns only Total", testListPaging},
		{"ListProjectionsFilters", "ListProjections keeps only the instances among IDs, whose reference equals Reference (kind and value), and whose reference lies in [From, To] (of that kind)", testListFilters},
		{"ListProjectionsUnknown", "ListProjections of an unknown projection, or of one without instances, returns no states and Total 0 without error", testListUnknown},
	}
}

func num(n float64, text string) storage.Reference {
	return storage.Reference{Kind: storage.RefNumber, Number: n, Text: text}
}

func text(s string) storage.Reference {
	return storage.Reference{Kind: storage.RefText, Text: s}
}

// listFixture is the instances of projection "p" the list cases query, in
// ascending reference order.
var listFixture = []struct {
	id  string
	ref storage.Reference
}{
	{"n-c", num(-2.5, "-2.5")},
	{"n-a", num(1, "1.0")}, // ties with n-b: by id
	{"n-b", num(1, "1")},
	{"n-f", num(9, "9")}, // before 10: numbers are not compared as text
	{"n-d", num(10, "10")},
	{"n-e", num(1000, "1e3")},
	{"t-g", text("")},
	{"t-f", text("10")},
	{"t-c", text("B")}, // bytes: upper case first
	{"t-a", text("a")}, // ties with t-b: by id
	{"t-b", text("a")},
	{"t-d", text("ab")},
	{"t-e", text("é")},
	{"a-none", storage.Reference{}}, // none last, whatever the id
	{"z-none", storage.Reference{}},
}

// seedList creates projection "p" with listFixture's instances (and a
// projection "q" sharing some ids) and returns p's states by id.
func seedList(t *testing.T, h *harness) map[string]storage.ProjectionState {
	t.Helper()
	events := savedPositions(t, h, 1)
	mustCreate(t, h, newDef("p"))
	mustCreate(t, h, newDef("q"))
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	out := make(map[string]storage.ProjectionState)
	var states []storage.ProjectionState
	for i, f := range listFixture {
		st := storage.ProjectionState{
			Name: "p", InstanceID: f.id, Data: json.RawMessage(fmt.Sprintf(`{"id":%q}`, f.id)),
			Position:  events[0].Position,
			CreatedAt: base.Add(time.Duration((i*5)%4) * time.Minute),                              // ties
			UpdatedAt: base.Add(time.Hour + time.Duration((i*7)%6)*time.Second + time.Microsecond), // other ties
			Reference: f.ref,
		}
		out[f.id] = st
		states = append(states, st)
	}
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", To: events[0].Position, States: states})
	mustCommit(t, h, storage.ProjectionCommit{Name: "q", To: events[0].Position, States: []storage.ProjectionState{
		{Name: "q", InstanceID: "n-a", Data: json.RawMessage(`{}`), Position: events[0].Position, Reference: num(1, "1")},
		{Name: "q", InstanceID: "t-a", Data: json.RawMessage(`{}`), Position: events[0].Position, Reference: text("a")},
	}})
	return out
}

// refOrder compares references in the documented ascending order.
func refOrder(a, b storage.Reference) int {
	rank := func(r storage.Reference) int {
		switch r.Kind {
		case storage.RefNumber:
			return 0
		case storage.RefText:
			return 1
		}
		return 2
	}
	if c := cmp.Compare(rank(a), rank(b)); c != 0 {
		return c
	}
	switch a.Kind {
	case storage.RefNumber:
		return cmp.Compare(a.Number, b.Number)
	case storage.RefText:
		return strings.Compare(a.Text, b.Text)
	}
	return 0
}

// sorted returns the states in the order of sort, ties by id.
func sorted(states []storage.ProjectionState, by storage.ProjectionSort, desc bool) []storage.ProjectionState {
	out := slices.Clone(states)
	slices.SortFunc(out, func(a, b storage.ProjectionState) int {
		var c int
		switch by {
		case storage.SortByReference:
			c = refOrder(a.Reference, b.Reference)
		case storage.SortByCreatedAt:
			c = a.CreatedAt.Compare(b.CreatedAt)
		case storage.SortByUpdatedAt:
			c = a.UpdatedAt.Compare(b.UpdatedAt)
		}
		if c == 0 {
			c = strings.Compare(a.InstanceID, b.InstanceID)
		}
		if desc {
			c = -c
		}
		return c
	})
	return out
}

func values[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func ids(states []storage.ProjectionState) []string {
	out := make([]string, len(states))
	for i, st := range states {
		out[i] = st.InstanceID
	}
	return out
}

var sortNames = map[storage.ProjectionSort]string{
	storage.SortByID: "id", storage.SortByReference: "reference",
	storage.SortByCreatedAt: "createdAt", storage.SortByUpdatedAt: "updatedAt",
}

// checkList runs q and compares the result with want and total.
func checkList(t *testing.T, h *harness, q storage.ProjectionQuery, want []storage.ProjectionState, total int, rule string) {
	t.Helper()
	list, err := h.s.ListProjections(t.Context(), q)
	if err != nil {
		t.Errorf("%s: ListProjections %+v: %v", rule, q, err)
		return
	}
	if list.Total != int64(total) {
		t.Errorf("%s: ListProjections %+v: Total must be %d, got %d", rule, q, total, list.Total)
	}
	if !slices.Equal(ids(list.States), ids(want)) {
		t.Errorf("%s: ListProjections %+v:\n got %q\nwant %q", rule, q, ids(list.States), ids(want))
		return
	}
	for i := range want {
		if msg := diffState(list.States[i], want[i]); msg != "" {
			t.Errorf("%s: ListProjections %+v must return the instances in full: %s", rule, q, msg)
		}
	}
}

func testListSort(t *testing.T, h *harness) {
	byID := seedList(t, h)
	all := values(byID)
	// The documented reference order, written out.
	var asc []storage.ProjectionState
	for _, f := range listFixture {
		asc = append(asc, byID[f.id])
	}
	if got := ids(sorted(all, storage.SortByReference, false)); !slices.Equal(got, ids(asc)) {
		t.Fatalf("the test's own reference order is wrong: %q", got)
	}
	for by, name := range sortNames {
		for _, desc := range []bool{false, true} {
			checkList(t, h, storage.ProjectionQuery{Name: "p", Sort: by, Descending: desc, Limit: 100},
				sorted(all, by, desc), len(all), fmt.Sprintf("sort by %s, descending %v", name, desc))
		}
	}
}

func testListPaging(t *testing.T, h *harness) {
	all := values(seedList(t, h))
	for by, name := range sortNames {
		for _, desc := range []bool{false, true} {
			want := sorted(all, by, desc)
			for _, limit := range []int{1, 4, 7} {
				var got []string
				for skip := 0; skip < len(want)+limit; skip += limit {
					q := storage.ProjectionQuery{Name: "p", Sort: by, Descending: desc, Skip: skip, Limit: limit}
					list, err := h.s.ListProjections(t.Context(), q)
					if err != nil {
						t.Fatalf("ListProjections %+v: %v", q, err)
					}
					if list.Total != int64(len(all)) {
						t.Errorf("ListProjections %+v: Total must count every match (%d) whatever the page, got %d", q, len(all), list.Total)
					}
					if n := len(list.States); n > limit {
						t.Errorf("ListProjections %+v: at most Limit states, got %d", q, n)
					}
					got = append(got, ids(list.States)...)
				}
				if !slices.Equal(got, ids(want)) {
					t.Errorf("sort by %s, descending %v: pages of %d must concatenate to the whole order:\n got %q\nwant %q", name, desc, limit, got, ids(want))
				}
			}
			checkList(t, h, storage.ProjectionQuery{Name: "p", Sort: by, Descending: desc, Skip: 3, Limit: 0}, nil, len(all), "Limit 0 returns only Total")
			checkList(t, h, storage.ProjectionQuery{Name: "p", Sort: by, Descending: desc, Skip: 100, Limit: 5}, nil, len(all), "a Skip past the matches returns no states but the Total")
		}
	}
}

func testListFilters(t *testing.T, h *harness) {
	s := seedList(t, h)
	pick := func(ids ...string) []storage.ProjectionState {
		out := make([]storage.ProjectionState, len(ids))
		for i, id := range ids {
			out[i] = s[id]
		}
		return out
	}
	byRef := storage.SortByReference
	for _, c := range []struct {
		rule string
		q    storage.ProjectionQuery
		want []storage.ProjectionState
	}{
		{"IDs keeps only those instances", storage.ProjectionQuery{IDs: []string{"t-a", "n-d", "missing", "a-none"}}, pick("a-none", "n-d", "t-a")},
		{"IDs, sorted by reference", storage.ProjectionQuery{IDs: []string{"t-a", "n-d", "missing", "a-none"}, Sort: byRef}, pick("n-d", "t-a", "a-none")},
		{"IDs and Reference both apply", storage.ProjectionQuery{IDs: []string{"t-a", "t-d", "n-a"}, Reference: text("a")}, pick("t-a")},
		{"a number Reference matches by Number", storage.ProjectionQuery{Reference: num(1, "")}, pick("n-a", "n-b")},
		{"a number Reference matches numbers only", storage.ProjectionQuery{Reference: num(10, "10")}, pick("n-d")},
		{"a text Reference matches texts only", storage.ProjectionQuery{Reference: text("10")}, pick("t-f")},
		{"a text Reference matches exactly", storage.ProjectionQuery{Reference: text("A")}, nil},
		{"an empty text Reference matches the empty text", storage.ProjectionQuery{Reference: text("")}, pick("t-g")},
		{"a number range is inclusive", storage.ProjectionQuery{From: num(1, ""), To: num(10, ""), Sort: byRef}, pick("n-a", "n-b", "n-f", "n-d")},
		{"From alone is a lower bound", storage.ProjectionQuery{From: num(9, ""), Sort: byRef}, pick("n-f", "n-d", "n-e")},
		{"To alone is an upper bound", storage.ProjectionQuery{To: num(1, ""), Sort: byRef}, pick("n-c", "n-a", "n-b")},
		{"a text range is inclusive, by bytes", storage.ProjectionQuery{From: text("B"), To: text("ab"), Sort: byRef}, pick("t-c", "t-a", "t-b", "t-d")},
		{"a text From alone", storage.ProjectionQuery{From: text("a"), Sort: byRef}, pick("t-a", "t-b", "t-d", "t-e")},
		{"a text To alone", storage.ProjectionQuery{To: text("B"), Sort: byRef}, pick("t-g", "t-f", "t-c")},
		{"an empty range", storage.ProjectionQuery{From: text("b"), To: text("a")}, nil},
		{"a range sorted by id", storage.ProjectionQuery{From: text("a")}, pick("t-a", "t-b", "t-d", "t-e")},
	} {
		c.q.Name, c.q.Limit = "p", 100
		checkList(t, h, c.q, c.want, len(c.want), c.rule)
	}
	// Filters, sort and paging together.
	q := storage.ProjectionQuery{Name: "p", From: num(1, ""), To: num(1000, ""), Sort: byRef, Descending: true, Skip: 1, Limit: 2}
	checkList(t, h, q, pick("n-d", "n-f"), 5, "a range, sorted descending, paged")
	q = storage.ProjectionQuery{Name: "p", Reference: num(1, ""), Limit: 0}
	checkList(t, h, q, nil, 2, "Limit 0 with a filter counts the matches")
}

func testListUnknown(t *testing.T, h *harness) {
	checkList(t, h, storage.ProjectionQuery{Name: "nope", Limit: 10}, nil, 0, "an unknown projection has no instances")
	mustCreate(t, h, newDef("empty"))
	checkList(t, h, storage.ProjectionQuery{Name: "empty", Limit: 10}, nil, 0, "a projection without instances has none")
	seedList(t, h)
	checkList(t, h, storage.ProjectionQuery{Name: "empty", Limit: 10, Sort: storage.SortByReference}, nil, 0, "instances belong to one projection")
}
