// Package memory is an in-memory eventstore.Storage for tests, examples and
// embedding. Nothing survives the process. It is safe for concurrent use.
package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/eventkit-go/eventstore"
	"github.com/google/uuid"
)

// Storage is the in-memory backend. The zero value is not usable; call New.
type Storage struct {
	mu     sync.RWMutex
	closed bool

	aggs    map[aggKey]int32 // index into aggList
	aggList []*aggregate
	log     []ref              // global feed; log[p-1] holds position p
	byType  map[string][]int64 // positions of each aggregate type, ascending

	defs   map[string]*definition
	states map[stateKey]eventstore.ProjectionState
}

var _ eventstore.Storage = (*Storage)(nil)

type aggKey struct{ typ, id string }

type aggregate struct {
	events []eventstore.Event
	ids    map[uuid.UUID]int32 // event id -> index in events
}

// ref locates a feed event without pointers, so the garbage collector need
// not scan the feed.
type ref struct {
	agg, idx int32
}

type definition struct {
	rec    eventstore.DefinitionRecord
	errors []eventstore.ProjectionError
}

type stateKey struct{ name, instance string }

// New returns an empty in-memory Storage.
func New() *Storage {
	return &Storage{
		aggs:   make(map[aggKey]int32),
		byType: make(map[string][]int64),
		defs:   make(map[string]*definition),
		states: make(map[stateKey]eventstore.ProjectionState),
	}
}

func (s *Storage) check(ctx context.Context) error {
	if s.closed {
		return eventstore.ErrClosed
	}
	return ctx.Err()
}

// Append implements eventstore.Storage.
func (s *Storage) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return eventstore.AppendResult{}, err
	}
	var small [8]uuid.UUID
	ids := small[:0]
	if len(req.Events) > len(small) {
		ids = make([]uuid.UUID, 0, len(req.Events))
	}
	ids = ids[:len(req.Events)]
	for i, e := range req.Events {
		id, err := uuid.Parse(e.ID)
		if err != nil {
			return eventstore.AppendResult{}, fmt.Errorf("event id %q: %w", e.ID, eventstore.ErrInvalid)
		}
		ids[i] = id
	}
	key := aggKey{req.AggregateType, req.AggregateID}
	ai, ok := s.aggs[key]
	var agg *aggregate
	var current int64
	var stored []eventstore.Event
	if ok {
		agg = s.aggList[ai]
		current = agg.events[len(agg.events)-1].Version
		for _, id := range ids {
			if i, ok := agg.ids[id]; ok {
				stored = append(stored, agg.events[i])
			}
		}
	}
	if res, done, err := eventstore.PlanAppend(req, current, stored); done || err != nil {
		return res, err
	}
	if agg == nil {
		agg = &aggregate{ids: make(map[uuid.UUID]int32, len(req.Events))}
		ai = int32(len(s.aggList))
		s.aggList = append(s.aggList, agg)
		s.aggs[key] = ai
	}
	version := current + 1
	positions := s.byType[req.AggregateType]
	for i, e := range req.Events {
		e.Version = version
		e.Sequence = int64(len(agg.events)) + 1
		e.Position = int64(len(s.log)) + 1
		agg.ids[ids[i]] = int32(len(agg.events))
		s.log = append(s.log, ref{ai, int32(len(agg.events))})
		agg.events = append(agg.events, e)
		positions = append(positions, e.Position)
	}
	s.byType[req.AggregateType] = positions
	return eventstore.AppendResult{Version: version, Position: int64(len(s.log))}, nil
}

// Load implements eventstore.Storage.
func (s *Storage) Load(ctx context.Context, aggregateType, aggregateID string) (eventstore.Aggregate, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return eventstore.Aggregate{}, err
	}
	ai, ok := s.aggs[aggKey{aggregateType, aggregateID}]
	if !ok {
		return eventstore.Aggregate{}, fmt.Errorf("aggregate %s/%s: %w", aggregateType, aggregateID, eventstore.ErrNotFound)
	}
	events := copyEvents(s.aggList[ai].events)
	return eventstore.Aggregate{
		Type:    aggregateType,
		ID:      aggregateID,
		Version: events[len(events)-1].Version,
		Events:  events,
	}, nil
}

// copyEvents copies events and their data, with one allocation for all data.
func copyEvents(src []eventstore.Event) []eventstore.Event {
	return ownData(slices.Clone(src))
}

// ownData replaces the Data of out by copies, with one allocation for all.
func ownData(out []eventstore.Event) []eventstore.Event {
	n := 0
	for i := range out {
		n += len(out[i].Data)
	}
	buf := make([]byte, 0, n)
	for i := range out {
		if d := out[i].Data; d != nil {
			start := len(buf)
			buf = append(buf, d...)
			out[i].Data = buf[start:len(buf):len(buf)]
		}
	}
	return out
}

// ReadFeed implements eventstore.Storage. Positions are assigned under the
// write lock, so every position up to the last one is always visible.
func (s *Storage) ReadFeed(ctx context.Context, q eventstore.FeedQuery) (eventstore.FeedPage, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return eventstore.FeedPage{}, err
	}
	limit := max(q.Limit, 1)
	head := int64(len(s.log))
	after := max(q.After, 0)
	page := eventstore.FeedPage{Head: max(after, head)}
	if q.AggregateType == "" {
		end := min(head, after+int64(limit))
		if after < end {
			page.Events = make([]eventstore.Event, 0, end-after)
			for p := after + 1; p <= end; p++ {
				page.Events = append(page.Events, s.at(p))
			}
			page.Head = end
		}
	} else {
		positions := s.byType[q.AggregateType]
		i := sort.Search(len(positions), func(i int) bool { return positions[i] > after })
		j := min(len(positions), i+limit)
		if i < j {
			page.Events = make([]eventstore.Event, 0, j-i)
			for _, p := range positions[i:j] {
				page.Events = append(page.Events, s.at(p))
			}
			if j < len(positions) {
				page.Head = positions[j-1]
			}
		}
	}
	page.Events = ownData(page.Events)
	return page, nil
}

func (s *Storage) at(p int64) eventstore.Event {
	r := s.log[p-1]
	return s.aggList[r.agg].events[r.idx]
}

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
	slices.SortFunc(out, func(a, b eventstore.DefinitionRecord) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
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
	d.errors = append(d.errors, c.Errors...)
	if over := len(d.errors) - eventstore.MaxRecordedErrors; over > 0 {
		d.errors = slices.Delete(d.errors, 0, over)
	}
	d.rec.Checkpoint = c.To
	return nil
}

// Close implements eventstore.Storage. The data is dropped.
func (s *Storage) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.aggs, s.aggList, s.log, s.byType, s.defs, s.states = nil, nil, nil, nil, nil, nil
	return nil
}
