package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// SaveSnapshot implements storage.Storage, in one transaction on the
// write connection: the aggregate's version is read and the snapshot
// written with no other write in between (deletions included).
func (s *store) SaveSnapshot(ctx context.Context, snap storage.Snapshot) error {
	if err := s.check(ctx, "save snapshot"); err != nil {
		return err
	}
	op := fmt.Sprintf("save snapshot of %s/%s", snap.AggregateType, snap.AggregateID)
	return s.fail(ctx, op, s.inTx(ctx, func(tx *txn) error {
		var current, lastSeq int64
		err := tx.QueryRowContext(ctx, versionQuery, snap.AggregateType, snap.AggregateID).Scan(&current, &lastSeq)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if current < snap.Version {
			return fmt.Errorf("snapshot of %s/%s at version %d: the aggregate is at version %d: %w",
				snap.AggregateType, snap.AggregateID, snap.Version, current, storage.ErrConflict)
		}
		// An older snapshot than the stored one changes nothing.
		tx.exec(ctx, `INSERT INTO snapshots (aggregate_type, aggregate_id, version, state_version, data, recorded_at)
			VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (aggregate_type, aggregate_id) DO UPDATE
			SET version = excluded.version, state_version = excluded.state_version, data = excluded.data,
				recorded_at = excluded.recorded_at
			WHERE excluded.version >= snapshots.version`,
			snap.AggregateType, snap.AggregateID, snap.Version, int64(snap.StateVersion), blob(snap.Data),
			snap.RecordedAt.UnixMicro())
		return tx.err
	}))
}

// LoadSnapshot implements storage.Storage.
func (s *store) LoadSnapshot(ctx context.Context, aggregateType, aggregateID string) (storage.Snapshot, error) {
	if err := s.check(ctx, "load snapshot"); err != nil {
		return storage.Snapshot{}, err
	}
	snap := storage.Snapshot{AggregateType: aggregateType, AggregateID: aggregateID}
	var stateVersion, recorded int64
	err := s.readDB.QueryRowContext(ctx, `SELECT version, state_version, data, recorded_at FROM snapshots
		WHERE aggregate_type = ? AND aggregate_id = ?`, aggregateType, aggregateID).
		Scan(&snap.Version, &stateVersion, &snap.Data, &recorded)
	if errors.Is(err, sql.ErrNoRows) {
		return storage.Snapshot{}, fmt.Errorf("snapshot of %s/%s: %w", aggregateType, aggregateID, storage.ErrNotFound)
	}
	if err != nil {
		return storage.Snapshot{}, s.fail(ctx, "load snapshot", err)
	}
	snap.StateVersion, snap.RecordedAt = int(stateVersion), time.UnixMicro(recorded).UTC()
	if snap.Data == nil {
		snap.Data = []byte{}
	}
	return snap, nil
}
