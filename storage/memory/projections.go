package memory

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/eventkit-go/eventstore/internal/safetext"
	"github.com/eventkit-go/eventstore/storage"
)

// CreateDefinition implements storage.Storage.
func (s *store) CreateDefinition(ctx context.Context, def storage.DefinitionRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	if _, ok := s.defs[def.Name]; ok {
		return fmt.Errorf("projection %q exists: %w", def.Name, storage.ErrConflict)
	}
	def.Spec = slices.Clone(def.Spec)
	def.Checkpoint = 0
	def.Errors = nil
	s.defs[def.Name] = &definition{rec: def, states: make(map[string]storage.ProjectionState)}
	return nil
}

// Definition implements storage.Storage.
func (s *store) Definition(ctx context.Context, name string) (storage.DefinitionRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return storage.DefinitionRecord{}, err
	}
	d, ok := s.defs[name]
	if !ok {
		return storage.DefinitionRecord{}, fmt.Errorf("projection %q: %w", name, storage.ErrNotFound)
	}
	return d.record(), nil
}

func (d *definition) record() storage.DefinitionRecord {
	rec := d.rec
	rec.Spec = slices.Clone(rec.Spec)
	rec.Errors = slices.Clone(d.errors)
	return rec
}

// Definitions implements storage.Storage.
func (s *store) Definitions(ctx context.Context) ([]storage.DefinitionRecord, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	out := make([]storage.DefinitionRecord, 0, len(s.defs))
	for _, d := range s.defs {
		out = append(out, d.record())
	}
	slices.SortFunc(out, func(a, b storage.DefinitionRecord) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteDefinition implements storage.Storage.
func (s *store) DeleteDefinition(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	if _, ok := s.defs[name]; !ok {
		return fmt.Errorf("projection %q: %w", name, storage.ErrNotFound)
	}
	delete(s.defs, name)
	return nil
}

// ResetProjection implements storage.Storage.
func (s *store) ResetProjection(ctx context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	d, ok := s.defs[name]
	if !ok {
		return fmt.Errorf("projection %q: %w", name, storage.ErrNotFound)
	}
	d.rec.Checkpoint = 0
	d.errors = nil
	d.states = make(map[string]storage.ProjectionState)
	return nil
}

// RenameProjection implements storage.Storage. Renaming a projection to
// its own name changes nothing.
func (s *store) RenameProjection(ctx context.Context, from, to string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	d, ok := s.defs[from]
	if !ok {
		return fmt.Errorf("projection %q: %w", from, storage.ErrNotFound)
	}
	delete(s.defs, from)
	d.rec.Name = to
	s.defs[to] = d
	return nil
}

// UpdateSpec implements storage.Storage.
func (s *store) UpdateSpec(ctx context.Context, name string, old, spec []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	d, ok := s.defs[name]
	if !ok {
		return fmt.Errorf("projection %q: %w", name, storage.ErrNotFound)
	}
	if !bytes.Equal(d.rec.Spec, old) {
		return fmt.Errorf("projection %q was replaced: %w", name, storage.ErrConflict)
	}
	d.rec.Spec = slices.Clone(spec)
	return nil
}

// state returns a copy of st, owned by the caller, as an instance of
// projection name.
func state(name string, st storage.ProjectionState) storage.ProjectionState {
	st.Name = name
	st.Data = slices.Clone(st.Data)
	st.SearchText = ""
	return st
}

// LoadProjection implements storage.Storage.
func (s *store) LoadProjection(ctx context.Context, name, instanceID string) (storage.ProjectionState, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return storage.ProjectionState{}, err
	}
	var st storage.ProjectionState
	d, ok := s.defs[name]
	if ok {
		st, ok = d.states[instanceID]
	}
	if !ok {
		return storage.ProjectionState{}, fmt.Errorf("projection %q instance %q: %w", name, instanceID, storage.ErrNotFound)
	}
	return state(name, st), nil
}

// LoadProjections implements storage.Storage. An unknown projection has
// no instances.
func (s *store) LoadProjections(ctx context.Context, name string, ids []string) ([]storage.ProjectionState, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	d, ok := s.defs[name]
	if !ok {
		return nil, nil
	}
	var out []storage.ProjectionState
	for _, id := range ids {
		if st, ok := d.states[id]; ok {
			out = append(out, state(name, st))
		}
	}
	return out, nil
}

// ListProjections implements storage.Storage. It filters and sorts the
// projection's instances per call: O(n log n) in the number of instances,
// or of q.IDs when given; a search scans the indexed text of each.
func (s *store) ListProjections(ctx context.Context, q storage.ProjectionQuery) (storage.ProjectionList, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return storage.ProjectionList{}, err
	}
	d, ok := s.defs[q.Name]
	if !ok {
		return storage.ProjectionList{}, nil
	}
	var matches []storage.ProjectionState // sharing Data with the store
	if len(q.IDs) > 0 {
		seen := make(map[string]bool, len(q.IDs))
		for _, id := range q.IDs {
			if st, ok := d.states[id]; ok && !seen[id] && selected(q, st) {
				seen[id] = true
				matches = append(matches, st)
			}
		}
	} else {
		for _, st := range d.states {
			if selected(q, st) {
				matches = append(matches, st)
			}
		}
	}
	slices.SortFunc(matches, func(a, b storage.ProjectionState) int {
		var c int
		switch q.Sort {
		case storage.SortByReference:
			c = compareRefs(a.Reference, b.Reference)
		case storage.SortByCreatedAt:
			c = a.CreatedAt.Compare(b.CreatedAt)
		case storage.SortByUpdatedAt:
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
	list := storage.ProjectionList{Total: int64(len(matches))}
	if skip := max(q.Skip, 0); skip < len(matches) && q.Limit > 0 {
		page := matches[skip:]
		page = page[:min(len(page), q.Limit)]
		list.States = make([]storage.ProjectionState, len(page))
		for i, st := range page {
			list.States[i] = state(q.Name, st)
		}
	}
	return list, nil
}

// selected reports whether an instance passes the filters of q: its
// reference, and its indexed text (scanned: the search words are checked
// against every instance).
func selected(q storage.ProjectionQuery, st storage.ProjectionState) bool {
	if len(q.Search) > 0 && !storage.SearchMatches(st.SearchText, q.Search) {
		return false
	}
	r := st.Reference
	if k := q.Reference.Kind; k != storage.RefNone {
		if r.Kind != k || compareRefs(r, q.Reference) != 0 {
			return false
		}
	}
	if q.From.Kind != storage.RefNone && (r.Kind != q.From.Kind || compareRefs(r, q.From) < 0) {
		return false
	}
	if q.To.Kind != storage.RefNone && (r.Kind != q.To.Kind || compareRefs(r, q.To) > 0) {
		return false
	}
	return true
}

// compareRefs orders references as lists sort them: numbers by Number,
// then texts by bytes, then none.
func compareRefs(a, b storage.Reference) int {
	if a.Kind != b.Kind {
		return cmp.Compare(refRank(a.Kind), refRank(b.Kind))
	}
	switch a.Kind {
	case storage.RefNumber:
		return cmp.Compare(a.Number, b.Number)
	case storage.RefText:
		return strings.Compare(a.Text, b.Text)
	}
	return 0
}

func refRank(k storage.ReferenceKind) int {
	switch k {
	case storage.RefNumber:
		return 0
	case storage.RefText:
		return 1
	}
	return 2
}

// CommitProjection implements storage.Storage. Error texts are kept as
// valid UTF-8: invalid bytes become U+FFFD.
func (s *store) CommitProjection(ctx context.Context, c storage.ProjectionCommit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	d, ok := s.defs[c.Name]
	if !ok {
		return fmt.Errorf("projection %q: %w", c.Name, storage.ErrNotFound)
	}
	if d.rec.Checkpoint != c.From {
		return fmt.Errorf("projection %q checkpoint is %d, not %d: %w", c.Name, d.rec.Checkpoint, c.From, storage.ErrConflict)
	}
	if c.Spec != nil && !bytes.Equal(d.rec.Spec, c.Spec) {
		return fmt.Errorf("projection %q was replaced: %w", c.Name, storage.ErrConflict)
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
	if over := len(d.errors) - storage.MaxRecordedErrors; over > 0 {
		d.errors = slices.Delete(d.errors, 0, over)
	}
	d.rec.Checkpoint = c.To
	return nil
}
