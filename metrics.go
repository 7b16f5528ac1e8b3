package eventstore

import (
	"context"
	"errors"

	"github.com/eventkit-go/eventstore/storage"
)

// Metrics receives a Store's figures (Options.Metrics), from many
// goroutines on the save and apply paths: be safe for concurrent use and
// quick.
type Metrics interface {
	Saved(events int) // one batch stored (a duplicate is not)
	Conflict()        // a save refused with ErrConflict
	// StorageError reports a storage call, op its method (such as
	// "Append"), failed for a reason other than the caller's.
	StorageError(op string)
	Projected(projection string, events, failed int) // a projection commit; failed of events were errors
}

// metrics returns the Store's Metrics, or nil.
func (s *Store) metrics() Metrics {
	if m, ok := s.storage.(*meteredStorage); ok {
		return m.m
	}
	if m, ok := s.storage.(*meteredWatcher); ok {
		return m.m
	}
	return nil
}

// projected reports a projector commit to the Store's Metrics, if any.
func (p *Projector) projected(name string, events, failed int) {
	if m := p.store.metrics(); m != nil {
		m.Projected(name, events, failed)
	}
}

// meter wraps s so that every call is reported to m. The wrapper keeps
// the optional AppendWatcher.
func meter(s storage.Storage, m Metrics) storage.Storage {
	if m == nil {
		return s
	}
	ms := &meteredStorage{s: s, m: m}
	if w, ok := s.(storage.AppendWatcher); ok {
		return &meteredWatcher{meteredStorage: ms, w: w}
	}
	return ms
}

// meteredWatcher is a meteredStorage whose Storage is an AppendWatcher.
type meteredWatcher struct {
	*meteredStorage
	w storage.AppendWatcher
}

// WatchAppends implements AppendWatcher.
func (m *meteredWatcher) WatchAppends(ctx context.Context, notify func()) error {
	return m.fail("WatchAppends", m.w.WatchAppends(ctx, notify))
}

// meteredStorage reports the calls of a Storage to a Metrics.
type meteredStorage struct {
	s storage.Storage
	m Metrics
}

// fail reports err, unless it is the caller's, and returns it.
func (m *meteredStorage) fail(op string, err error) error {
	switch {
	case err == nil, errors.Is(err, ErrNotFound), errors.Is(err, ErrConflict), errors.Is(err, ErrInvalid),
		errors.Is(err, ErrClosed), errors.Is(err, context.Canceled):
	default:
		m.m.StorageError(op)
	}
	return err
}

func (m *meteredStorage) appended(r storage.AppendResult, events int) {
	if !r.Duplicate {
		m.m.Saved(events)
	}
}

func (m *meteredStorage) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	r, err := m.s.Append(ctx, req)
	switch {
	case err == nil:
		m.appended(r, len(req.Events))
	case errors.Is(err, ErrConflict):
		m.m.Conflict()
	}
	return r, m.fail("Append", err)
}

func (m *meteredStorage) AppendAll(ctx context.Context, reqs []storage.AppendRequest) ([]storage.AppendResult, error) {
	rs, err := m.s.AppendAll(ctx, reqs)
	switch {
	case err == nil:
		for i, r := range rs {
			if i < len(reqs) {
				m.appended(r, len(reqs[i].Events))
			}
		}
	case errors.Is(err, ErrConflict):
		m.m.Conflict()
	}
	return rs, m.fail("AppendAll", err)
}

func (m *meteredStorage) Load(ctx context.Context, q storage.LoadQuery) (Aggregate, error) {
	a, err := m.s.Load(ctx, q)
	return a, m.fail("Load", err)
}

func (m *meteredStorage) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	p, err := m.s.ReadFeed(ctx, q)
	return p, m.fail("ReadFeed", err)
}

func (m *meteredStorage) FeedHead(ctx context.Context, aggregateType string) (int64, error) {
	h, err := m.s.FeedHead(ctx, aggregateType)
	return h, m.fail("FeedHead", err)
}

