// Package fakestorage is a deliberately simple eventstore.Storage (a slice
// and a mutex) that follows the contract of storage.go, for tests of the
// root package and of httpapi: it can implement AppendWatcher for several
// Stores sharing it, as PostgreSQL does across processes.
package fakestorage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/eventkit-go/eventstore"
)

// Storage is the fake Storage.
type Storage struct {
	mu     sync.Mutex
	log    []eventstore.Event // by position - 1; deleted events have ID ""
	fs     map[string]int64   // latest FeedSequence per type
	defs   map[string]*eventstore.DefinitionRecord
	states map[string]map[string]eventstore.ProjectionState
	closed bool

	onAppend func() // called after every append, outside the lock
}

var _ eventstore.Storage = (*Storage)(nil)

// New returns an empty fake Storage.
func New() *Storage {
	return &Storage{
		fs:     map[string]int64{},
		defs:   map[string]*eventstore.DefinitionRecord{},
		states: map[string]map[string]eventstore.ProjectionState{},
	}
}

func (f *Storage) check(ctx context.Context) error {
	if f.closed {
		return eventstore.ErrClosed
	}
	return ctx.Err()
}

func (f *Storage) events(typ, id string) []eventstore.Event {
	var out []eventstore.Event
	for _, e := range f.log {
		if e.ID != "" && e.AggregateType == typ && e.AggregateID == id {
			out = append(out, e)
		}
	}
	return out
}

// plan checks one request against the stored state (and the batches
// already planned in the same AppendAll).
func (f *Storage) plan(req eventstore.AppendRequest) (eventstore.AppendResult, bool, error) {
	evs := f.events(req.AggregateType, req.AggregateID)
	var current int64
	if len(evs) > 0 {
		current = evs[len(evs)-1].Version
	}
	var stored []eventstore.Event
	for _, e := range evs {
		for _, n := range req.Events {
			if n.ID == e.ID {
				stored = append(stored, e)
			}
		}
	}
	return eventstore.PlanAppend(req, current, stored)
}

func (f *Storage) write(req eventstore.AppendRequest) eventstore.AppendResult {
	evs := f.events(req.AggregateType, req.AggregateID)
	var version, seq int64
	if n := len(evs); n > 0 {
		version, seq = evs[n-1].Version, evs[n-1].Sequence
	}
	f.fs[req.AggregateType]++
	for _, e := range req.Events {
		seq++
		e.Version, e.Sequence = version+1, seq
		e.Position = int64(len(f.log)) + 1
		e.FeedSequence = f.fs[req.AggregateType]
		e.Data = slices.Clone(e.Data)
		f.log = append(f.log, e)
	}
	return eventstore.AppendResult{Version: version + 1, Position: int64(len(f.log))}
}

// Append implements eventstore.Storage.
func (f *Storage) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	res, err := f.AppendAll(ctx, []eventstore.AppendRequest{req})
	if err != nil {
		var be *eventstore.BatchError
		if errors.As(err, &be) {
			return eventstore.AppendResult{}, be.Err
		}
		return eventstore.AppendResult{}, err
	}
	return res[0], nil
}

// AppendAll implements eventstore.Storage.
func (f *Storage) AppendAll(ctx context.Context, reqs []eventstore.AppendRequest) ([]eventstore.AppendResult, error) {
	f.mu.Lock()
	if err := f.check(ctx); err != nil {
		f.mu.Unlock()
		return nil, err
	}
	out := make([]eventstore.AppendResult, len(reqs))
	dup := make([]bool, len(reqs))
	for i, req := range reqs {
		res, done, err := f.plan(req)
		if err != nil {
			f.mu.Unlock()
			return nil, &eventstore.BatchError{Index: i, AggregateType: req.AggregateType, AggregateID: req.AggregateID, Err: err}
		}
		out[i], dup[i] = res, done
	}
	for i, req := range reqs {
		if !dup[i] {
			out[i] = f.write(req)
		}
	}
	notify := f.onAppend
	f.mu.Unlock()
	if notify != nil {
		notify()
	}
	return out, nil
}

