package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
)

// DeleteAggregate implements storage.Storage. It locks the events table
// against appends (SHARE ROW EXCLUSIVE, which waits for the appends in
// flight and holds new ones back until it commits), so that no append
// interleaves with it, and raises the deletion marks so that the heads
// never go down.
func (s *store) DeleteAggregate(ctx context.Context, aggregateType, aggregateID string) error {
	return s.delete(ctx, "delete aggregate", fmt.Sprintf("aggregate %s/%s", aggregateType, aggregateID),
		s.sql.deleteAgg, aggregateType, aggregateID)
}

// DeleteAggregateType implements storage.Storage, as DeleteAggregate
// does.
func (s *store) DeleteAggregateType(ctx context.Context, aggregateType string) error {
	return s.delete(ctx, "delete aggregate type", "aggregate type "+aggregateType,
		s.sql.deleteType, aggregateType)
}

// delete runs a deletion statement, which returns how many events it
// deleted, with the events table locked against appends.
func (s *store) delete(ctx context.Context, op, what, sql string, args ...any) error {
	if err := s.check(ctx, op); err != nil {
		return err
	}
	errNone := errors.New("nothing deleted")
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "LOCK TABLE "+s.schema+".events IN SHARE ROW EXCLUSIVE MODE"); err != nil {
			return err
		}
		var n int64
		if err := tx.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return errNone // roll back: nothing to keep
		}
		return nil
	})
	if errors.Is(err, errNone) {
		return fmt.Errorf("%s: %w", what, storage.ErrNotFound)
	}
	if err != nil {
		return s.fail(ctx, op, err)
	}
	return nil
}
