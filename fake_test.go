package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/eventkit-go/eventstore"
)

// fakeStorage is a deliberately simple Storage (a slice and a mutex) that
// follows the contract of storage.go, for the root package's tests: it can
// return short feed pages (maxPage) so that pages end mid-batch, and
// implement AppendWatcher (see watchingStorage).
type fakeStorage struct {
	mu      sync.Mutex
	log     []eventstore.Event // by position - 1; deleted events have ID ""
	fs      map[string]int64   // latest FeedSequence per type
	defs    map[string]*eventstore.DefinitionRecord
	states  map[string]map[string]eventstore.ProjectionState
	closed  bool
	maxPage int // when > 0, ReadFeed returns at most this many events

	onAppend func() // called after every append, outside the lock
}

var _ eventstore.Storage = (*fakeStorage)(nil)

func newFake() *fakeStorage {
	return &fakeStorage{
		fs:     map[string]int64{},
		defs:   map[string]*eventstore.DefinitionRecord{},
		states: map[string]map[string]eventstore.ProjectionState{},
	}
}

func (f *fakeStorage) check(ctx context.Context) error {
	if f.closed {
		return eventstore.ErrClosed
	}
	return ctx.Err()
}

func (f *fakeStorage) events(typ, id string) []eventstore.Event {
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
func (f *fakeStorage) plan(req eventstore.AppendRequest) (eventstore.AppendResult, bool, error) {
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

func (f *fakeStorage) write(req eventstore.AppendRequest) eventstore.AppendResult {
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

func (f *fakeStorage) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
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

func (f *fakeStorage) AppendAll(ctx context.Context, reqs []eventstore.AppendRequest) ([]eventstore.AppendResult, error) {
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

func (f *fakeStorage) Load(ctx context.Context, q eventstore.LoadQuery) (eventstore.Aggregate, error) {
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

func (f *fakeStorage) ReadFeed(ctx context.Context, q eventstore.FeedQuery) (eventstore.FeedPage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(ctx); err != nil {
		return eventstore.FeedPage{}, err
	}
	limit := q.Limit
	if f.maxPage > 0 {
		limit = min(limit, f.maxPage)
	}
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

func (f *fakeStorage) FeedHead(ctx context.Context, typ string) (int64, error) {
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

func (f *fakeStorage) Feeds(ctx context.Context) ([]eventstore.FeedInfo, error) {
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

func (f *fakeStorage) deleteWhere(match func(e eventstore.Event) bool) bool {
	found := false
	for i, e := range f.log {
		if e.ID != "" && match(e) {
			f.log[i] = eventstore.Event{Position: e.Position}
			found = true
		}
	}
	return found
}

func (f *fakeStorage) DeleteAggregate(ctx context.Context, typ, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.deleteWhere(func(e eventstore.Event) bool { return e.AggregateType == typ && e.AggregateID == id }) {
		return fmt.Errorf("aggregate: %w", eventstore.ErrNotFound)
	}
	return nil
}

func (f *fakeStorage) DeleteAggregateType(ctx context.Context, typ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.deleteWhere(func(e eventstore.Event) bool { return e.AggregateType == typ }) {
		return fmt.Errorf("type: %w", eventstore.ErrNotFound)
	}
	return nil
}

func (f *fakeStorage) CreateDefinition(ctx context.Context, d eventstore.DefinitionRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.defs[d.Name] != nil {
		return eventstore.ErrConflict
	}
	f.defs[d.Name] = &d
	return nil
}

func (f *fakeStorage) Definition(ctx context.Context, name string) (eventstore.DefinitionRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d := f.defs[name]; d != nil {
		return *d, nil
	}
	return eventstore.DefinitionRecord{}, eventstore.ErrNotFound
}

func (f *fakeStorage) Definitions(ctx context.Context) ([]eventstore.DefinitionRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []eventstore.DefinitionRecord
	for _, d := range f.defs {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *fakeStorage) DeleteDefinition(ctx context.Context, name string) error {
	return errors.ErrUnsupported
}

func (f *fakeStorage) ResetProjection(ctx context.Context, name string) error {
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

func (f *fakeStorage) RenameProjection(ctx context.Context, from, to string) error {
	return errors.ErrUnsupported
}

func (f *fakeStorage) LoadProjection(ctx context.Context, name, id string) (eventstore.ProjectionState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.states[name][id]; ok {
		return st, nil
	}
	return eventstore.ProjectionState{}, eventstore.ErrNotFound
}

func (f *fakeStorage) LoadProjections(ctx context.Context, name string, ids []string) ([]eventstore.ProjectionState, error) {
	return nil, errors.ErrUnsupported
}

func (f *fakeStorage) ListProjections(ctx context.Context, q eventstore.ProjectionQuery) (eventstore.ProjectionList, error) {
	return eventstore.ProjectionList{}, errors.ErrUnsupported
}

func (f *fakeStorage) CommitProjection(ctx context.Context, c eventstore.ProjectionCommit) error {
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

func (f *fakeStorage) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	return nil
}

// watchingStorage is a fakeStorage whose appends by "other processes"
// (other fakes sharing it) are reported through AppendWatcher.
type watchingStorage struct {
	*fakeStorage
	mu       sync.Mutex
	watchers map[int]func()
	next     int
	failures int // the first failures calls of WatchAppends fail at once
	calls    int
}

var _ eventstore.AppendWatcher = (*watchingStorage)(nil)

func newWatching() *watchingStorage {
	w := &watchingStorage{fakeStorage: newFake(), watchers: map[int]func(){}}
	w.onAppend = w.fire
	return w
}

func (w *watchingStorage) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.watchers {
		n()
	}
}

func (w *watchingStorage) WatchAppends(ctx context.Context, notify func()) error {
	w.mu.Lock()
	w.calls++
	if w.calls <= w.failures {
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

// sharedView is a second "process" on the same storage: a Storage whose
// Close does not close the shared one.
type sharedView struct{ *watchingStorage }

func (sharedView) Close() error { return nil }
