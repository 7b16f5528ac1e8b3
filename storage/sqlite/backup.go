package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// Backup writes a consistent copy of the store in the file src into the
// new file dst, while processes go on reading and writing src: SQLite's
// VACUUM INTO reads one snapshot of src (a read transaction, which in
// write-ahead-log mode holds no writer back) and writes it compacted to a
// file beside dst, which is synced and then renamed to dst, so that dst is
// either missing or complete. The copy holds every save committed before
// the snapshot and none after, with the projections' states and
// checkpoints of the same instant, so a Storage opened on it (after moving
// it into place, with no process on the file) serves the same feeds and
// projections as src did then. The copy's record of the processes that had
// src open is cleared (docs/upgrades.md). dst must not exist; src must be
// a store of a schema version this package knows.
func Backup(ctx context.Context, src, dst string) error {
	if src == "" || dst == "" || strings.HasPrefix(src, "//") || strings.HasPrefix(dst, "//") {
		return fmt.Errorf("sqlite: backup %q to %q: give file paths such as events.db: %w", src, dst, storage.ErrInvalid)
	}
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("sqlite: backup %s: %v: %w", src, err, storage.ErrNotFound)
	}
	if _, err := os.Lstat(dst); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sqlite: backup to %s: the file exists (or cannot be checked: %v): %w", dst, err, storage.ErrConflict)
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".partial")
	_ = os.Remove(tmp) // left by a backup that was interrupted
	if err := backupInto(ctx, src, tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("sqlite: backup to %s: %v: %w", dst, err, storage.ErrUnavailable)
	}
	if d, err := os.Open(filepath.Dir(dst)); err == nil {
		_ = d.Sync() // the rename, where the file system needs it
		_ = d.Close()
	}
	return nil
}

// backupInto copies src into the new file tmp, clears the copy's
// processes and syncs it.
func backupInto(ctx context.Context, src, tmp string) error {
	db, err := sql.Open("sqlite", DSN(src, 5*time.Second)) // VACUUM INTO writes nothing to src, but query_only refuses it
	if err != nil {
		return fmt.Errorf("sqlite: backup %s: %v: %w", src, err, storage.ErrUnavailable)
	}
	defer db.Close()
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return fmt.Errorf("sqlite: backup %s: %v: %w", src, err, classifyOr(err, storage.ErrUnavailable))
	}
	if version == 0 || version > len(migrations) {
		return fmt.Errorf("sqlite: backup %s: not a store of a schema version this program knows (%d): %w", src, version, storage.ErrInvalid)
	}
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		return fmt.Errorf("sqlite: backup %s: %v: %w", src, err, classifyOr(err, storage.ErrUnavailable))
	}
	cp, err := sql.Open("sqlite", DSN(tmp, 5*time.Second))
	if err != nil {
		return fmt.Errorf("sqlite: backup to %s: %v: %w", tmp, err, storage.ErrUnavailable)
	}
	defer cp.Close()
	var n int
	if err := cp.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'processes'`).Scan(&n); err != nil {
		return fmt.Errorf("sqlite: backup to %s: %v: %w", tmp, err, classifyOr(err, storage.ErrUnavailable))
	}
	if n > 0 {
		if _, err := cp.ExecContext(ctx, "DELETE FROM processes"); err != nil {
			return fmt.Errorf("sqlite: backup to %s: %v: %w", tmp, err, classifyOr(err, storage.ErrUnavailable))
		}
	}
	// Fold the log into the file, so that the copy is one file.
	if _, err := cp.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return fmt.Errorf("sqlite: backup to %s: %v: %w", tmp, err, classifyOr(err, storage.ErrUnavailable))
	}
	if err := cp.Close(); err != nil {
		return fmt.Errorf("sqlite: backup to %s: %v: %w", tmp, err, storage.ErrUnavailable)
	}
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("sqlite: backup to %s: %v: %w", tmp, err, storage.ErrUnavailable)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sqlite: backup to %s: %v: %w", tmp, err, storage.ErrUnavailable)
	}
	return nil
}

// classifyOr returns the sentinel of err, else otherwise.
func classifyOr(err, otherwise error) error {
	if sentinel := classify(err); sentinel != nil {
		return sentinel
	}
	return otherwise
}
