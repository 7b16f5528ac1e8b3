package memory

import (
	"bytes"
	"cmp"
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
	s.defs[def.Name] = &definition{rec: def, states: make(map[string]eventstore.ProjectionState)}
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

// DeleteDefinition implements eventstore.Storage.
func (s *Storage) DeleteDefinition(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	if _, ok := s.defs[name]; !ok {
		return fmt.Errorf("projection %q: %w", name, eventstore.ErrNotFound)
	}
	delete(s.defs, name)
	return nil
}

// ResetProjection implements eventstore.Storage.
func (s *Storage) ResetProjection(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	d, ok := s.defs[name]
	if !ok {
		return fmt.Errorf("projection %q: %w", name, eventstore.ErrNotFound)
	}
	d.rec.Checkpoint = 0
	d.errors = nil
	d.states = make(map[string]eventstore.ProjectionState)
	return nil
}

// RenameProjection implements eventstore.Storage. Renaming a projection to
// its own name changes nothing.
func (s *Storage) RenameProjection(ctx context.Context, from, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	d, ok := s.defs[from]
	if !ok {
		return fmt.Errorf("projection %q: %w", from, eventstore.ErrNotFound)
	}
	delete(s.defs, from)
	d.rec.Name = to
	s.defs[to] = d
	return nil
}

// state returns a copy of st, owned by the caller, as an instance of
// projection name.
func state(name string, st eventstore.ProjectionState) eventstore.ProjectionState {
	st.Name = name
	st.Data = slices.Clone(st.Data)
	return st
}

// LoadProjection implements eventstore.Storage.
func (s *Storage) LoadProjection(ctx context.Context, name, instanceID string) (eventstore.ProjectionState, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return eventstore.ProjectionState{}, err
	}
	var st eventstore.ProjectionState
	d, ok := s.defs[name]
	if ok {
		st, ok = d.states[instanceID]
	}
	if !ok {
		return eventstore.ProjectionState{}, fmt.Errorf("projection %q instance %q: %w", name, instanceID, eventstore.ErrNotFound)
	}
	return state(name, st), nil
}

// LoadProjections implements eventstore.Storage. An unknown projection has
// no instances.
func (s *Storage) LoadProjections(ctx context.Context, name string, ids []string) ([]eventstore.ProjectionState, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	d, ok := s.defs[name]
	if !ok {
		return nil, nil
	}
	var out []eventstore.ProjectionState
	for _, id := range ids {
		if st, ok := d.states[id]; ok {
			out = append(out, state(name, st))
		}
	}
	return out, nil
}

// ListProjections implements eventstore.Storage. It filters and sorts the
// projection's instances per call: O(n log n) in the number of instances,
// or of q.IDs when given.
func (s *Storage) ListProjections(ctx context.Context, q eventstore.ProjectionQuery) (eventstore.ProjectionList, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return eventstore.ProjectionList{}, err
	}
	d, ok := s.defs[q.Name]
	if !ok {
		return eventstore.ProjectionList{}, nil
	}
	var matches []eventstore.ProjectionState // sharing Data with the store
	if len(q.IDs) > 0 {
		seen := make(map[string]bool, len(q.IDs))
		for _, id := range q.IDs {
			if st, ok := d.states[id]; ok && !seen[id] && selected(q, st.Reference) {
				seen[id] = true
				matches = append(matches, st)
			}
		}
	} else {
		for _, st := range d.states {
			if selected(q, st.Reference) {
				matches = append(matches, st)
			}
		}
	}
	slices.SortFunc(matches, func(a, b eventstore.ProjectionState) int {
		var c int
		switch q.Sort {
		case eventstore.SortByReference:
			c = compareRefs(a.Reference, b.Reference)
		case eventstore.SortByCreatedAt:
			c = a.CreatedAt.Compare(b.CreatedAt)
		case eventstore.SortByUpdatedAt:
			c = a.UpdatedAt.Compare(b.UpdatedAt)
		}
		if c == 0 {
			c = strings.Compare(a.InstanceID, b.InstanceID)
		}
		if q.Descending {
			return -c
		}
		return c
	})
	list := eventstore.ProjectionList{Total: int64(len(matches))}
	if skip := max(q.Skip, 0); skip < len(matches) && q.Limit > 0 {
		page := matches[skip:]
		page = page[:min(len(page), q.Limit)]
		list.States = make([]eventstore.ProjectionState, len(page))
		for i, st := range page {
			list.States[i] = state(q.Name, st)
		}
	}
	return list, nil
}

// selected reports whether a reference passes the filters of q.
func selected(q eventstore.ProjectionQuery, r eventstore.Reference) bool {
	if k := q.Reference.Kind; k != eventstore.RefNone {
		if r.Kind != k || compareRefs(r, q.Reference) != 0 {
			return false
		}
	}
	if q.From.Kind != eventstore.RefNone && (r.Kind != q.From.Kind || compareRefs(r, q.From) < 0) {
		return false
	}
	if q.To.Kind != eventstore.RefNone && (r.Kind != q.To.Kind || compareRefs(r, q.To) > 0) {
		return false
	}
	return true
}

// compareRefs orders references as lists sort them: numbers by Number,
// then texts by bytes, then none.
func compareRefs(a, b eventstore.Reference) int {
	if a.Kind != b.Kind {
		return cmp.Compare(refRank(a.Kind), refRank(b.Kind))
	}
	switch a.Kind {
	case eventstore.RefNumber:
		return cmp.Compare(a.Number, b.Number)
	case eventstore.RefText:
		return strings.Compare(a.Text, b.Text)
	}
	return 0
}

func refRank(k eventstore.ReferenceKind) int {
	switch k {
	case eventstore.RefNumber:
		return 0
	case eventstore.RefText:
		return 1
	}
	return 2
}

// CommitProjection implements eventstore.Storage. Error texts are kept as
// valid UTF-8: invalid bytes become U+FFFD.
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
	if c.Spec != nil && !bytes.Equal(d.rec.Spec, c.Spec) {
		return fmt.Errorf("projection %q was replaced: %w", c.Name, eventstore.ErrConflict)
	}
	for _, st := range c.States {
		st.Data = slices.Clone(st.Data)
		d.states[st.InstanceID] = st
	}
	for _, id := range c.Deletes {
		delete(d.states, id)
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
