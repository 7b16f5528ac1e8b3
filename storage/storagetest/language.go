package storagetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func languageCases() []testCase {
	return []testCase{
		{"ProjectionLanguageEndToEnd", "arrays, filters, references, delete and lists work through the Projector on this storage: state, references, list order and totals match what was saved", testLanguage},
		{"ProjectionReplaceAndDelete", "Put of a different definition rebuilds it from history and swaps it in; Delete removes it with its instances; Reset rebuilds", testReplace},
		{"ProjectionDescriptionInPlace", "Put of a definition that differs only in its description stores it in place (UpdateSpec): no replacement, the checkpoint stays, and a Projector holding the old spec goes on from it applying each event once", testDescriptionInPlace},
	}
}

func testID(n int) string { return fmt.Sprintf("00000000-0000-4000-8000-%012d", n) }

func testLanguage(t *testing.T, h *harness) {
	ctx := t.Context()
	p := eventstore.NewProjector(h.store, nil)
	def := eventstore.Definition{Name: "lists", Feed: "list", Handlers: []eventstore.Handler{
		{EventType: "Added", Functions: []eventstore.Function{
			{Name: "append", TargetSelector: "$.projection.todos", EventSelector: "$.event['id','text']"},
			{Name: "inc", TargetSelector: "$.projection.open"},
			{Name: "setref", TargetSelector: "$.projection.open"},
		}},
		{EventType: "Done", Functions: []eventstore.Function{
			{Name: "remove", TargetSelector: "$.projection.todos[?]", TargetFilter: "@.id == $.event.id"},
			{Name: "dec", TargetSelector: "$.projection.open"},
			{Name: "setref", TargetSelector: "$.projection.open"},
		}},
		{EventType: "Archived", Functions: []eventstore.Function{{Name: "delete"}}},
	}}
	if _, err := p.Put(ctx, def); err != nil {
		t.Fatal(err)
	}
	n := 0
	save := func(id, typ, data string) {
		n++
		if _, err := h.store.Save(ctx, "list", id, []eventstore.NewEvent{{ID: testID(n), Type: typ, Data: json.RawMessage(data)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	for l := range 12 {
		for i := range l % 5 {
			save(fmt.Sprint("l", l), "Added", fmt.Sprintf(`{"id":"t%d","text":"do %d"}`, i, i))
		}
	}
	save("l4", "Done", `{"id":"t1"}`)
	save("l9", "Archived", `{}`)
	save("l13", "Added", `{"id":"a","text":"x"}`)
	save("l13", "Archived", `{}`)

	pj, err := p.Single(ctx, "lists", "l4")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"todos":[{"id":"t0","text":"do 0"},{"id":"t2","text":"do 2"},{"id":"t3","text":"do 3"}],"open":"3"}`; string(pj.Data) != want {
		t.Errorf("l4 = %s, want %s", pj.Data, want)
	}
	if pj.Reference.Kind != storage.RefNumber || pj.Reference.Number != 3 {
		t.Errorf("l4 reference %+v, want the number 3", pj.Reference)
	}
	if _, err := p.Single(ctx, "lists", "l9"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a deleted instance: %v, want ErrNotFound", err)
	}
	// Lists with l%5 != 0 exist (l0, l5, l10 never got an event; l9 and
	// l13 are deleted): l1..l4, l6..l8, l11 = 8 instances.
	page, err := p.List(ctx, "lists", eventstore.ListOptions{Sort: storage.SortByReference, Descending: true, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range page.Projections {
		got = append(got, x.ID+"="+x.Reference.Text)
	}
	// References: l1=1 l2=2 l3=3 l4=3 (after Done) l6=1 l7=2 l8=3 l11=1;
	// descending, ties come in descending id order.
	if fmt.Sprint(got) != "[l8=3 l4=3 l3=3]" || page.Total != 8 || !page.HasMore {
		t.Errorf("list by reference desc = %v total %d more %v, want [l8=3 l4=3 l3=3] total 8 more true", got, page.Total, page.HasMore)
	}
	if c, err := p.Count(ctx, "lists", eventstore.ParseReference("1")); err != nil || c != 3 {
		t.Errorf("count of reference 1 = %d, %v; want 3 (l1, l6, l11)", c, err)
	}
}

func testReplace(t *testing.T, h *harness) {
	ctx := t.Context()
	p := eventstore.NewProjector(h.store, nil)
	count := eventstore.Definition{Name: "r", Feed: "acct", Aggregated: true, Handlers: []eventstore.Handler{{EventType: "D",
		Functions: []eventstore.Function{{Name: "inc", TargetSelector: "$.projection.n"}}}}}
	sum := count
	sum.Handlers = []eventstore.Handler{{EventType: "D", Functions: []eventstore.Function{{Name: "add", TargetSelector: "$.projection.sum", EventSelector: "$.event.v"}}}}
	if _, err := p.Put(ctx, count); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if _, err := h.store.Save(ctx, "acct", fmt.Sprint("a", i%3), []eventstore.NewEvent{{ID: testID(i + 1), Type: "D", Data: json.RawMessage(`{"v":2}`)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want string) {
		t.Helper()
		pj, err := p.Aggregated(ctx, "r")
		if err != nil || string(pj.Data) != want {
			t.Fatalf("r = %s, %v; want %s", pj.Data, err, want)
		}
	}
	check(`{"n":"30"}`)
	if res, err := p.Put(ctx, sum); err != nil || res != eventstore.PutReplacing {
		t.Fatalf("Put replacement: %v, %v", res, err)
	}
	check(`{"n":"30"}`)
	if err := p.CatchUp(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	check(`{"sum":"60"}`)
	if err := p.Reset(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	check(`{"sum":"60"}`)
	if err := p.Delete(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Aggregated(ctx, "r"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("after Delete: %v, want ErrNotFound", err)
	}
	if res, err := p.Put(ctx, count); err != nil || res != eventstore.PutCreated {
		t.Fatalf("Put after Delete: %v, %v", res, err)
	}
	check(`{"n":"30"}`)
}

func testDescriptionInPlace(t *testing.T, h *harness) {
	ctx := t.Context()
	p1, p2 := eventstore.NewProjector(h.store, nil), eventstore.NewProjector(h.store, nil)
	def := eventstore.Definition{Name: "described", Description: "first", Feed: "acct", Aggregated: true, Handlers: []eventstore.Handler{{EventType: "D",
		Functions: []eventstore.Function{{Name: "inc", TargetSelector: "$.projection.n"}}}}}
	if _, err := p1.Put(ctx, def); err != nil {
		t.Fatal(err)
	}
	save := func(from, n int) {
		t.Helper()
		for i := from; i < from+n; i++ {
			if _, err := h.store.Save(ctx, "acct", fmt.Sprint("a", i%3), []eventstore.NewEvent{{ID: testID(i + 1), Type: "D"}}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(p *eventstore.Projector, want string) {
		t.Helper()
		pj, err := p.Aggregated(ctx, "described")
		if err != nil || string(pj.Data) != want {
			t.Fatalf("described = %s, %v; want %s", pj.Data, err, want)
		}
	}
	save(0, 10)
	check(p1, `{"n":"10"}`)
	check(p2, `{"n":"10"}`) // p2 now holds the first spec
	before := mustDefinition(t, h, "described")

	def.Description = "second"
	if res, err := p1.Put(ctx, def); err != nil || res != eventstore.PutUpdated {
		t.Fatalf("Put with only a new description: %v, %v; want updated", res, err)
	}
	after := mustDefinition(t, h, "described")
	if after.Checkpoint != before.Checkpoint || !after.CreatedAt.Equal(before.CreatedAt) {
		t.Errorf("a description-only Put must keep checkpoint %d and CreatedAt %v, got %d and %v",
			before.Checkpoint, before.CreatedAt, after.Checkpoint, after.CreatedAt)
	}
	if names := definitionNames(t, h); len(names) != 1 || names[0] != "described" {
		t.Errorf("a description-only Put must create no replacement: Definitions lists %q", names)
	}
	for _, p := range []*eventstore.Projector{p1, p2} {
		if d, err := p.Definition(ctx, "described"); err != nil || d.Description != "second" {
			t.Errorf("Definition must return the new description: %q, %v", d.Description, err)
		}
	}
	save(10, 5)
	check(p2, `{"n":"15"}`)
	save(15, 5)
	check(p1, `{"n":"20"}`)
	check(p2, `{"n":"20"}`)
}
