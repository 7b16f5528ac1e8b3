package storagetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func searchCases() []testCase {
	return []testCase{
		{"SearchPrefixWords", "ListProjections with Search keeps the instances of which every search word is a prefix of a word of their committed SearchText (a whole word, a shorter prefix; not the middle or end of a word; not a word of another instance or projection)", testSearchWords},
		{"SearchCombined", "Search combines with IDs, Reference, From/To, every sort, Skip and Limit as the other filters do, and Total counts the matches of them all", testSearchCombined},
		{"SearchChanges", "a commit replaces an instance's indexed text (a new SearchText, or \"\" which removes it from the search), a deleted instance leaves it, a commit without Indexed leaves others' alone", testSearchChanges},
		{"SearchResetRename", "ResetProjection and DeleteDefinition remove a projection's indexed text; RenameProjection carries from's index to its new name and drops the one to had; an instance created again starts with only its new text", testSearchResetRename},
		{"SearchProjector", "a Projector indexes the fields a definition lists in indexedFields and List's Search finds the instances by them; a Put that changes indexedFields rebuilds the index", testSearchProjector},
	}
}

// searchFixture is the indexed text of projection "p"'s instances.
var searchFixture = []struct {
	id, text string
	ref      storage.Reference
}{
	{"i1", "ada lovelace london 1815", num(1815, "1815")},
	{"i2", "alan turing london 1912", num(1912, "1912")},
	{"i3", "grace hopper new york 1906", num(1906, "1906")},
	{"i4", "adalbert stifter", text("x")},
	{"i5", "", text("x")},
	{"i6", "éowyn édoras ünïcode 日本語", storage.Reference{}},
}

// seedSearch commits searchFixture to projection "p" and the same ids,
// with other text, to "q"; it returns p's states by id.
func seedSearch(t *testing.T, h *harness) map[string]storage.ProjectionState {
	t.Helper()
	events := savedPositions(t, h, 1)
	mustCreate(t, h, newDef("p"))
	mustCreate(t, h, newDef("q"))
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	out := make(map[string]storage.ProjectionState)
	var states, other []storage.ProjectionState
	for i, f := range searchFixture {
		st := storage.ProjectionState{
			Name: "p", InstanceID: f.id, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)),
			Position: events[0].Position, CreatedAt: base.Add(time.Duration(len(searchFixture)-i) * time.Minute),
			UpdatedAt: base.Add(time.Hour), Reference: f.ref, SearchText: f.text,
		}
		states = append(states, st)
		st.SearchText = ""
		out[f.id] = st
		other = append(other, storage.ProjectionState{Name: "q", InstanceID: f.id, Data: json.RawMessage(`{}`),
			Position: events[0].Position, SearchText: "zebra london"})
	}
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", To: events[0].Position, States: states, Indexed: true})
	mustCommit(t, h, storage.ProjectionCommit{Name: "q", To: events[0].Position, States: other, Indexed: true})
	return out
}

// pick returns the states of ids, in that order.
func pick(byID map[string]storage.ProjectionState, ids ...string) []storage.ProjectionState {
	out := make([]storage.ProjectionState, len(ids))
	for i, id := range ids {
		out[i] = byID[id]
	}
	return out
}

func search(words ...string) storage.ProjectionQuery {
	return storage.ProjectionQuery{Name: "p", Search: words, Limit: 100}
}

func testSearchWords(t *testing.T, h *harness) {
	p := seedSearch(t, h)
	for _, c := range []struct {
		words []string
		want  []string
		rule  string
	}{
		{[]string{"ada"}, []string{"i1", "i4"}, "a whole word and the start of a longer one"},
		{[]string{"adal"}, []string{"i4"}, "a longer prefix"},
		{[]string{"a"}, []string{"i1", "i2", "i4"}, "one letter"},
		{[]string{"london"}, []string{"i1", "i2"}, "a word of two instances"},
		{[]string{"london", "al"}, []string{"i2"}, "every word must match"},
		{[]string{"al", "london"}, []string{"i2"}, "in any order"},
		{[]string{"ada", "adal"}, []string{"i4"}, "two words may match one"},
		{[]string{"19"}, []string{"i2", "i3"}, "digits"},
		{[]string{"ondon"}, nil, "not the middle of a word"},
		{[]string{"lovelacey"}, nil, "not longer than the word"},
		{[]string{"zebra"}, nil, "not another projection's text"},
		{[]string{"ada", "turing"}, nil, "words of two instances"},
		{[]string{"newyork"}, nil, "not across words"},
		{[]string{"éo"}, []string{"i6"}, "non-ASCII letters"},
		{[]string{"ünï", "édoras"}, []string{"i6"}, "non-ASCII words"},
		{[]string{"日本"}, []string{"i6"}, "CJK"},
		{[]string{"eowyn"}, nil, "accents count"},
	} {
		checkList(t, h, search(c.words...), pick(p, c.want...), len(c.want), fmt.Sprintf("search %q: %s", c.words, c.rule))
	}
}

