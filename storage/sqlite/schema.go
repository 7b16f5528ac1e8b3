package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations are applied in order; the database's PRAGMA user_version is
// the number already applied. Never edit a released migration: append one.
var migrations = [...]string{
	// 1: events, projection definitions, states and errors.
	`
CREATE TABLE events (
	position       INTEGER PRIMARY KEY, -- rowid: assigned by the single writer in commit order
	aggregate_type TEXT    NOT NULL,
	aggregate_id   TEXT    NOT NULL,
	event_id       TEXT    NOT NULL,
	event_type     TEXT    NOT NULL,
	data           BLOB,               -- NULL when the event has no data
	version        INTEGER NOT NULL,
	sequence       INTEGER NOT NULL,
	recorded_at    INTEGER NOT NULL,   -- microseconds since the Unix epoch, UTC
	UNIQUE (aggregate_type, aggregate_id, sequence),
	UNIQUE (aggregate_type, aggregate_id, event_id)
);
CREATE INDEX events_by_type ON events (aggregate_type, position);

CREATE TABLE definitions (
	name       TEXT    PRIMARY KEY,
	spec       BLOB    NOT NULL,
	created_at INTEGER NOT NULL,       -- microseconds since the Unix epoch, UTC
	checkpoint INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

CREATE TABLE projection_states (
	name        TEXT    NOT NULL REFERENCES definitions (name),
	instance_id TEXT    NOT NULL,
	data        BLOB    NOT NULL,
	position    INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,      -- microseconds since the Unix epoch, UTC
	PRIMARY KEY (name, instance_id)
) WITHOUT ROWID;

CREATE TABLE projection_errors (
	id          INTEGER PRIMARY KEY,   -- insertion order
	name        TEXT    NOT NULL REFERENCES definitions (name),
	position    INTEGER NOT NULL,
	event_id    TEXT    NOT NULL,
	event_type  TEXT    NOT NULL,
	instance_id TEXT    NOT NULL,
	message     TEXT    NOT NULL
);
CREATE INDEX projection_errors_by_name ON projection_errors (name, id);
`,
}

// migrate brings the schema up to date in one IMMEDIATE transaction (db's
// DSN sets _txlock=immediate), so concurrent Opens of the same file apply
// each migration once. It also refuses a file written by a newer version.
func migrate(ctx context.Context, db *sql.DB) error {
	// journal_mode is persistent; setting it outside a transaction once is
	// enough, and the DSN did so. Verify: an acknowledged save relies on it.
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if mode != "wal" {
		return fmt.Errorf("journal_mode is %q, want wal", mode)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this program's %d", version, len(migrations))
	}
	if version == len(migrations) {
		return nil
	}
	for i := version; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	// PRAGMA takes no parameters; the value is a constant of this program.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(migrations))); err != nil {
		return err
	}
	return tx.Commit()
}
