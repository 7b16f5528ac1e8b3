package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/google/uuid"
	"github.com/hallgren/eventsourcing/core"
	hsql "github.com/hallgren/eventsourcing/eventstore/sql"
	_ "modernc.org/sqlite" // the driver our SQLite backend uses, for the raw baseline and hallgren
)

// sqliteDSN opens path in WAL mode with synchronous=FULL (fsync at every
// commit), the settings of our SQLite backend, so that the raw baseline and
// the peer are exactly as durable.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
}

// sqliteMakers returns the SQLite subjects; each creates its database in a
// directory of its own under dir.
func sqliteMakers(dir string) []maker {
	var n atomic.Int64
	newDir := func(name string) (string, func() error, error) {
		d := filepath.Join(dir, fmt.Sprintf("%s-%d", name, n.Add(1)))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", nil, err
		}
		return filepath.Join(d, "db"), func() error { return os.RemoveAll(d) }, nil
	}
	return []maker{
		{"ours", func(context.Context) (subject, error) {
			path, rm, err := newDir("ours")
			if err != nil {
				return nil, err
			}
			s, err := sqlite.Open(path, nil)
			if err != nil {
				return nil, err
			}
			return newOurs(s, rm)
		}},
		{"raw", func(ctx context.Context) (subject, error) {
			path, rm, err := newDir("raw")
			if err != nil {
				return nil, err
			}
			return newRawSQLite(ctx, path, rm)
		}},
		{"hallgren", func(context.Context) (subject, error) {
			path, rm, err := newDir("hallgren")
			if err != nil {
				return nil, err
			}
			db, err := sql.Open("sqlite", sqliteDSN(path))
			if err != nil {
				return nil, err
			}
			// The constructor the library recommends for several
			// goroutines writing to one SQLite file.
			s, err := hsql.NewSQLiteSingelWriter(db)
			if err != nil {
				db.Close()
				return nil, err
			}
			return &hallgren{store: s, all: func() core.Fetcher { return s.All(1) },
				cleanup: func() error { s.Close(); return rm() }}, nil
		}},
	}
}

// rawSchema mirrors the events table of our backends (same columns, same
// unique constraints and index) and adds the tables the raw rebuild
// writes its states and checkpoint to.
const rawSchema = `
CREATE TABLE events (
	position       INTEGER PRIMARY KEY,
	aggregate_type TEXT    NOT NULL,
	aggregate_id   TEXT    NOT NULL,
	event_id       TEXT    NOT NULL,
	event_type     TEXT    NOT NULL,
	data           BLOB,
	version        INTEGER NOT NULL,
	sequence       INTEGER NOT NULL,
	recorded_at    INTEGER NOT NULL,
	UNIQUE (aggregate_type, aggregate_id, sequence),
	UNIQUE (aggregate_type, aggregate_id, event_id)
);
CREATE INDEX events_by_type ON events (aggregate_type, position);
CREATE TABLE states (name TEXT NOT NULL, instance_id TEXT NOT NULL, data BLOB NOT NULL,
	position INTEGER NOT NULL, PRIMARY KEY (name, instance_id));
CREATE TABLE checkpoints (name TEXT PRIMARY KEY, position INTEGER NOT NULL);
`

// rawSQLite is the SQLite baseline: the same rows written by plain INSERTs
// through the same driver, one transaction (one fsync) per save on one
// write connection; reads on a pool of four, as our backend has. Its
// version is the aggregate's last sequence; the unique constraint on the
// sequence is the optimistic concurrency check.
type rawSQLite struct {
	w, r    *sql.DB
	insert  *sql.Stmt // prepared once on w, as a careful user of the driver would
	n       atomic.Int64
	cleanup func() error
}

