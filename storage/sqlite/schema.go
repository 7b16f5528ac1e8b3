package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/internal/upgrade"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
)

// migrations are applied in order; the database's PRAGMA user_version is
// the number already applied. Never edit a released migration: append one,
// with its kind: upgrade.Expand when a process of the version before can
// keep running beside it, else upgrade.Contract, which migrate refuses to
// run while a live process of an older version has the file open
// (docs/upgrades.md lists every migration's kind and why).
var migrations = [...]migration{
	// 1: events, projection definitions, states and errors.
	{upgrade.Expand, `
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
`},

	// 2: feed sequences, encrypted data, never-reused positions and feed
	// sequences, per-type counts, projection creation times and references.
	{upgrade.Contract, `
ALTER TABLE events ADD COLUMN feed_sequence INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN encrypted_data TEXT; -- NULL when the event has none

-- Number the batches stored so far, per aggregate type, in position order.
WITH numbered AS (
	SELECT aggregate_type, aggregate_id, version,
	       row_number() OVER (PARTITION BY aggregate_type ORDER BY min(position)) AS n
	FROM events GROUP BY aggregate_type, aggregate_id, version
)
UPDATE events SET feed_sequence = numbered.n FROM numbered
WHERE events.aggregate_type = numbered.aggregate_type
  AND events.aggregate_id = numbered.aggregate_id
  AND events.version = numbered.version;

-- Reads of one type's feed by feed sequence; entries end with the rowid,
-- the position, so they are in position order.
CREATE INDEX events_by_feed ON events (aggregate_type, feed_sequence);

-- One row per aggregate type ever appended to. feed_sequence is that of
-- the type's latest batch, also after deletions (never reused); the counts
-- are of what is stored now.
CREATE TABLE feeds (
	aggregate_type TEXT    PRIMARY KEY,
	feed_sequence  INTEGER NOT NULL,
	aggregates     INTEGER NOT NULL,
	batches        INTEGER NOT NULL,
	events         INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO feeds (aggregate_type, feed_sequence, aggregates, batches, events)
SELECT aggregate_type, max(feed_sequence), count(DISTINCT aggregate_id), max(feed_sequence), count(*)
FROM events GROUP BY aggregate_type;

-- Named counters. 'position': the highest position ever assigned, kept
-- when deletions remove the events at the end of the feed, so that
-- positions are never reused.
CREATE TABLE counters (
	name  TEXT    PRIMARY KEY,
	value INTEGER NOT NULL
) WITHOUT ROWID;

-- Projection instances: creation time (unknown for instances stored
-- before this migration: their update time stands in) and reference.
-- ref_rank orders references as lists sort them: 0 number (by ref_num),
-- 1 text (by ref_text), 2 none. ref_decimal is a number's decimal text.
ALTER TABLE projection_states ADD COLUMN created_at INTEGER NOT NULL DEFAULT 0;
UPDATE projection_states SET created_at = updated_at;
ALTER TABLE projection_states ADD COLUMN ref_rank INTEGER NOT NULL DEFAULT 2;
ALTER TABLE projection_states ADD COLUMN ref_num REAL NOT NULL DEFAULT 0;
ALTER TABLE projection_states ADD COLUMN ref_text TEXT NOT NULL DEFAULT '';
ALTER TABLE projection_states ADD COLUMN ref_decimal TEXT NOT NULL DEFAULT '';
-- The number of instances of each projection, so that counting them
-- does not visit them.
ALTER TABLE definitions ADD COLUMN instances INTEGER NOT NULL DEFAULT 0;
UPDATE definitions SET instances = (SELECT count(*) FROM projection_states s WHERE s.name = definitions.name);
CREATE INDEX projection_states_by_ref ON projection_states (name, ref_rank, ref_num, ref_text, instance_id);
CREATE INDEX projection_states_by_created ON projection_states (name, created_at, instance_id);
CREATE INDEX projection_states_by_updated ON projection_states (name, updated_at, instance_id);
`},

	// 3: a type's feed is read through events_by_feed, whose entries are in
	// position order too (typefeed.go): one index less to keep per event.
	{upgrade.Expand, `
DROP INDEX events_by_type;
`},

	// 4: a type's row in the feeds table counts the batches up to its
	// feed_sequence only; later ones are counted from the events until the
	// writer settles the row (statements.go). No change to the tables, but
	// a program of schema 3 would read wrong counts and heads, and number
	// feed sequences from a stale one: it must refuse the file.
	{upgrade.Contract, `
SELECT 1;
`},

	// 5: one index entry per aggregate, for ListAggregates: the first
	// event (sequence 1) of each aggregate, by type and id (byte order),
	// with its recorded_at, the aggregate's creation time. Only an
	// aggregate's first append writes an entry.
	{upgrade.Expand, `
CREATE INDEX events_aggregates ON events (aggregate_type, aggregate_id, recorded_at) WHERE sequence = 1;
`},
	// 6: reads of the feed, and of a type's feed, by the time the events
	// were recorded (FeedQuery.From and To). The entries end with the
	// rowid, the position.
	{upgrade.Expand, `
CREATE INDEX events_by_time ON events (recorded_at);
CREATE INDEX events_by_type_time ON events (aggregate_type, recorded_at);
`},
	// 7: projection search. projection_search holds the indexed text of
	// each instance that has any (the words of its indexed fields, as
	// storage.ProjectionState.SearchText has them: lower case, separated
	// by single spaces); projection_search_fts indexes it by rowid = id.
	// The ascii tokenizer splits on ASCII non-alphanumerics only, so the
	// words are indexed exactly as given (the text holds no other
	// separator than the space, and is lower case already). Triggers keep
	// the full-text index in step with the table. detail = none: only
	// which rows hold a word (no positions); prefix indexes of 1 to 3
	// characters make a short prefix one term rather than a merge of
	// every word it starts (a search for "zanz ka" in 100,000 instances:
	// 26 ms without, 0.7 ms with).
	{upgrade.Expand, `
CREATE TABLE projection_search (
	id          INTEGER PRIMARY KEY,
	name        TEXT    NOT NULL,
	instance_id TEXT    NOT NULL,
	text        TEXT    NOT NULL,
	UNIQUE (name, instance_id)
);
CREATE VIRTUAL TABLE projection_search_fts USING fts5 (
	text, content = '', contentless_delete = 1, tokenize = 'ascii', detail = none, prefix = '1 2 3'
);
CREATE TRIGGER projection_search_insert AFTER INSERT ON projection_search BEGIN
	INSERT INTO projection_search_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER projection_search_delete AFTER DELETE ON projection_search BEGIN
	DELETE FROM projection_search_fts WHERE rowid = old.id;
END;
CREATE TRIGGER projection_search_update AFTER UPDATE OF text ON projection_search BEGIN
	DELETE FROM projection_search_fts WHERE rowid = old.id;
	INSERT INTO projection_search_fts (rowid, text) VALUES (new.id, new.text);
END;
`},
	// 8: reactions (storage.ReactionStorage). Times are Unix
	// microseconds, 0 for none. reactions_due holds only the pending and
	// ongoing reactions, so claiming what is due reads the index of the
	// active ones and nothing else; reactions_pending answers the cancels
	// of a definition's pending reactions for an aggregate.
	{upgrade.Expand, `
CREATE TABLE reaction_definitions (
	name       TEXT    PRIMARY KEY,
	spec       BLOB    NOT NULL,
	created_at INTEGER NOT NULL,
	checkpoint INTEGER NOT NULL
);
CREATE TABLE reactions (
	id             TEXT    PRIMARY KEY,
	definition     TEXT    NOT NULL,
	aggregate_type TEXT    NOT NULL,
	aggregate_id   TEXT    NOT NULL,
	event_id       TEXT    NOT NULL,
	event_type     TEXT    NOT NULL,
	state          INTEGER NOT NULL,
	created_at     INTEGER NOT NULL,
	trigger_at     INTEGER NOT NULL,
	due_at         INTEGER NOT NULL,
	finished_at    INTEGER NOT NULL,
	attempts       INTEGER NOT NULL,
	claim          TEXT    NOT NULL,
	last_error     TEXT    NOT NULL,
	payload        BLOB    NOT NULL
);
CREATE INDEX reactions_due ON reactions (due_at, id) WHERE state IN (0, 1);
CREATE INDEX reactions_pending ON reactions (definition, aggregate_id) WHERE state = 0;
CREATE INDEX reactions_trigger ON reactions (trigger_at, id);
CREATE INDEX reactions_aggregate ON reactions (aggregate_type, aggregate_id);
`},
	// 9: snapshots (storage.Snapshot), at most one per aggregate. A
	// rowid table, since a snapshot may be megabytes (a WITHOUT ROWID
	// table keeps whole rows in its b-tree). A process of version 8
	// still running beside one of this version goes on working: it never
	// reads the table, though its deletions leave snapshots behind (a
	// recreated aggregate could then load one of its earlier life);
	// upgrade all processes of a file together.
	{upgrade.Contract, `
CREATE TABLE snapshots (
	aggregate_type TEXT    NOT NULL,
	aggregate_id   TEXT    NOT NULL,
	version        INTEGER NOT NULL,
	state_version  INTEGER NOT NULL,
	data           BLOB    NOT NULL,
	recorded_at    INTEGER NOT NULL, -- microseconds since the Unix epoch, UTC
	UNIQUE (aggregate_type, aggregate_id)
);
`},
	// 10: event metadata, as storage.AppendMetadata encodes it (compact
	// JSON), NULL when the event has none. A process of the version before
	// keeps working beside it while it runs (its inserts name their
	// columns and leave this one NULL, its reads do not select it), but
	// the events it saves have no metadata, and it refuses to open the
	// file anew (the schema is newer than it knows).
	{upgrade.Expand, `
ALTER TABLE events ADD COLUMN metadata TEXT;
`},
	// 11: the processes that have the file open (docs/upgrades.md): a row
	// per open Storage with the schema version it runs against, written
	// by Open and deleted by Close. All of them run on this host (the
	// write-ahead log's shared memory requires it), so a row's process is
	// live while its pid runs (and did not start after the row), whatever
	// the time; nothing refreshes the rows, so an idle file costs nothing.
	// A contract migration refuses to run while a live row of an older
	// version exists. Older processes run beside it: they never read the
	// table.
	{upgrade.Expand, `
CREATE TABLE processes (
	id         TEXT    PRIMARY KEY,
	host       TEXT    NOT NULL,
	pid        INTEGER NOT NULL,
	started_at INTEGER NOT NULL, -- microseconds since the Unix epoch, UTC
	version    INTEGER NOT NULL,
	last_seen  INTEGER NOT NULL  -- when the row was written
);
`},
	// 12: fewer bytes per stored event (issue 37): an event id that is a
	// UUID in canonical text (lower-case, 8-4-4-4-12: those of
	// eventstore.NewEventID, and the only ones the HTTP API takes) is
	// stored as its 16 bytes (eventid.go), 20 bytes less in the row and in
	// the entry of the unique index of (type, aggregate id, event id): 48
	// bytes on disk per event in the growth benchmark. Other ids stay
	// text. The UPDATE rewrites every row holding such an id and its index
	// entry: 2 min 39 s per million events on the shared 2-core machine at
	// a load average of 30, in the migration's transaction (the file's
	// writers wait). A process
	// of version 11 must not run beside it: it would read the 16 bytes as
	// the id, and not see a retry of a converted id as one (stop it before
	// the upgrade; it refuses the file once migrated).
	{upgrade.Contract, `
UPDATE events SET event_id = unhex(replace(event_id, '-', ''))
WHERE typeof(event_id) = 'text' AND event_id GLOB '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]';
`},
	// 13: fewer bytes per stored event (issue 37), as PostgreSQL's schema
	// version 11: events_by_type_time (type, time: 28 bytes per event in
	// the growth benchmark) served only reads of a type's feed by date,
	// which events_by_time serves too, reading each entry's row for its
	// type (feeddate.go). A process of version 12 beside this one would
	// fail its reads of a type's feed by date (its statements name the
	// index); stop it before the upgrade (it refuses the file once
	// migrated). Dropping the index takes about a second per million
	// events.
	{upgrade.Contract, `
DROP INDEX events_by_type_time;
`},
}

