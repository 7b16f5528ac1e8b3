package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
)

// errOwnDeadline is the cause of the contexts of readCtx and Append's
// wait: running out of them is ErrUnavailable, not the caller's deadline.
var errOwnDeadline = errors.New("the database did not answer in time")

// readCtx returns ctx bounded by the Storage's ReadTimeout, and ended when
// the server stops answering (hung).
func (s *store) readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := s.withLive(ctx)
	ctx, cancel := context.WithTimeoutCause(ctx, s.readTimeout, errOwnDeadline)
	return ctx, func() {
		cancel()
		stop()
	}
}

// fail translates an error of the driver into the error Storage returns for
// operation op: context errors as they are, unique violations wrapping
// ErrConflict, data exceptions ErrInvalid, connection trouble ErrUnavailable
// and, after Close, ErrClosed. The driver's error is formatted with %v: only
// the sentinels are part of the API.
func (s *store) fail(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, storage.ErrClosed) || errors.Is(err, storage.ErrNotFound) ||
		errors.Is(err, storage.ErrConflict) || errors.Is(err, storage.ErrInvalid) ||
		errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrFull) {
		return err // already translated
	}
	if s.closed.Load() {
		return fmt.Errorf("postgres: %s: %w", op, storage.ErrClosed)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(context.Cause(ctx), errOwnDeadline) {
			// Our deadline (ReadTimeout, WriteTimeout), not the caller's.
			return fmt.Errorf("postgres: %s: %w: %w", op, errOwnDeadline, storage.ErrUnavailable)
		}
		return ctxErr
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A deadline of our own (WriteTimeout), or of the driver: the
		// database did not answer in time.
		return fmt.Errorf("postgres: %s: %v: %w", op, err, storage.ErrUnavailable)
	}
	if sentinel := classify(err); sentinel != nil {
		return fmt.Errorf("postgres: %s: %v: %w", op, err, sentinel)
	}
	return fmt.Errorf("postgres: %s: %v", op, err)
}

// classify returns the sentinel an error of the driver maps to, or nil.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		code := pgErr.Code
		switch {
		case code == "23505": // unique_violation
			return storage.ErrConflict
		case code == "53100": // disk_full
			return storage.ErrFull
		case strings.HasPrefix(code, "22"): // data_exception
			return storage.ErrInvalid
		case strings.HasPrefix(code, "08"), // connection_exception
			code == "57P01",               // admin_shutdown
			code == "57P02",               // crash_shutdown
			code == "57P03",               // cannot_connect_now
			code == "57014",               // query_canceled (statement_timeout, or cancelled by an admin)
			code == "53300",               // too_many_connections
			code == "40001",               // serialization_failure
			code == "40P01",               // deadlock_detected
			code == "55P03",               // lock_not_available
			code == "25P03",               // idle_in_transaction_session_timeout
			code == "25006",               // read_only_sql_transaction: a standby, or a primary being demoted
			strings.HasPrefix(code, "53"): // insufficient_resources
			return storage.ErrUnavailable
		}
		return nil
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr),
		errors.As(err, &netErr),
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed),
		errors.Is(err, pgconn.ErrConnClosed),
		errors.Is(err, puddle.ErrClosedPool),
		pgconn.SafeToRetry(err),
		pgconn.Timeout(err):
		return storage.ErrUnavailable
	}
	return nil
}
