package eventstore

import (
	"context"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
)

// Snapshot is the state of an aggregate folded from its events up to
// Version (AggregateType, AggregateID, Version, StateVersion, Data,
// RecordedAt). Data is the caller's encoding (at most 16 MiB),
// StateVersion the caller's version of its shape.
type Snapshot = storage.Snapshot

// SaveSnapshot stores snap as the aggregate's snapshot unless the stored
// one has a higher Version (then it does nothing). It fails with
// ErrConflict when the aggregate is not at snap.Version yet. Deleting the
// aggregate deletes its snapshot.
func (s *Store) SaveSnapshot(ctx context.Context, snap Snapshot) error {
	v := validation{op: "save snapshot"}
	checkName(&v, "aggregateType", snap.AggregateType)
	checkName(&v, "aggregateId", snap.AggregateID)
	if snap.Version < 1 {
		v.add("version", "must be at least 1, got %d", snap.Version)
	}
	if snap.StateVersion < 0 {
		v.add("stateVersion", "must not be negative, got %d", snap.StateVersion)
	}
	if len(snap.Data) > limits.MaxSnapshotBytes {
		v.add("data", "must be at most %d bytes, got %d", limits.MaxSnapshotBytes, len(snap.Data))
	}
	if err := v.err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return fmt.Errorf("save snapshot of %s/%s: %w", snap.AggregateType, snap.AggregateID, ErrClosed)
	}
	snap.RecordedAt = s.now().UTC().Truncate(time.Microsecond)
	err := s.storage.SaveSnapshot(ctx, snap)
	s.noteWrite(err)
	if err != nil {
		return fmt.Errorf("save snapshot of %s/%s: %w", snap.AggregateType, snap.AggregateID, err)
	}
	return nil
}

// LoadSnapshot returns the aggregate's snapshot, or ErrNotFound. The
// caller decodes Data and goes on with LoadRange after snap.Version; should
// the aggregate be deleted and saved again in between, the events' version
// is below snap.Version, and the caller folds them from the start.
func (s *Store) LoadSnapshot(ctx context.Context, aggregateType, aggregateID string) (Snapshot, error) {
	v := validation{op: "load snapshot"}
	checkName(&v, "aggregateType", aggregateType)
	checkName(&v, "aggregateId", aggregateID)
	if err := v.err(); err != nil {
		return Snapshot{}, err
	}
	if s.closed.Load() {
		return Snapshot{}, fmt.Errorf("load snapshot of %s/%s: %w", aggregateType, aggregateID, ErrClosed)
	}
	snap, err := s.storage.LoadSnapshot(ctx, aggregateType, aggregateID)
	if err != nil {
		return Snapshot{}, wrapNotFound(fmt.Sprintf("snapshot of %s/%s", aggregateType, aggregateID), err)
	}
	return snap, nil
}
