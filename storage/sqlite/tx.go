package sqlite

import (
	"context"
	"database/sql"
)

// txn is a write transaction whose exec calls stop at the first error,
// kept in err, so that a sequence of statements needs one check.
type txn struct {
	*sql.Tx
	err error
}

// exec runs query unless an earlier statement failed.
func (t *txn) exec(ctx context.Context, query string, args ...any) {
	if t.err == nil {
		_, t.err = t.ExecContext(ctx, query, args...)
	}
}

// affected runs query unless an earlier statement failed and returns the
// number of rows it changed.
func (t *txn) affected(ctx context.Context, query string, args ...any) (int64, error) {
	if t.err != nil {
		return 0, t.err
	}
	r, err := t.ExecContext(ctx, query, args...)
	if err != nil {
		t.err = err
		return 0, err
	}
	n, err := r.RowsAffected()
	t.err = err
	return n, err
}

// inTx runs fn in a write transaction on the single write connection,
// which waits for the group commit's transaction in progress, and commits
// when fn returns nil.
func (s *store) inTx(ctx context.Context, fn func(tx *txn) error) error {
	tx, err := s.writeDB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(&txn{Tx: tx}); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		s.abandon(ctx)
		return err
	}
	return nil
}

// abandon rolls back a transaction that a failed COMMIT may have left open
// on the write connection (database/sql forgets it either way), so that the
// next transaction can begin. The write pool has exactly one connection.
func (s *store) abandon(ctx context.Context) {
	_, _ = s.writeDB.ExecContext(ctx, "ROLLBACK") // fails harmlessly when none is open
}