func testSearchCombined(t *testing.T, h *harness) {
	p := seedSearch(t, h)
	// The prefix "a" matches i1, i2 and i4.
	three := pick(p, "i1", "i2", "i4")
	for by, name := range sortNames {
		for _, desc := range []bool{false, true} {
			want := sorted(three, by, desc)
			q := search("a")
			q.Sort, q.Descending = by, desc
			checkList(t, h, q, want, 3, fmt.Sprintf("search sorted by %s, descending %v", name, desc))
			for skip := range 4 {
				q.Skip, q.Limit = skip, 2
				checkList(t, h, q, want[min(skip, 3):min(skip+2, 3)], 3, fmt.Sprintf("search sorted by %s, descending %v, skip %d limit 2", name, desc, skip))
			}
			q.Skip, q.Limit = 0, 0
			checkList(t, h, q, nil, 3, "search with Limit 0 returns only Total")
		}
	}
	q := search("a")
	q.IDs = []string{"i2", "i3", "i4", "i6"}
	checkList(t, h, q, pick(p, "i2", "i4"), 2, "search and IDs")
	q = search("a")
	q.Reference = text("x")
	checkList(t, h, q, pick(p, "i4"), 1, "search and Reference")
	q = search("a")
	q.From, q.To = num(1800, ""), num(1900, "")
	checkList(t, h, q, pick(p, "i1"), 1, "search and From/To")
	q = search("london")
	q.From = num(1900, "")
	checkList(t, h, q, pick(p, "i2"), 1, "search and From")
	q = search("zzz")
	q.Sort = storage.SortByReference
	checkList(t, h, q, nil, 0, "a search without matches")
}

func testSearchChanges(t *testing.T, h *harness) {
	p := seedSearch(t, h)
	events := savedPositions(t, h, 1) // the feed: the seed's event, then this one
	from, to := events[0].Position, events[1].Position
	changed := p["i1"]
	changed.SearchText = "ada byron"
	changed.Position = to
	cleared := p["i2"]
	cleared.SearchText = ""
	cleared.Position = to
	added := p["i5"]
	added.SearchText = "london calling"
	added.Position = to
	mustCommit(t, h, storage.ProjectionCommit{Name: "p", From: from, To: to, Indexed: true,
		States: []storage.ProjectionState{changed, cleared, added}, Deletes: []string{"i3"}})
	changed.SearchText, cleared.SearchText, added.SearchText = "", "", ""
	p["i1"], p["i2"], p["i5"] = changed, cleared, added
	checkList(t, h, search("byron"), pick(p, "i1"), 1, "the new text of a changed instance is found")
	checkList(t, h, search("lovelace"), nil, 0, "the old text of a changed instance is not")
	checkList(t, h, search("turing"), nil, 0, "an instance whose text became empty is not found")
	checkList(t, h, search("london"), pick(p, "i5"), 1, "an instance that gained text is found, those that lost it are not")
	checkList(t, h, search("hopper"), nil, 0, "a deleted instance is not found")
	checkList(t, h, storage.ProjectionQuery{Name: "p", Limit: 100}, pick(p, "i1", "i2", "i4", "i5", "i6"), 5, "the instances without a match are still listed without a search")

	// A commit of another projection, not indexed, leaves p's index alone.
	mustCommit(t, h, storage.ProjectionCommit{Name: "q", From: from, To: to, States: []storage.ProjectionState{
		{Name: "q", InstanceID: "i1", Data: json.RawMessage(`{}`), Position: to}}})
	checkList(t, h, search("byron"), pick(p, "i1"), 1, "a commit of another projection leaves the index alone")
}

