package tenancy_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/eventkit-go/eventstore/tenancy"
)

// resetCounter counts the projection resets of each tenant's storage.
type resetCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *resetCounter) count(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

// countingStorage is a tenant's storage that counts its resets.
type countingStorage struct {
	storage.Storage
	id string
	c  *resetCounter
}

func (s countingStorage) ResetProjection(ctx context.Context, name string) error {
	s.c.mu.Lock()
	s.c.n[s.id]++
	s.c.mu.Unlock()
	return s.Storage.ResetProjection(ctx, name)
}

// TestResetReachesEveryTenant: a reset of a project's projection, made
// through one process (here a Set, as servers on one database are),
// resets that projection once in every tenant: one open in another
// process within a few seconds, and one open nowhere when it is next
// opened.
func TestResetReachesEveryTenant(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	resets := &resetCounter{n: map[string]int{}}
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
		reg, err := sqlite.Open(filepath.Join(dir, "registry.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := tenancy.New(ctx, tenancy.Options{
			Registry: reg,
			Open: func(_ context.Context, id string) (storage.Storage, error) {
				st, err := sqlite.Open(filepath.Join(dir, id+".db"), nil)
				if err != nil {
					return nil, err
				}
				return countingStorage{Storage: st, id: id, c: resets}, nil
			},
			Definitions: defs,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s, defs
	}
	s1, defs1 := open()
	if err := defs1.Create(ctx, eventstore.Definition{Name: "n", Feed: "order", Aggregated: true,
		Handlers: []eventstore.Handler{{EventType: "Placed", Functions: []eventstore.Function{{Name: "inc", TargetSelector: "$.projection.count"}}}}}); err != nil {
		t.Fatal(err)
	}
	built := func(s *tenancy.Set, id string, want string) {
		t.Helper()
		st, p, release, err := s.Open(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		if _, err := st.Save(ctx, "order", "o-"+id, []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Placed"}}, nil); err != nil {
			t.Fatal(err)
		}
		pr, err := p.Aggregated(ctx, "n")
		if err != nil || string(pr.Data) != want {
			t.Fatalf("tenant %s: %s, %v; want %s", id, pr.Data, err, want)
		}
	}
	for _, id := range []string{a, b} {
		if _, err := s1.Add(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
	}
	// Tenant b is built in a process that then stops; a stays open in s2.
	sb, _ := open()
	built(sb, b, `{"count":"1"}`)
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	s2, _ := open()
	built(s2, a, `{"count":"1"}`)

	// What a server does for DELETE /projections/single/n without a
	// tenant: reset it in the project, then pass that on.
	if err := defs1.Reset(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	if err := s1.DefinitionChanged(ctx, "n", true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for resets.count(a) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the reset did not reach the tenant open in another process")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(2500 * time.Millisecond) // more rounds of passing definitions on
	if n := resets.count(a); n != 1 {
		t.Errorf("tenant a was reset %d times, want once", n)
	}
	built(s2, a, `{"count":"2"}`)

	if n := resets.count(b); n != 0 {
		t.Fatalf("tenant b, open nowhere, was reset %d times already", n)
	}
	s3, _ := open()
	built(s3, b, `{"count":"2"}`)
	if n := resets.count(b); n != 1 {
		t.Errorf("tenant b was reset %d times when opened after the reset, want once", n)
	}
}
