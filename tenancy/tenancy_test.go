package tenancy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/eventkit-go/eventstore/tenancy"
)

const (
	a = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"
	b = "2c5f39cb-3ab2-42e3-994a-1127e4ddb538"
)

func TestRegistrySurvivesReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	project, err := eventstore.New(memory.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer project.Close()
	defs := eventstore.NewProjector(project, nil)
	var removed []string
	open := func() *tenancy.Set {
		reg, err := sqlite.Open(filepath.Join(dir, "registry.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := tenancy.New(ctx, tenancy.Options{
			Registry: reg,
			Open: func(_ context.Context, id string) (storage.Storage, error) {
				return sqlite.Open(filepath.Join(dir, id+".db"), nil)
			},
			Remove:      func(_ context.Context, id string) error { removed = append(removed, id); return nil },
			Definitions: defs,
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if _, err := s.Add(ctx, a, "Acme"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, b, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, b, "Globex"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	ts, err := s.List(ctx)
	if err != nil || len(ts) != 2 {
		t.Fatalf("List: %v %v", ts, err)
	}
	if ts[0].ID != a || ts[0].Number != 1 || !ts[0].Deleted || ts[0].Reference != "Acme" || time.Since(ts[0].AddedAt) > time.Minute {
		t.Errorf("a: %+v", ts[0])
	}
	if ts[1].ID != b || ts[1].Number != 2 || ts[1].Deleted || ts[1].Reference != "Globex" {
		t.Errorf("b: %+v", ts[1])
	}
	// The deleted tenant's storage is removed at delete and again at open.
	if len(removed) != 2 || removed[0] != a || removed[1] != a {
		t.Errorf("removed %v", removed)
	}
	if _, _, _, err := s.Open(ctx, a); !errors.Is(err, tenancy.ErrUnknownTenant) {
		t.Errorf("open deleted: %v", err)
	}
	if _, err := s.Add(ctx, a, ""); !errors.Is(err, tenancy.ErrTenantDeleted) {
		t.Errorf("add deleted: %v", err)
	}
	// The registry continues after the reopen: updates still pass the
	// version check.
	if err := s.Update(ctx, b, "Globex 2"); err != nil {
		t.Fatal(err)
	}
}

func TestDefinitionsShared(t *testing.T) {
	ctx := context.Background()
	project, _ := eventstore.New(memory.New(), nil)
	defer project.Close()
	defs := eventstore.NewProjector(project, nil)
	s, err := tenancy.New(ctx, tenancy.Options{
		Registry:    memory.New(),
		Open:        func(context.Context, string) (storage.Storage, error) { return memory.New(), nil },
		Definitions: defs,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := eventstore.Definition{Name: "n", Feed: "order", Aggregated: true, Handlers: []eventstore.Handler{{EventType: "Placed",
		Functions: []eventstore.Function{{Name: "inc", TargetSelector: "$.projection.count"}}}}}
	if err := defs.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	_, _ = s.Add(ctx, a, "")
	_, p, release, err := s.Open(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if _, err := p.Definition(ctx, "n"); err != nil {
		t.Errorf("definition made before the tenant opened: %v", err)
	}
	if err := defs.Delete(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	if err := s.DefinitionChanged(ctx, "n", false); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Definition(ctx, "n"); !errors.Is(err, eventstore.ErrNotFound) {
		t.Errorf("deleted definition: %v", err)
	}
}

// Two Sets on one registry, as two servers on one database: each sees the
// other's additions at once and its deletions within a second.
func TestSharedRegistry(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	project, _ := eventstore.New(memory.New(), nil)
	defer project.Close()
	defs := eventstore.NewProjector(project, nil)
	open := func() *tenancy.Set { return sqliteSet(t, dir, defs) }
	s1, s2 := open(), open()
	if created, err := s1.Add(ctx, a, ""); !created || err != nil {
		t.Fatal(created, err)
	}
	if created, err := s2.Add(ctx, a, ""); created || err != nil {
		t.Errorf("the second set adds the same tenant again: %v %v", created, err)
	}
	if created, err := s2.Add(ctx, b, ""); !created || err != nil {
		t.Fatal(created, err)
	}
	st, _, release, err := s2.Open(ctx, a)
	if err != nil {
		t.Fatalf("the second set opens the first's tenant: %v", err)
	}
	release()
	_ = st
	ts1, _ := s1.List(ctx)
	ts2, _ := s2.List(ctx)
	if len(ts1) != 2 || len(ts2) != 2 || ts1[0].Number != ts2[0].Number || ts1[1].Number != ts2[1].Number || ts1[0].Number >= ts1[1].Number {
		t.Errorf("lists differ: %+v %+v", ts1, ts2)
	}
	if err := s1.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	if _, _, _, err := s2.Open(ctx, a); !errors.Is(err, tenancy.ErrUnknownTenant) {
		t.Errorf("the second set still opens the deleted tenant: %v", err)
	}
}

// TestEachOpenAndDeleted: EachOpen visits the open tenants only and opens
// none; Options.Deleted hears of every deletion.
func TestEachOpenAndDeleted(t *testing.T) {
	ctx := context.Background()
	project, err := eventstore.New(memory.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer project.Close()
	opened := 0
	var deleted []string
	s, err := tenancy.New(ctx, tenancy.Options{
		Registry:    memory.New(),
		Open:        func(context.Context, string) (storage.Storage, error) { opened++; return memory.New(), nil },
		Definitions: eventstore.NewProjector(project, nil),
		Deleted:     func(id string) { deleted = append(deleted, id) },
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
	visited := func() []string {
		var ids []string
		s.EachOpen(func(id string, p *eventstore.Projector) {
			if p == nil {
				t.Error("nil Projector")
			}
			ids = append(ids, id)
		})
		return ids
	}
	if ids := visited(); len(ids) != 0 || opened != 0 {
		t.Fatalf("before any Open: visited %v, opened %d", ids, opened)
	}
	_, _, release, err := s.Open(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if ids := visited(); len(ids) != 1 || ids[0] != b || opened != 1 {
		t.Fatalf("after opening b: visited %v, opened %d", ids, opened)
	}
	if err := s.Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	if ids := visited(); len(ids) != 0 {
		t.Errorf("after deleting b: visited %v", ids)
	}
	if len(deleted) != 1 || deleted[0] != b {
		t.Errorf("Deleted heard %v, want [%s]", deleted, b)
	}
}

// TestDefinitionsFromElsewhere: a change of the project's definitions made
// through another process (here another Set on the same files, as servers
// on one database are) reaches the tenants this Set has open and the other
// has not: a new definition, a replacement and a deletion, each within a
// few seconds.
func TestDefinitionsFromElsewhere(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() (*tenancy.Set, *eventstore.Projector) {
		projectStorage, err := sqlite.Open(filepath.Join(dir, "project.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		project, err := eventstore.New(projectStorage, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = project.Close() })
		defs := eventstore.NewProjector(project, nil)
		s := sqliteSet(t, dir, defs)
		return s, defs
	}
	s1, defs1 := open()
	s2, _ := open()
	if _, err := s1.Add(ctx, a, ""); err != nil {
		t.Fatal(err)
	}
	st, p, release, err := s2.Open(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	for i := range 2 {
		if _, err := st.Save(ctx, "order", fmt.Sprint("o-", i), []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Placed", Data: []byte(`{"amount":5}`)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	change := func(def string) {
		t.Helper()
		if def == "" {
			if err := defs1.Delete(ctx, "n"); err != nil {
				t.Fatal(err)
			}
		} else {
			var d eventstore.Definition
			err := json.Unmarshal([]byte(def), &d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := defs1.Put(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		// What a server does after a change: s1 has no tenant open.
		if err := s1.DefinitionChanged(ctx, "n", false); err != nil {
			t.Fatal(err)
		}
	}
	await := func(what string, check func() error) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := check()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	aggregated := func(want string) func() error {
		return func() error {
			pr, err := p.Aggregated(ctx, "n")
			if err != nil {
				return err
			}
			if !strings.Contains(string(pr.Data), want) {
				return fmt.Errorf("data %s, want %s in it", pr.Data, want)
			}
			return nil
		}
	}
	change(`{"projectionName":"n","feedName":"order","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`)
	await("the new definition", aggregated(`"count":"2"`))
	change(`{"projectionName":"n","feedName":"order","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"add","targetSelector":"$.projection.total","eventSelector":"$.event.amount"}]}]}`)
	await("the replaced definition", aggregated(`"total":"10"`))
	change("")
	await("the deletion", func() error {
		if _, err := p.Definition(ctx, "n"); !errors.Is(err, eventstore.ErrNotFound) {
			return fmt.Errorf("Definition: %v, want ErrNotFound", err)
		}
		return nil
	})
}

// sqliteSet opens a Set whose registry and tenants are SQLite files in
// dir, with defs' definitions, closed at the end of the test. Two of them
// on one dir are as two servers on one database.
func sqliteSet(t *testing.T, dir string, defs *eventstore.Projector) *tenancy.Set {
	t.Helper()
	reg, err := sqlite.Open(filepath.Join(dir, "registry.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tenancy.New(context.Background(), tenancy.Options{
		Registry: reg,
		Open: func(_ context.Context, id string) (storage.Storage, error) {
			return sqlite.Open(filepath.Join(dir, id+".db"), nil)
		},
		Definitions: defs,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