func testSearchResetRename(t *testing.T, h *harness) {
	seedSearch(t, h)
	ctx := t.Context()
	if err := h.s.RenameProjection(ctx, "p", "q"); err != nil {
		t.Fatalf("RenameProjection: %v", err)
	}
	checkList(t, h, search("ada"), nil, 0, "after a rename the old name has no index")
	q := search("ada")
	q.Name = "q"
	list, err := h.s.ListProjections(ctx, q)
	if err != nil || list.Total != 2 || !slices.Equal(ids(list.States), []string{"i1", "i4"}) {
		t.Errorf("after RenameProjection p to q, a search of q must find p's instances i1, i4: got %q total %d, %v", ids(list.States), list.Total, err)
	}
	q.Search = []string{"zebra"}
	if list, err := h.s.ListProjections(ctx, q); err != nil || list.Total != 0 {
		t.Errorf("after RenameProjection p to q, q's old index must be gone: a search found %d, %v", list.Total, err)
	}
	if err := h.s.ResetProjection(ctx, "q"); err != nil {
		t.Fatalf("ResetProjection: %v", err)
	}
	q.Search = []string{"ada"}
	if list, err := h.s.ListProjections(ctx, q); err != nil || list.Total != 0 {
		t.Errorf("after ResetProjection a search must find nothing: found %d, %v", list.Total, err)
	}
	// Built again, an instance has only its new text.
	events := feedEvents(t, h)
	mustCommit(t, h, storage.ProjectionCommit{Name: "q", To: events[0].Position, Indexed: true, States: []storage.ProjectionState{
		{Name: "q", InstanceID: "i1", Data: json.RawMessage(`{}`), Position: events[0].Position, SearchText: "babbage"}}})
	q.Search = []string{"ada"}
	if list, err := h.s.ListProjections(ctx, q); err != nil || list.Total != 0 {
		t.Errorf("after ResetProjection and a new commit the old text must not match: found %d, %v", list.Total, err)
	}
	q.Search = []string{"bab"}
	if list, err := h.s.ListProjections(ctx, q); err != nil || list.Total != 1 {
		t.Errorf("after ResetProjection and a new commit the new text must match: found %d, %v", list.Total, err)
	}
	if err := h.s.DeleteDefinition(ctx, "q"); err != nil {
		t.Fatalf("DeleteDefinition: %v", err)
	}
	mustCreate(t, h, newDef("q"))
	if list, err := h.s.ListProjections(ctx, q); err != nil || list.Total != 0 {
		t.Errorf("a definition deleted and created again must have no indexed text: found %d, %v", list.Total, err)
	}
}

func testSearchProjector(t *testing.T, h *harness) {
	ctx := t.Context()
	p := eventstore.NewProjector(h.store, nil)
	def := eventstore.Definition{Name: "customers", Feed: "customer",
		IndexedFields: []string{"$.projection.name", "city"},
		Handlers: []eventstore.Handler{{EventType: "Registered", Functions: []eventstore.Function{
			{Name: eventstore.FuncSet, TargetSelector: "$.projection.name", EventSelector: "$.event.name"},
			{Name: eventstore.FuncSet, TargetSelector: "$.projection.city", EventSelector: "$.event.city"},
			{Name: eventstore.FuncSet, TargetSelector: "$.projection.note", EventSelector: "$.event.note"},
		}}}}
	if err := p.Create(ctx, def); err != nil {
		t.Fatal(err)
	}
	for i, c := range [][3]string{{"Ada Lovelace", "London", "first"}, {"Alan Turing", "Wilmslow", "london"}, {"Grace Hopper", "New York", "x"}} {
		mustSave(t, h, "customer", fmt.Sprintf("c%d", i), []eventstore.NewEvent{ev("Registered",
			fmt.Sprintf(`{"name":%q,"city":%q,"note":%q}`, c[0], c[1], c[2]))}, nil)
	}
	find := func(text string, want ...string) {
		t.Helper()
		page, err := p.List(ctx, "customers", eventstore.ListOptions{Search: text})
		if err != nil {
			t.Errorf("List with Search %q: %v", text, err)
			return
		}
		var got []string
		for _, pj := range page.Projections {
			got = append(got, pj.ID)
		}
		if !slices.Equal(got, want) || page.Total != int64(len(want)) {
			t.Errorf("List with Search %q: got %q (total %d), want %q", text, got, page.Total, want)
		}
	}
	find("LOND", "c0")
	find("new-york", "c2")
	find("  a, ", "c0", "c1")
	find("first")
	// Index the note instead: a changed definition, rebuilt.
	def.IndexedFields = []string{"note"}
	if _, err := p.Put(ctx, def); err != nil {
		t.Fatal(err)
	}
	if err := p.CatchUp(ctx, "customers"); err != nil {
		t.Fatal(err)
	}
	find("lond", "c1")
	find("first", "c0")
	find("grace")
}
