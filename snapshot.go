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
// RecordedAt), so that a load can start from it: LoadSnapshot, then
// LoadRange after its Version. The store keeps the one of the highest
// Version per aggregate; Data is the caller's encoding, opaque to the
// store (at most 16 MiB); StateVersion is the caller's version
// of the state's shape, for telling a snapshot of an older shape apart.
type Snapshot = storage.Snapshot

// SaveSnapshot stores snap as the aggregate's snapshot, replacing the
// stored one unless that has a higher Version: an older snapshot is
// ignored (nil error), and one of the same Version replaces it. The
// Store sets snap.RecordedAt. It fails with ErrConflict when the
// aggregate has no events or is not at snap.Version yet, and with a
// *ValidationError for invalid names, a Version below 1, a negative
// StateVersion or more than 16 MiB of Data. Deleting the
// aggregate deletes its snapshot. Snapshots are opt-in: when to take one
// (every N saves, say) and how to encode the state is the caller's
// choice.
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

// LoadSnapshot returns the aggregate's snapshot, or an error wrapping
// ErrNotFound when it has none. The caller checks StateVersion, decodes
// Data, and continues with the events after its Version:
//
//	snap, err := store.LoadSnapshot(ctx, "account", id)
//	// ... decode snap.Data into the state ...
//	agg, _, err := store.LoadRange(ctx, "account", id, snap.Version, 0)
//	// ... apply agg.Events to the state ...
//
// The two reads are not one snapshot of the database: should the
// aggregate be deleted and saved again between them, agg.Version may be
// below snap.Version, and the caller folds the events from the start.
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