// Load implements eventstore.Storage.
func (f *Storage) Load(ctx context.Context, q eventstore.LoadQuery) (eventstore.Aggregate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx); err != nil {
		return eventstore.Aggregate{}, err
	}
	evs := f.events(q.AggregateType, q.AggregateID)
	if len(evs) == 0 {
		return eventstore.Aggregate{}, fmt.Errorf("aggregate: %w", eventstore.ErrNotFound)
	}
	agg := eventstore.Aggregate{Type: q.AggregateType, ID: q.AggregateID, Version: evs[len(evs)-1].Version}
	for _, e := range evs {
		if e.Version > q.AfterVersion && (q.Limit == 0 || e.Version <= q.AfterVersion+q.Limit) {
			agg.Events = append(agg.Events, e)
		}
	}
	return agg, nil
}

// ReadFeed implements eventstore.Storage.
func (f *Storage) ReadFeed(ctx context.Context, q eventstore.FeedQuery) (eventstore.FeedPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx); err != nil {
		return eventstore.FeedPage{}, err
	}
	limit := q.Limit
	page := eventstore.FeedPage{Head: q.After}
	for _, e := range f.log {
		if len(page.Events) == limit {
			return page, nil
		}
		if q.AfterFeedSequence > 0 {
			if e.ID == "" || e.AggregateType != q.AggregateType || e.FeedSequence <= q.AfterFeedSequence {
				continue
			}
		} else if e.Position <= q.After {
			continue
		}
		page.Head = max(page.Head, e.Position)
		if e.ID == "" || (q.AggregateType != "" && e.AggregateType != q.AggregateType) {
			continue
		}
		page.Events = append(page.Events, e)
	}
	return page, nil
}

// FeedHead implements eventstore.Storage.
func (f *Storage) FeedHead(ctx context.Context, typ string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx); err != nil {
		return 0, err
	}
	if typ == "" {
		return int64(len(f.log)), nil
	}
	if f.fs[typ] == 0 {
		return 0, fmt.Errorf("feed %s: %w", typ, eventstore.ErrNotFound)
	}
	return f.fs[typ], nil
}

// Feeds implements eventstore.Storage.
func (f *Storage) Feeds(ctx context.Context) ([]eventstore.FeedInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	byType := map[string]*eventstore.FeedInfo{}
	aggs := map[[2]string]bool{}
	for _, e := range f.log {
		if e.ID == "" {
			continue
		}
		fi := byType[e.AggregateType]
		if fi == nil {
			fi = &eventstore.FeedInfo{AggregateType: e.AggregateType}
			byType[e.AggregateType] = fi
		}
		fi.EventCount++
		if k := [2]string{e.AggregateType, e.AggregateID}; !aggs[k] {
			aggs[k] = true
			fi.AggregateCount++
		}
	}
	seen := map[string]map[int64]bool{}
	for _, e := range f.log {
		if e.ID == "" {
			continue
		}
		if seen[e.AggregateType] == nil {
			seen[e.AggregateType] = map[int64]bool{}
		}
		if !seen[e.AggregateType][e.FeedSequence] {
			seen[e.AggregateType][e.FeedSequence] = true
			byType[e.AggregateType].BatchCount++
		}
	}
	var out []eventstore.FeedInfo
	for _, fi := range byType {
		out = append(out, *fi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AggregateType < out[j].AggregateType })
	return out, nil
}

func (f *Storage) deleteWhere(match func(e eventstore.Event) bool) bool {
	found := false
	for i, e := range f.log {
		if e.ID != "" && match(e) {
			f.log[i] = eventstore.Event{Position: e.Position}
			found = true
		}
	}
	return found
}

// DeleteAggregate implements eventstore.Storage.
func (f *Storage) DeleteAggregate(ctx context.Context, typ, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.deleteWhere(func(e eventstore.Event) bool { return e.AggregateType == typ && e.AggregateID == id }) {
		return fmt.Errorf("aggregate: %w", eventstore.ErrNotFound)
	}
	return nil
}

// DeleteAggregateType implements eventstore.Storage.
func (f *Storage) DeleteAggregateType(ctx context.Context, typ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.deleteWhere(func(e eventstore.Event) bool { return e.AggregateType == typ }) {
		return fmt.Errorf("type: %w", eventstore.ErrNotFound)
	}
	return nil
}

// CreateDefinition implements eventstore.Storage.
func (f *Storage) CreateDefinition(ctx context.Context, d eventstore.DefinitionRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.defs[d.Name] != nil {
		return eventstore.ErrConflict
	}
	f.defs[d.Name] = &d
	return nil
}

