package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/safetext"
)

// CreateDefinition implements eventstore.Storage.
func (s *Storage) CreateDefinition(ctx context.Context, def eventstore.DefinitionRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	if _, ok := s.defs[def.Name]; ok {
		return fmt.Errorf("projection %q exists: %w", def.Name, eventstore.ErrConflict)
	}
	def.Spec = slices.Clone(def.Spec)
	def.Checkpoint = 0
	def.Errors = nil
	s.defs[def.Name] = &definition{rec: def}
	return nil
}

// Definition implements eventstore.Storage.
func (s *Storage) Definition(ctx context.Context, name string) (eventstore.DefinitionRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return eventstore.DefinitionRecord{}, err
	}
	d, ok := s.defs[name]
	if !ok {
		return eventstore.DefinitionRecord{}, fmt.Errorf("projection %q: %w", name, eventstore.ErrNotFound)
	}
	return d.record(), nil
}

func (d *definition) record() eventstore.DefinitionRecord {
	rec := d.rec
	rec.Spec = slices.Clone(rec.Spec)
	rec.Errors = slices.Clone(d.errors)
	return rec
}

// Definitions implements eventstore.Storage.
func (s *Storage) Definitions(ctx context.Context) ([]eventstore.DefinitionRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	out := make([]eventstore.DefinitionRecord, 0, len(s.defs))
	for _, d := range s.defs {
		out = append(out, d.record())
	}
	slices.SortFunc(out, func(a, b eventstore.DefinitionRecord) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// LoadProjection implements eventstore.Storage.
func (s *Storage) LoadProjection(ctx context.Context, name, instanceID string) (eventstore.ProjectionState, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return eventstore.ProjectionState{}, err
	}
	st, ok := s.states[stateKey{name, instanceID}]
	if !ok {
		return eventstore.ProjectionState{}, fmt.Errorf("projection %q instance %q: %w", name, instanceID, eventstore.ErrNotFound)
	}
	st.Data = slices.Clone(st.Data)
	return st, nil
}

// CommitProjection implements eventstore.Storage.
func (s *Storage) CommitProjection(ctx context.Context, c eventstore.ProjectionCommit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	d, ok := s.defs[c.Name]
	if !ok {
		return fmt.Errorf("projection %q: %w", c.Name, eventstore.ErrNotFound)
	}
	if d.rec.Checkpoint != c.From {
		return fmt.Errorf("projection %q checkpoint is %d, not %d: %w", c.Name, d.rec.Checkpoint, c.From, eventstore.ErrConflict)
	}
	for _, st := range c.States {
		st.Name = c.Name
		st.Data = slices.Clone(st.Data)
		s.states[stateKey{c.Name, st.InstanceID}] = st
	}
	for _, e := range c.Errors {
		e.EventID, e.EventType, e.InstanceID, e.Message = safetext.Clean(e.EventID), safetext.Clean(e.EventType), safetext.Clean(e.InstanceID), safetext.Clean(e.Message)
		d.errors = append(d.errors, e)
	}
	if over := len(d.errors) - eventstore.MaxRecordedErrors; over > 0 {
		d.errors = slices.Delete(d.errors, 0, over)
	}
	d.rec.Checkpoint = c.To
	return nil
}