func (m *meteredStorage) Feeds(ctx context.Context) ([]FeedInfo, error) {
	f, err := m.s.Feeds(ctx)
	return f, m.fail("Feeds", err)
}

func (m *meteredStorage) DeleteAggregate(ctx context.Context, aggregateType, aggregateID string) error {
	return m.fail("DeleteAggregate", m.s.DeleteAggregate(ctx, aggregateType, aggregateID))
}

func (m *meteredStorage) DeleteAggregateType(ctx context.Context, aggregateType string) error {
	return m.fail("DeleteAggregateType", m.s.DeleteAggregateType(ctx, aggregateType))
}

func (m *meteredStorage) SaveSnapshot(ctx context.Context, snap storage.Snapshot) error {
	return m.fail("SaveSnapshot", m.s.SaveSnapshot(ctx, snap))
}

func (m *meteredStorage) LoadSnapshot(ctx context.Context, aggregateType, aggregateID string) (storage.Snapshot, error) {
	snap, err := m.s.LoadSnapshot(ctx, aggregateType, aggregateID)
	return snap, m.fail("LoadSnapshot", err)
}

func (m *meteredStorage) CreateDefinition(ctx context.Context, def storage.DefinitionRecord) error {
	return m.fail("CreateDefinition", m.s.CreateDefinition(ctx, def))
}

func (m *meteredStorage) Definition(ctx context.Context, name string) (storage.DefinitionRecord, error) {
	d, err := m.s.Definition(ctx, name)
	return d, m.fail("Definition", err)
}

func (m *meteredStorage) Definitions(ctx context.Context) ([]storage.DefinitionRecord, error) {
	d, err := m.s.Definitions(ctx)
	return d, m.fail("Definitions", err)
}

func (m *meteredStorage) DeleteDefinition(ctx context.Context, name string) error {
	return m.fail("DeleteDefinition", m.s.DeleteDefinition(ctx, name))
}

func (m *meteredStorage) ResetProjection(ctx context.Context, name string) error {
	return m.fail("ResetProjection", m.s.ResetProjection(ctx, name))
}

func (m *meteredStorage) RenameProjection(ctx context.Context, from, to string) error {
	return m.fail("RenameProjection", m.s.RenameProjection(ctx, from, to))
}

func (m *meteredStorage) UpdateSpec(ctx context.Context, name string, old, spec []byte) error {
	return m.fail("UpdateSpec", m.s.UpdateSpec(ctx, name, old, spec))
}

func (m *meteredStorage) LoadProjection(ctx context.Context, name, instanceID string) (storage.ProjectionState, error) {
	p, err := m.s.LoadProjection(ctx, name, instanceID)
	return p, m.fail("LoadProjection", err)
}

func (m *meteredStorage) LoadProjections(ctx context.Context, name string, ids []string) ([]storage.ProjectionState, error) {
	p, err := m.s.LoadProjections(ctx, name, ids)
	return p, m.fail("LoadProjections", err)
}

func (m *meteredStorage) ListProjections(ctx context.Context, q storage.ProjectionQuery) (storage.ProjectionList, error) {
	l, err := m.s.ListProjections(ctx, q)
	return l, m.fail("ListProjections", err)
}

func (m *meteredStorage) ListAggregates(ctx context.Context, q storage.AggregateQuery) (storage.AggregateList, error) {
	l, err := m.s.ListAggregates(ctx, q)
	return l, m.fail("ListAggregates", err)
}

func (m *meteredStorage) CommitProjection(ctx context.Context, c storage.ProjectionCommit) error {
	return m.fail("CommitProjection", m.s.CommitProjection(ctx, c))
}

func (m *meteredStorage) Close() error {
	return m.s.Close()
}

func (o *Options) metrics() Metrics {
	if o == nil {
		return nil
	}
	return o.Metrics
}

// isRunning reports whether Run is running for p, in some goroutine
// (hooks.ProjectorRunning).
func (p *Projector) isRunning() bool {
	return p.running.Load() > 0
}
