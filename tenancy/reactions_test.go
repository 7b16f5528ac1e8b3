package tenancy_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/tenancy"
)

// Reaction definitions of the project apply to every tenant's events
// separately: each tenant's events schedule reactions in that tenant's
// storage, delivered with its id in the metadata; a definition made after
// tenants opened reaches them, and its deletion stops them.
func TestTenantReactions(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var got []string // tenantId/aggregateId of each delivery
	deliver := func(_ context.Context, d reactions.Delivery) error {
		var b struct {
			Metadata struct{ TenantID, AggregateID string } `json:"metadata"`
		}
		if err := json.Unmarshal(d.Body, &b); err != nil {
			return err
		}
		mu.Lock()
		got = append(got, b.Metadata.TenantID+"/"+b.Metadata.AggregateID)
		mu.Unlock()
		return nil
	}
	projectStorage := memory.New()
	project, err := eventstore.New(projectStorage, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer project.Close()
	engine, err := reactions.New(project, projectStorage, &reactions.Options{
		Funcs: map[string]reactions.Func{"f": deliver}, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := tenancy.New(ctx, tenancy.Options{
		Registry:    memory.New(),
		Open:        func(context.Context, string) (storage.Storage, error) { return memory.New(), nil },
		Definitions: eventstore.NewProjector(project, nil),
		Reactions:   engine,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []string{a, b} {
		if _, err := s.Add(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
	}
	saveTo := func(tenant, aggregate string) {
		t.Helper()
		st, _, release, err := s.Open(ctx, tenant)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if _, err := st.Save(ctx, "order", aggregate, []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "placed", Data: []byte(`{}`)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	saveTo(a, "before") // a is open before the definition exists: never fires

	if err := engine.Create(ctx, reactions.Definition{Name: "r", FeedName: "order", ReactOnEventType: "placed",
		Action: reactions.Action{Type: reactions.ActionFunc, Function: "f"}}); err != nil {
		t.Fatal(err)
	}
	// Saved after the definition was created, before a got it (as when it
	// is created through another server): fires all the same.
	saveTo(a, "a-0")
	if err := s.ReactionDefinitionsChanged(ctx); err != nil {
		t.Fatal(err)
	}
	saveTo(a, "a-1")
	saveTo(b, "b-1") // b opens now, with the definition
	want := []string{a + "/a-0", a + "/a-1", b + "/b-1"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("deliveries %v, want %v", got, want)
	}
	mu.Unlock()

	// Each tenant lists its own reactions only; the project none.
	for id, aggs := range map[string][]string{a: {"a-0", "a-1"}, b: {"b-1"}} {
		e, release, err := s.OpenReactions(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		page, err := e.Reactions(ctx, reactions.ListOptions{})
		release()
		var listed []string
		for _, r := range page.Reactions {
			listed = append(listed, r.AggregateID)
		}
		sort.Strings(listed)
		if err != nil || !slices.Equal(listed, aggs) {
			t.Errorf("tenant %s lists %+v, %v; want the reactions of %v", id, page.Reactions, err, aggs)
		}
	}
	if page, err := engine.Reactions(ctx, reactions.ListOptions{}); err != nil || len(page.Reactions) != 0 {
		t.Errorf("the project lists %+v, %v; want none", page.Reactions, err)
	}

	// Deleted in the project: gone from every open tenant.
	if err := engine.Delete(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReactionDefinitionsChanged(ctx); err != nil {
		t.Fatal(err)
	}
	e, release, err := s.OpenReactions(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := e.Definitions(ctx)
	release()
	if err != nil || len(defs) != 0 {
		t.Errorf("tenant a still has %+v, %v", defs, err)
	}
}

// Without Options.Reactions a Set has no reactions to open.
func TestOpenReactionsUnsupported(t *testing.T) {
	ctx := context.Background()
	project, err := eventstore.New(memory.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer project.Close()
	s, err := tenancy.New(ctx, tenancy.Options{
		Registry:    memory.New(),
		Open:        func(context.Context, string) (storage.Storage, error) { return memory.New(), nil },
		Definitions: eventstore.NewProjector(project, nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Add(ctx, a, ""); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OpenReactions(ctx, a); !errors.Is(err, reactions.ErrUnsupported) {
		t.Errorf("OpenReactions: %v, want ErrUnsupported", err)
	}
}