// Definition implements eventstore.Storage.
func (f *Storage) Definition(ctx context.Context, name string) (eventstore.DefinitionRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.defs[name]; d != nil {
		return *d, nil
	}
	return eventstore.DefinitionRecord{}, eventstore.ErrNotFound
}

// Definitions implements eventstore.Storage.
func (f *Storage) Definitions(ctx context.Context) ([]eventstore.DefinitionRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []eventstore.DefinitionRecord
	for _, d := range f.defs {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DeleteDefinition implements eventstore.Storage.
func (f *Storage) DeleteDefinition(ctx context.Context, name string) error {
	return errors.ErrUnsupported
}

// ResetProjection implements eventstore.Storage.
func (f *Storage) ResetProjection(ctx context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.defs[name]
	if d == nil {
		return eventstore.ErrNotFound
	}
	d.Checkpoint, d.Errors = 0, nil
	delete(f.states, name)
	return nil
}

// RenameProjection implements eventstore.Storage.
func (f *Storage) RenameProjection(ctx context.Context, from, to string) error {
	return errors.ErrUnsupported
}

// LoadProjection implements eventstore.Storage.
func (f *Storage) LoadProjection(ctx context.Context, name, id string) (eventstore.ProjectionState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.states[name][id]; ok {
		return st, nil
	}
	return eventstore.ProjectionState{}, eventstore.ErrNotFound
}

// LoadProjections implements eventstore.Storage.
func (f *Storage) LoadProjections(ctx context.Context, name string, ids []string) ([]eventstore.ProjectionState, error) {
	return nil, errors.ErrUnsupported
}

// ListProjections implements eventstore.Storage.
func (f *Storage) ListProjections(ctx context.Context, q eventstore.ProjectionQuery) (eventstore.ProjectionList, error) {
	return eventstore.ProjectionList{}, errors.ErrUnsupported
}

// CommitProjection implements eventstore.Storage.
func (f *Storage) CommitProjection(ctx context.Context, c eventstore.ProjectionCommit) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.defs[c.Name]
	if d == nil {
		return eventstore.ErrNotFound
	}
	if d.Checkpoint != c.From {
		return eventstore.ErrConflict
	}
	d.Checkpoint = c.To
	d.Errors = append(d.Errors, c.Errors...)
	if f.states[c.Name] == nil {
		f.states[c.Name] = map[string]eventstore.ProjectionState{}
	}
	for _, st := range c.States {
		f.states[c.Name][st.InstanceID] = st
	}
	for _, id := range c.Deletes {
		delete(f.states[c.Name], id)
	}
	return nil
}

// Close implements eventstore.Storage.
func (f *Storage) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// Watching is a fake Storage that reports every append through
// AppendWatcher. Several Stores may share it through Shared, as processes
// share a database.
type Watching struct {
	*Storage
	mu       sync.Mutex
	watchers map[int]func()
	next     int
	// Failures is how many calls of WatchAppends fail at once before one
	// watches; set it before use.
	Failures int
	calls    int
}

var _ eventstore.AppendWatcher = (*Watching)(nil)

// NewWatching returns an empty Watching storage.
func NewWatching() *Watching {
	w := &Watching{Storage: New(), watchers: map[int]func(){}}
	w.onAppend = w.fire
	return w
}

func (w *Watching) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.watchers {
		n()
	}
}

// WatchAppends implements eventstore.AppendWatcher.
func (w *Watching) WatchAppends(ctx context.Context, notify func()) error {
	w.mu.Lock()
	w.calls++
	if w.calls <= w.Failures {
		w.mu.Unlock()
		return errors.New("watch: connection refused")
	}
	id := w.next
	w.next++
	w.watchers[id] = notify
	w.mu.Unlock()
	<-ctx.Done()
	w.mu.Lock()
	delete(w.watchers, id)
	w.mu.Unlock()
	return nil
}

// Watchers returns how many WatchAppends calls are watching.
func (w *Watching) Watchers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watchers)
}

// Shared is one "process" on a Watching storage: its Close leaves the
// shared storage open.
type Shared struct{ *Watching }

// Close implements eventstore.Storage without closing the shared storage.
func (Shared) Close() error { return nil }
