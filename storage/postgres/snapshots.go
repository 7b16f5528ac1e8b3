package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
)

// SaveSnapshot implements storage.Storage with one statement
// (statements.saveSnapshot), which checks the aggregate's version and
// writes the snapshot atomically with respect to deletions.
func (s *store) SaveSnapshot(ctx context.Context, snap storage.Snapshot) error {
	if err := s.check(ctx, "save snapshot"); err != nil {
		return err
	}
	var current *int64
	var written int64
	err := s.queryRow(ctx, s.sql.saveSnapshot, snap.AggregateType, snap.AggregateID, snap.Version,
		int64(snap.StateVersion), nonNil(snap.Data), snap.RecordedAt).Scan(&current, &written)
	if err != nil {
		return s.fail(ctx, "save snapshot", err)
	}
	if current == nil || *current < snap.Version {
		v := int64(0)
		if current != nil {
			v = *current
		}
		return fmt.Errorf("snapshot of %s/%s at version %d: the aggregate is at version %d: %w",
			snap.AggregateType, snap.AggregateID, snap.Version, v, storage.ErrConflict)
	}
	return nil // written, or older than the stored one
}

// LoadSnapshot implements storage.Storage.
func (s *store) LoadSnapshot(ctx context.Context, aggregateType, aggregateID string) (storage.Snapshot, error) {
	if err := s.check(ctx, "load snapshot"); err != nil {
		return storage.Snapshot{}, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	snap := storage.Snapshot{AggregateType: aggregateType, AggregateID: aggregateID}
	var stateVersion int64
	err := s.queryRow(ctx, s.sql.loadSnapshot, aggregateType, aggregateID).
		Scan(&snap.Version, &stateVersion, &snap.Data, &snap.RecordedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return storage.Snapshot{}, fmt.Errorf("snapshot of %s/%s: %w", aggregateType, aggregateID, storage.ErrNotFound)
	}
	if err != nil {
		return storage.Snapshot{}, s.fail(ctx, "load snapshot", err)
	}
	snap.StateVersion, snap.RecordedAt = int(stateVersion), snap.RecordedAt.UTC()
	if snap.Data == nil {
		snap.Data = []byte{}
	}
	return snap, nil
}
