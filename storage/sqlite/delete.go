package sqlite

import (
	"context"
	"fmt"

	"github.com/eventkit-go/eventstore/storage"
)

// markPosition keeps the highest position assigned so far in the counters
// table before events are deleted, so that deleting the last events of the
// feed does not make their positions free again.
const markPosition = `INSERT INTO counters (name, value)
	SELECT 'position', coalesce(max(position), 0) FROM events WHERE true
	ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)`

// DeleteAggregate implements storage.Storage, in one transaction on the
// write connection: the type's row in the feeds table is settled, the
// events and the snapshot go, the type's counts go down, its feed sequence
// and the position mark stay.
func (s *store) DeleteAggregate(ctx context.Context, aggregateType, aggregateID string) error {
	if err := s.check(ctx, "delete aggregate"); err != nil {
		return err
	}
	op := fmt.Sprintf("delete aggregate %s/%s", aggregateType, aggregateID)
	return s.fail(ctx, op, s.inTx(ctx, func(tx *txn) error {
		var events, version int64
		err := tx.QueryRowContext(ctx, `SELECT count(*), coalesce(max(version), 0) FROM events
			WHERE aggregate_type = ? AND aggregate_id = ?`, aggregateType, aggregateID).Scan(&events, &version)
		if err != nil {
			return err
		}
		if events == 0 {
			return fmt.Errorf("aggregate %s/%s: %w", aggregateType, aggregateID, storage.ErrNotFound)
		}
		tx.exec(ctx, markPosition)
		tx.exec(ctx, settleFeedQuery, aggregateType)
		tx.exec(ctx, `DELETE FROM events WHERE aggregate_type = ? AND aggregate_id = ?`, aggregateType, aggregateID)
		tx.exec(ctx, `DELETE FROM snapshots WHERE aggregate_type = ? AND aggregate_id = ?`, aggregateType, aggregateID)
		tx.exec(ctx, `UPDATE feeds SET aggregates = aggregates - 1, batches = batches - ?, events = events - ?
			WHERE aggregate_type = ?`, version, events, aggregateType)
		return tx.err
	}))
}

// DeleteAggregateType implements storage.Storage, as DeleteAggregate
// does for every aggregate of the type.
func (s *store) DeleteAggregateType(ctx context.Context, aggregateType string) error {
	if err := s.check(ctx, "delete aggregate type"); err != nil {
		return err
	}
	return s.fail(ctx, "delete aggregate type "+aggregateType, s.inTx(ctx, func(tx *txn) error {
		tx.exec(ctx, markPosition)
		tx.exec(ctx, settleFeedQuery, aggregateType)
		n, err := tx.affected(ctx, `DELETE FROM events WHERE aggregate_type = ?`, aggregateType)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("aggregate type %q: %w", aggregateType, storage.ErrNotFound)
		}
		tx.exec(ctx, `DELETE FROM snapshots WHERE aggregate_type = ?`, aggregateType)
		tx.exec(ctx, `UPDATE feeds SET aggregates = 0, batches = 0, events = 0 WHERE aggregate_type = ?`, aggregateType)
		return tx.err
	}))
}
