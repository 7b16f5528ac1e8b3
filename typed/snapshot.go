package typed

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/eventkit-go/eventstore"
)

// fromSnapshot starts agg from the aggregate's snapshot, when it has one
// of r's StateVersion that decodes; else it leaves agg as it is (the
// version 0 of the zero state), logging why when that is not simply the
// absence of a snapshot.
func (r *Repository[S]) fromSnapshot(ctx context.Context, agg *Aggregate[S]) {
	snap, err := r.st.st.LoadSnapshot(ctx, r.aggregateType, agg.ID)
	switch {
	case errors.Is(err, eventstore.ErrNotFound):
		return
	case err != nil:
		r.log.Warn("typed: reading a snapshot failed; folding every event", "aggregateType", r.aggregateType, "aggregateId", agg.ID, "err", err)
		return
	case snap.StateVersion != r.stateVersion:
		r.log.Debug("typed: ignoring a snapshot of another state version", "aggregateType", r.aggregateType, "aggregateId", agg.ID,
			"stateVersion", snap.StateVersion, "want", r.stateVersion, "version", snap.Version)
		return
	}
	var state S
	if err := r.codec.Unmarshal(snap.Data, &state); err != nil {
		r.log.Warn("typed: a snapshot does not decode; folding every event", "aggregateType", r.aggregateType, "aggregateId", agg.ID,
			"version", snap.Version, "err", err)
		return
	}
	agg.State, agg.Version, agg.snapshot = state, snap.Version, snap.Version
}

// takeSnapshot loads the aggregate id and saves a snapshot of it when it
// is SnapshotEvery versions past the snapshot it was loaded from,
// logging a failure.
func (r *Repository[S]) takeSnapshot(ctx context.Context, id string) {
	agg, err := r.Load(ctx, id)
	if err == nil && agg.Version-agg.snapshot < int64(r.every) {
		return // another process took one meanwhile
	}
	if err == nil {
		err = r.SaveSnapshot(ctx, agg)
	}
	if err != nil {
		r.log.Warn("typed: taking a snapshot failed; the save stands", "aggregateType", r.aggregateType, "aggregateId", id, "err", err)
	}
}

// SaveSnapshot saves a snapshot of agg's state at agg.Version now, with
// snapshots on or off (SnapshotEvery 0 leaves when to the caller; Load
// reads snapshots only with SnapshotEvery > 0). The store keeps the
// snapshot of the highest version: one older than the stored one is
// ignored. It fails with a *CodecError when the state does not encode, and
// with the store's errors: eventstore.ErrConflict when the aggregate is
// not at agg.Version yet (or has no events).
func (r *Repository[S]) SaveSnapshot(ctx context.Context, agg Aggregate[S]) error {
	data, err := r.codec.Marshal(agg.State)
	if err != nil {
		return &CodecError{Op: "encode", GoType: fmt.Sprintf("%s (the state of %s/%s)", reflect.TypeFor[S](), r.aggregateType, agg.ID), Err: err}
	}
	return r.st.st.SaveSnapshot(ctx, eventstore.Snapshot{
		AggregateType: r.aggregateType, AggregateID: agg.ID,
		Version: agg.Version, StateVersion: r.stateVersion, Data: data,
	})
}