// rawInsert is the raw baseline's INSERT of one event.
const rawInsert = `INSERT INTO events
	(aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

func newRawSQLite(ctx context.Context, path string, rm func() error) (*rawSQLite, error) {
	w, err := sql.Open("sqlite", sqliteDSN(path)+"&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	w.SetMaxOpenConns(1)
	if _, err := w.ExecContext(ctx, rawSchema); err != nil {
		w.Close()
		return nil, err
	}
	var sync int
	var mode string
	if err := w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil || sync != 2 {
		w.Close()
		return nil, fmt.Errorf("raw sqlite: synchronous is %d, not FULL (2): %v", sync, err)
	}
	if err := w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		w.Close()
		return nil, fmt.Errorf("raw sqlite: journal_mode is %q, not wal: %v", mode, err)
	}
	r, err := sql.Open("sqlite", sqliteDSN(path))
	if err != nil {
		w.Close()
		return nil, err
	}
	r.SetMaxOpenConns(4)
	insert, err := w.PrepareContext(ctx, rawInsert)
	if err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	return &rawSQLite{w: w, r: r, insert: insert, cleanup: rm}, nil
}

func (s *rawSQLite) append(ctx context.Context, agg string, expected int64, n int) (int64, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	now := time.Now().UnixMicro()
	insert := tx.StmtContext(ctx, s.insert)
	for k := range n {
		seq := expected + int64(k) + 1
		if _, err := insert.ExecContext(ctx, aggType, agg, uuid.NewString(), eventType, eventData, seq, seq, now); err != nil {
			if isUniqueViolation(err) {
				return 0, fmt.Errorf("%w: %v", errConflict, err)
			}
			return 0, err
		}
	}
	return expected + int64(n), tx.Commit()
}

func (s *rawSQLite) refresh(ctx context.Context, agg string, known int64) (int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT event_id, event_type, data, sequence FROM events
		WHERE aggregate_type = ? AND aggregate_id = ? AND sequence > ? ORDER BY sequence`, aggType, agg, known)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	v := known
	var e rawEvent
	for rows.Next() {
		if err := rows.Scan(&e.id, &e.typ, &e.data, &v); err != nil {
			return 0, err
		}
	}
	return v, rows.Err()
}

// rawEvent is what the raw baselines scan a row into.
type rawEvent struct {
	position          int64
	aggType, agg, id  string
	typ               string
	data              []byte
	version, sequence int64
	recordedAt        int64     // microseconds (SQLite)
	recordedAtTime    time.Time // PostgreSQL
}

const rawCols = `position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at`

func (s *rawSQLite) scan(rows *sql.Rows) ([]rawEvent, error) {
	defer rows.Close()
	var out []rawEvent
	for rows.Next() {
		var e rawEvent
		if err := rows.Scan(&e.position, &e.aggType, &e.agg, &e.id, &e.typ, &e.data, &e.version, &e.sequence, &e.recordedAt); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (s *rawSQLite) load(ctx context.Context, agg string) (int, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+rawCols+` FROM events
		WHERE aggregate_type = ? AND aggregate_id = ? ORDER BY sequence`, aggType, agg)
	if err != nil {
		return 0, err
	}
	events, err := s.scan(rows)
	return len(events), err
}

func (s *rawSQLite) page(ctx context.Context, after int64) ([]rawEvent, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+rawCols+` FROM events
		WHERE position > ? ORDER BY position LIMIT ?`, after, feedPage)
	if err != nil {
		return nil, err
	}
	return s.scan(rows)
}

func (s *rawSQLite) feed(ctx context.Context) (int, error) {
	total := 0
	for after := int64(0); ; {
		p, err := s.page(ctx, after)
		if err != nil || len(p) == 0 {
			return total, err
		}
		total += len(p)
		after = p[len(p)-1].position
	}
}

// rebuild reads the feed in pages, folds each page into the states and
// writes the states it changed with the checkpoint in one transaction per
// page, as a projection that survives a restart must.
func (s *rawSQLite) rebuild(ctx context.Context) (int, error) {
	name := fmt.Sprint(s.n.Add(1))
	states := make(map[string]mapState)
	total := 0
	for after := int64(0); ; {
		p, err := s.page(ctx, after)
		if err != nil || len(p) == 0 {
			return total, err
		}
		changed := make(map[string]int64)
		for _, e := range p {
			if err := fold(states, e.agg, e.data); err != nil {
				return total, err
			}
			changed[e.agg] = e.position
		}
		after = p[len(p)-1].position
		if err := s.commitStates(ctx, name, states, changed, after); err != nil {
			return total, err
		}
		total += len(p)
	}
}

func (s *rawSQLite) commitStates(ctx context.Context, name string, states map[string]mapState, changed map[string]int64, to int64) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO states (name, instance_id, data, position) VALUES (?, ?, ?, ?)
		ON CONFLICT (name, instance_id) DO UPDATE SET data = excluded.data, position = excluded.position`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for agg, pos := range changed {
		data, _ := json.Marshal(states[agg])
		if _, err := stmt.ExecContext(ctx, name, agg, data, pos); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (name, position) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET position = excluded.position`, name, to); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *rawSQLite) close() error {
	s.insert.Close()
	s.r.Close()
	s.w.Close()
	return s.cleanup()
}
