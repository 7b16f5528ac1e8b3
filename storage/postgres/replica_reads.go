package postgres

import (
	"context"
	"math"

	"github.com/eventkit-go/eventstore/storage"
)

// The Storage methods of replicated: the reads that a replica may serve,
// and the writes, whose positions in the primary's log it tracks
// (replica.go).

// Append implements storage.Storage.
func (w *replicated) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	res, err := w.store.Append(ctx, req)
	if err != nil {
		w.wrote() // an unknown outcome, or a conflict the caller was told of
		return res, err
	}
	w.sawOwn(res.Position)
	return res, nil
}

// AppendAll implements storage.Storage.
func (w *replicated) AppendAll(ctx context.Context, reqs []storage.AppendRequest) ([]storage.AppendResult, error) {
	res, err := w.store.AppendAll(ctx, reqs)
	if err != nil {
		w.wrote()
		return res, err
	}
	for _, r := range res {
		w.sawOwn(r.Position)
	}
	return res, nil
}

func (w *replicated) sawOwn(p int64) {
	for {
		cur := w.ownPos.Load()
		if p <= cur || w.ownPos.CompareAndSwap(cur, p) {
			return
		}
	}
}

// Load implements storage.Storage. A range of versions that the replica
// has none of is read on the primary: the replica may not have them yet.
func (w *replicated) Load(ctx context.Context, q storage.LoadQuery) (storage.Aggregate, error) {
	if r := w.pick(ctx); r != nil {
		agg, err := r.st.Load(ctx, q)
		pastRange := err == nil && len(agg.Events) == 0 && q.AfterVersion > 0 && q.AfterVersion < math.MaxInt64
		if pastRange {
			r.declined.Add(1)
		} else if w.served(r, err) {
			return agg, err
		}
	}
	return w.onPrimary().Load(ctx, q)
}

// ReadFeed implements storage.Storage. A page that ends the feed stands
// when the replica's head reaches the cursor read from (After + 1: the
// Store reads from one before a position it was given; AfterFeedSequence,
// the first position of the batch it was given) and this Storage's last
// append, and the replica has replayed what the primary had at the last
// notification of an append; the replica is waited for once, unless it
// had replayed that far already (a reader at the head, a caught-up
// projector: waiting would not move its head), then the primary read.
func (w *replicated) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	if r := w.pick(ctx); r != nil {
		cursor := q.AfterFeedSequence
		if cursor == 0 && q.After > 0 {
			cursor = q.After + 1
		}
		for try := 0; try < 2; try++ {
			p := &probe{wantHead: true}
			page, err := r.st.ReadFeed(withProbe(ctx, p), q)
			if err != nil {
				if w.served(r, err) {
					return page, err
				}
				break
			}
			if len(page.Events) >= max(q.Limit, 1) || page.Truncated {
				r.reads.Add(1)
				return page, nil // not the end: the reader goes on from it
			}
			need, ok := w.need(ctx, true)
			if !ok {
				break
			}
			if p.lsn >= need && p.head >= max(cursor, w.ownPos.Load()) {
				r.reads.Add(1)
				return page, nil
			}
			r.declined.Add(1)
			if try > 0 || p.lsn >= need || !r.waitFor(ctx, need, w.wait) {
				break
			}
		}
	}
	return w.onPrimary().ReadFeed(ctx, q)
}

// ListAggregates implements storage.Storage.
func (w *replicated) ListAggregates(ctx context.Context, q storage.AggregateQuery) (storage.AggregateList, error) {
	if r := w.pick(ctx); r != nil {
		list, err := r.st.ListAggregates(ctx, q)
		if w.served(r, err) {
			return list, err
		}
	}
	return w.onPrimary().ListAggregates(ctx, q)
}

// LoadSnapshot implements storage.Storage.
func (w *replicated) LoadSnapshot(ctx context.Context, aggregateType, aggregateID string) (storage.Snapshot, error) {
	if r := w.pick(ctx); r != nil {
		snap, err := r.st.LoadSnapshot(ctx, aggregateType, aggregateID)
		if w.served(r, err) {
			return snap, err
		}
	}
	return w.onPrimary().LoadSnapshot(ctx, aggregateType, aggregateID)
}

// LoadProjection implements storage.Storage: on a replica whose
// checkpoint of the projection reaches this Storage's last append.
func (w *replicated) LoadProjection(ctx context.Context, name, instanceID string) (storage.ProjectionState, error) {
	if r := w.pick(ctx); r != nil {
		p := &probe{def: name}
		st, err := r.st.LoadProjection(withProbe(ctx, p), name, instanceID)
		if !w.projected(p, err) {
			r.declined.Add(1)
		} else if w.served(r, err) {
			return st, err
		}
	}
	return w.onPrimary().LoadProjection(ctx, name, instanceID)
}

// ListProjections implements storage.Storage as LoadProjection.
func (w *replicated) ListProjections(ctx context.Context, q storage.ProjectionQuery) (storage.ProjectionList, error) {
	if r := w.pick(ctx); r != nil {
		p := &probe{def: q.Name}
		list, err := r.st.ListProjections(withProbe(ctx, p), q)
		if !w.projected(p, err) {
			r.declined.Add(1)
		} else if w.served(r, err) {
			return list, err
		}
	}
	return w.onPrimary().ListProjections(ctx, q)
}

// projected reports whether a projection read on a replica that answered
// err had the projection's checkpoint at or past this Storage's last
// append.
func (w *replicated) projected(p *probe, err error) bool {
	return err != nil || (p.hasDef && p.checkpoint >= w.ownPos.Load())
}

// The writes other than appends: their position in the log is not
// known, so the next read on a replica asks the primary.

// DeleteAggregate implements storage.Storage.
func (w *replicated) DeleteAggregate(ctx context.Context, aggregateType, aggregateID string) error {
	defer w.wrote()
	return w.store.DeleteAggregate(ctx, aggregateType, aggregateID)
}

// DeleteAggregateType implements storage.Storage.
func (w *replicated) DeleteAggregateType(ctx context.Context, aggregateType string) error {
	defer w.wrote()
	return w.store.DeleteAggregateType(ctx, aggregateType)
}

// SaveSnapshot implements storage.Storage.
func (w *replicated) SaveSnapshot(ctx context.Context, snap storage.Snapshot) error {
	defer w.wrote()
	return w.store.SaveSnapshot(ctx, snap)
}

// CreateDefinition implements storage.Storage.
func (w *replicated) CreateDefinition(ctx context.Context, def storage.DefinitionRecord) error {
	defer w.wrote()
	return w.store.CreateDefinition(ctx, def)
}

// DeleteDefinition implements storage.Storage.
func (w *replicated) DeleteDefinition(ctx context.Context, name string) error {
	defer w.wrote()
	return w.store.DeleteDefinition(ctx, name)
}

// ResetProjection implements storage.Storage.
func (w *replicated) ResetProjection(ctx context.Context, name string) error {
	defer w.wrote()
	return w.store.ResetProjection(ctx, name)
}

// RenameProjection implements storage.Storage.
func (w *replicated) RenameProjection(ctx context.Context, from, to string) error {
	defer w.wrote()
	return w.store.RenameProjection(ctx, from, to)
}

// UpdateSpec implements storage.Storage.
func (w *replicated) UpdateSpec(ctx context.Context, name string, old, spec []byte) error {
	defer w.wrote()
	return w.store.UpdateSpec(ctx, name, old, spec)
}