// migration is one schema version: its kind and its statements.
type migration struct {
	kind upgrade.Kind
	sql  string
}

// migrateOptions are what an Open asks of migrate.
type migrateOptions struct {
	// list is the migrations this program knows: migrations, except in
	// tests that play an older or a newer program.
	list []migration
	// noMigrate refuses a file older than list, or a new one, instead of
	// migrating it.
	noMigrate bool
	// record, when set, is the id of this Storage's row in processes,
	// written in the migration's transaction so that no migration that
	// must not run beside it can start between the check and the row.
	record string
}

// migrate brings the schema up to date in one IMMEDIATE transaction (db's
// DSN sets _txlock=immediate), so concurrent Opens of the same file apply
// each migration once. It refuses a file written by a newer version, and
// returns the version it found and the one it left.
func migrate(ctx context.Context, db *sql.DB, opts migrateOptions) (from, to int, err error) {
	if opts.list == nil {
		opts.list = migrations[:]
	}
	latest := len(opts.list)
	// journal_mode is persistent; setting it outside a transaction once is
	// enough, and the DSN did so. Verify: an acknowledged save relies on it.
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return 0, 0, err
	}
	if mode != "wal" {
		return 0, 0, fmt.Errorf("journal_mode is %q, want wal", mode)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, err
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&from); err != nil {
		return 0, 0, err
	}
	switch {
	case from > latest:
		return from, from, upgrade.Newer(from, latest)
	case from < latest && opts.noMigrate:
		return from, from, upgrade.Older(from, latest)
	}
	for i := from; i < latest; i++ {
		if opts.list[i].kind == upgrade.Contract && from > 0 {
			if err := refuseBesideOlder(ctx, tx, i+1); err != nil {
				return from, from, err
			}
		}
		if _, err := tx.ExecContext(ctx, opts.list[i].sql); err != nil {
			return from, from, fmt.Errorf("migration %d: %w", i+1, err)
		}
	}
	if from < latest {
		// PRAGMA takes no parameters; the value is a constant of this program.
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", latest)); err != nil {
			return from, from, err
		}
	}
	if opts.record != "" {
		p := upgrade.Self(latest)
		now := time.Now().UnixMicro()
		if _, err := tx.ExecContext(ctx, `INSERT INTO processes (id, host, pid, started_at, version, last_seen) VALUES (?, ?, ?, ?, ?, ?)`,
			opts.record, p.Host, p.PID, p.Started.UnixMicro(), p.Version, now); err != nil {
			return from, from, fmt.Errorf("record this process: %w", err)
		}
		// Rows of processes gone, which stopped without closing.
		if err := forgetDead(ctx, tx); err != nil {
			return from, from, err
		}
	} else if from == latest {
		return from, from, nil
	}
	if err := tx.Commit(); err != nil {
		return from, from, err
	}
	return from, latest, nil
}

