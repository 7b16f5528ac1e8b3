package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/eventkit-go/eventstore/storage"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// fail translates an error of the driver into the error Storage returns for
// operation op: errors that already wrap a sentinel and context errors as
// they are; ErrClosed after Close; constraint violations ErrConflict; a
// full disk ErrFull; busy, locked, I/O and similar failures ErrUnavailable. The driver's
// error is formatted with %v: only the sentinels are part of the API.
func (s *store) fail(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	for _, sentinel := range []error{storage.ErrClosed, storage.ErrNotFound,
		storage.ErrConflict, storage.ErrInvalid, storage.ErrUnavailable, storage.ErrFull} {
		if errors.Is(err, sentinel) {
			return err // already translated
		}
	}
	if s.closed.Load() {
		return fmt.Errorf("sqlite: %s: %w", op, storage.ErrClosed)
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if sentinel := classify(err); sentinel != nil {
		return fmt.Errorf("sqlite: %s: %v: %w", op, err, sentinel)
	}
	return fmt.Errorf("sqlite: %s: %v", op, err)
}

// classify returns the sentinel an error of the driver maps to, or nil.
func classify(err error) error {
	var e *sqlite.Error
	if errors.As(err, &e) {
		switch e.Code() & 0xff { // primary result code
		case sqlite3.SQLITE_CONSTRAINT:
			return storage.ErrConflict
		case sqlite3.SQLITE_FULL: // the disk is full (ENOSPC) or max_page_count reached
			return storage.ErrFull
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR,
			sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_NOMEM,
			sqlite3.SQLITE_PROTOCOL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_INTERRUPT:
			return storage.ErrUnavailable
		}
		return nil
	}
	if errors.Is(err, sql.ErrConnDone) {
		return storage.ErrUnavailable
	}
	return nil
}

// isConstraint reports whether err is a constraint violation, which a
// savepoint rollback undoes without harming the rest of the transaction.
func isConstraint(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}
