package tenancy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/tenancy"
)

// noState is the state of a projection in Go that counts nothing.
type noState struct{}

func (noState) Apply(*eventstore.Event) error { return nil }
func (noState) MarshalJSON() ([]byte, error)  { return []byte(`{}`), nil }

// TestCodeProjectionsStayInTheProject: a projection in Go registered on
// the project's Projector is not passed on to tenants (their Projectors
// have no code for it), and does not keep tenants from opening; the
// project's JSON definitions still are.
func TestCodeProjectionsStayInTheProject(t *testing.T) {
	ctx := context.Background()
	project, _ := eventstore.New(memory.New(), nil)
	defer project.Close()
	defs := eventstore.NewProjector(project, nil)
	if err := defs.Register(ctx, eventstore.CodeProjection{Name: "inGo", Feed: "order", Version: 1, EventTypes: []string{"Placed"},
		Decode: func([]byte) (eventstore.CodeState, error) { return noState{}, nil }}); err != nil {
		t.Fatal(err)
	}
	d := eventstore.Definition{Name: "json", Feed: "order", Aggregated: true, Handlers: []eventstore.Handler{{EventType: "Placed",
		Functions: []eventstore.Function{{Name: "inc", TargetSelector: "$.projection.count"}}}}}
	if err := defs.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	s, err := tenancy.New(ctx, tenancy.Options{
		Registry:    memory.New(),
		Open:        func(context.Context, string) (storage.Storage, error) { return memory.New(), nil },
		Definitions: defs,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Add(ctx, a, ""); err != nil {
		t.Fatal(err)
	}
	_, p, release, err := s.Open(ctx, a)
	if err != nil {
		t.Fatalf("Open of a tenant of a project with a projection in Go: %v", err)
	}
	defer release()
	if _, err := p.Definition(ctx, "json"); err != nil {
		t.Errorf("the project's definition in the tenant: %v", err)
	}
	if _, err := p.Definition(ctx, "inGo"); !errors.Is(err, eventstore.ErrNotFound) {
		t.Errorf("the projection in Go in the tenant: %v, want ErrNotFound", err)
	}
	if err := s.DefinitionChanged(ctx, "inGo", true); err != nil {
		t.Errorf("DefinitionChanged of a projection in Go: %v", err)
	}
}