// recordedProcesses returns the processes recorded in the file with a
// version below version (all of them for 0).
func recordedProcesses(ctx context.Context, tx *sql.Tx, version int) (ids []string, procs []upgrade.Process, err error) {
	q := `SELECT id, host, pid, started_at, version, last_seen FROM processes`
	var args []any
	if version > 0 {
		q += ` WHERE version < ?`
		args = append(args, version)
	}
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var p upgrade.Process
		var started, seen int64
		if err := rows.Scan(&id, &p.Host, &p.PID, &started, &p.Version, &seen); err != nil {
			return nil, nil, err
		}
		p.Started, p.LastSeen = time.UnixMicro(started).UTC(), time.UnixMicro(seen).UTC()
		ids, procs = append(ids, id), append(procs, p)
	}
	return ids, procs, rows.Err()
}

// hasProcesses reports whether the file has the processes table (schema
// version 11 on).
func hasProcesses(ctx context.Context, tx *sql.Tx) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'processes'`).Scan(&n)
	return n > 0, err
}

// refuseBesideOlder returns the error of migration version, a contract
// one, when live processes of an older schema version have the file open.
func refuseBesideOlder(ctx context.Context, tx *sql.Tx, version int) error {
	if ok, err := hasProcesses(ctx, tx); err != nil || !ok {
		return err
	}
	_, procs, err := recordedProcesses(ctx, tx, version)
	if err != nil {
		return err
	}
	var live []upgrade.Process
	for _, p := range procs {
		if p.Running() {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return upgrade.Refuse(version, live[:min(len(live), 5)], len(live), "while its pid runs")
}

// forgetDead deletes the rows of processes that are not running.
func forgetDead(ctx context.Context, tx *sql.Tx) error {
	ids, procs, err := recordedProcesses(ctx, tx, 0)
	if err != nil {
		return err
	}
	for i, p := range procs {
		if !p.Running() {
			if _, err := tx.ExecContext(ctx, `DELETE FROM processes WHERE id = ?`, ids[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// forget deletes the row id of this process, when its Storage closes.
func forget(ctx context.Context, db *sql.DB, id string) error {
	_, err := db.ExecContext(ctx, `DELETE FROM processes WHERE id = ?`, id)
	return err
}

// newProcessID returns the id of a Storage's row in processes.
func newProcessID() string { return uuid.NewString() }

// Migrate creates or migrates the file at path to this package's schema
// version and returns the version it found and the one it left, without
// opening a Storage: the deploy step before a rolling restart (the
// server's -migrate-only), after which processes opened with
// Options.NoMigrate start. A contract migration (docs/upgrades.md) that a
// live process of an older version has the file open beside refuses to
// run with storage.ErrSchemaVersion, its message naming the processes;
// nothing is migrated then. Of opts, only BusyTimeout applies.
func Migrate(ctx context.Context, path string, opts *Options) (from, to int, err error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.BusyTimeout <= 0 {
		o.BusyTimeout = 5 * time.Second
	}
	if path == "" || strings.HasPrefix(path, "//") {
		return 0, 0, fmt.Errorf("sqlite: migrate %q: give a file path such as events.db: %w", path, storage.ErrInvalid)
	}
	db, err := sql.Open("sqlite", DSN(path, o.BusyTimeout)+"&_txlock=immediate")
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: migrate %s: %v: %w", path, err, storage.ErrUnavailable)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	from, to, err = migrate(ctx, db, migrateOptions{list: o.testMigrations})
	if err != nil {
		if errors.Is(err, storage.ErrSchemaVersion) {
			return from, to, fmt.Errorf("sqlite: migrate %s: %w", path, err)
		}
		if sentinel := classify(err); sentinel != nil {
			return from, to, fmt.Errorf("sqlite: migrate %s: %v: %w", path, err, sentinel)
		}
		return from, to, fmt.Errorf("sqlite: migrate %s: %v", path, err)
	}
	return from, to, nil
}
