package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
)

// DeleteAggregate implements storage.Storage. It takes the append lock,
// which holds new appends back until it commits, and waits for the appends
// in flight (the drain lock), so that no append interleaves with it; it
// raises the deletion marks so that the heads never go down.
func (s *store) DeleteAggregate(ctx context.Context, aggregateType, aggregateID string) error {
	return s.delete(ctx, "delete aggregate", fmt.Sprintf("aggregate %s/%s", aggregateType, aggregateID),
		s.sql.deleteAgg, s.sql.deleteAggSnapshot, aggregateType, aggregateID)
}

// DeleteAggregateType implements storage.Storage, as DeleteAggregate
// does.
func (s *store) DeleteAggregateType(ctx context.Context, aggregateType string) error {
	return s.delete(ctx, "delete aggregate type", "aggregate type "+aggregateType,
		s.sql.deleteType, s.sql.deleteTypeSnapshots, aggregateType)
}

// delete runs a deletion statement, which returns how many events it
// deleted, with appends held back, then the statement deleting the
// snapshots of what it deleted (snapSQL, with the same arguments).
func (s *store) delete(ctx context.Context, op, what, sql, snapSQL string, args ...any) error {
	if err := s.check(ctx, op); err != nil {
		return err
	}
	errNone := errors.New("nothing deleted")
	err := s.beginFunc(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		// The append lock holds new appends back until this commits; the
		// drain lock waits for those in flight (registered, positions
		// reserved, maybe not yet written), so that no append commits a
		// position below the marks this raises.
		for _, key := range []int64{s.appendKey, s.drainKey} { // in this order, as appends take them
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", key); err != nil {
				return err
			}
		}
		var n int64
		if err := tx.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errNone // roll back: nothing to keep
		}
		_, err := tx.Exec(ctx, snapSQL, args...)
		return err
	})
	if errors.Is(err, errNone) {
		return fmt.Errorf("%s: %w", what, storage.ErrNotFound)
	}
	if err != nil {
		return s.fail(ctx, op, err)
	}
	return nil
}
