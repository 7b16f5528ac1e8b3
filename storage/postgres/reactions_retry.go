package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// lockAttempts bounds how many times inTxRetrying starts a transaction
// that gave up a lock (lock_not_available, 55P03) or that the server
// ended to break a deadlock (deadlock_detected, 40P01).
const lockAttempts = 8

// inTxRetrying runs fn in a read-committed transaction, as inTx does, and
// runs it again, after a short pause, when the transaction failed for a
// lock it did not get: fn must do nothing but its statements, which the
// failed attempt rolled back. After lockAttempts the error is returned
// (ErrUnavailable).
func (s *store) inTxRetrying(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	if err := s.check(ctx, op); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.writeTimeout, errOwnDeadline)
	defer cancel()
	var err error
	for attempt := range lockAttempts {
		if err = s.beginFunc(ctx, pgx.TxOptions{}, fn); !lockFailure(err) || attempt == lockAttempts-1 {
			break
		}
		// 1, 2, 4, ... ms: long enough for the holder, a claim or an
		// outcome record, to commit.
		t := time.NewTimer(time.Millisecond << attempt)
		select {
		case <-ctx.Done():
			t.Stop()
			return s.fail(ctx, op, ctx.Err())
		case <-t.C:
		}
	}
	return s.fail(ctx, op, err)
}

// lockFailure reports whether err is PostgreSQL's lock_not_available or
// deadlock_detected.
func lockFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01")
}
