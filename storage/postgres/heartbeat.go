package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore/internal/upgrade"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// HeartbeatInterval is how often a process refreshes its row in the
// processes table of each schema it has open (schema version 14).
const HeartbeatInterval = 10 * time.Second

// HeartbeatTimeout is how long after its last refresh a process's row
// counts as live. A process that stopped without closing its Storages
// (killed, or its host lost) holds back contract migrations that long; one
// that cannot reach the database for longer counts as gone.
const HeartbeatTimeout = time.Minute

// A heartbeat is this process's row in the processes table of one schema,
// shared by every Storage of the process opened on the same pool and
// schema (the tenants of a server share both), so that a process costs
// one row and one UPDATE every HeartbeatInterval however many tenants it
// holds. The first Storage starts it, the last one to close deletes the
// row.
type heartbeat struct {
	key    heartbeatKey
	id     string
	quoted string // the schema, quoted
	users  int    // guarded by heartbeats.mu
	stop   chan struct{}
}

type heartbeatKey struct {
	pool   *pgxpool.Pool
	schema string
}

// heartbeats are the heartbeats of this process, by pool and schema. A
// process is one of a kind: its rows are shared by every Storage it opens,
// whatever code opens them, so they are kept here rather than by a caller.
var heartbeats = struct {
	sync.Mutex
	m map[heartbeatKey]*heartbeat
}{m: map[heartbeatKey]*heartbeat{}}

// acquireHeartbeat returns the heartbeat of pool and schema, one more user
// of it; release it with releaseHeartbeat. Its row is written by migrate
// (every Open writes it, so that a row deleted as dead comes back).
func acquireHeartbeat(pool *pgxpool.Pool, schema string) *heartbeat {
	heartbeats.Lock()
	defer heartbeats.Unlock()
	k := heartbeatKey{pool, schema}
	h := heartbeats.m[k]
	if h == nil {
		h = &heartbeat{key: k, id: uuid.NewString(), quoted: pgx.Identifier{schema}.Sanitize(),
			stop: make(chan struct{})}
		heartbeats.m[k] = h
		go h.run(pool)
	}
	h.users++
	return h
}

// releaseHeartbeat drops a user of h; the last one stops it and deletes
// its row.
func releaseHeartbeat(h *heartbeat, pool *pgxpool.Pool) {
	heartbeats.Lock()
	h.users--
	last := h.users == 0
	if last {
		delete(heartbeats.m, h.key)
	}
	heartbeats.Unlock()
	if !last {
		return
	}
	// The refresh in flight, if any, is not waited for (the pool may be
	// busy): an UPDATE after the DELETE changes nothing.
	close(h.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Best effort: a row left behind expires after HeartbeatTimeout.
	_, _ = pool.Exec(ctx, qualify(h.quoted, `DELETE FROM {{schema}}.processes WHERE id = $1`), h.id)
}

// insert writes h's row at version, in migrate's transaction, and deletes
// the rows of processes dead for a while.
func (h *heartbeat) insert(ctx context.Context, tx pgx.Tx, version int) error {
	p := upgrade.Self(version)
	_, err := tx.Exec(ctx, qualify(h.quoted, `
INSERT INTO {{schema}}.processes (id, host, pid, started_at, version, last_seen) VALUES ($1, $2, $3, $4, $5, now())
ON CONFLICT (id) DO UPDATE SET version = excluded.version, last_seen = now()`), h.id, p.Host, p.PID, p.Started, p.Version)
	if err != nil {
		return fmt.Errorf("record this process: %w", err)
	}
	_, err = tx.Exec(ctx, qualify(h.quoted, `DELETE FROM {{schema}}.processes WHERE last_seen < now() - make_interval(secs => $1)`),
		(10 * HeartbeatTimeout).Seconds())
	return err
}

// run refreshes h's row every HeartbeatInterval until h is stopped. A
// refresh that fails (the database is away) is tried again at the next
// tick; a row gone (deleted as dead while this process could not reach the
// database) comes back with the next Open.
func (h *heartbeat) run(pool *pgxpool.Pool) {
	t := time.NewTicker(HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), HeartbeatInterval)
		_, _ = pool.Exec(ctx, qualify(h.quoted, `UPDATE {{schema}}.processes SET last_seen = now() WHERE id = $1`), h.id)
		cancel()
	}
}

// refuseBesideOlder returns the error of migration version, a contract
// one, when live processes of an older schema version are recorded (in
// the schema quoted, from schema version 14 on), else nil.
func refuseBesideOlder(ctx context.Context, tx pgx.Tx, quoted string, version int) error {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, quoted+".processes").Scan(&exists); err != nil || !exists {
		return err
	}
	rows, err := tx.Query(ctx, qualify(quoted, `
SELECT host, pid, started_at, version, last_seen, count(*) OVER ()
FROM {{schema}}.processes WHERE version < $1 AND last_seen > now() - make_interval(secs => $2)
ORDER BY last_seen DESC LIMIT 5`), version, HeartbeatTimeout.Seconds())
	if err != nil {
		return err
	}
	var live []upgrade.Process
	total := 0
	for rows.Next() {
		var p upgrade.Process
		var pid int32
		if err := rows.Scan(&p.Host, &pid, &p.Started, &p.Version, &p.LastSeen, &total); err != nil {
			rows.Close()
			return err
		}
		p.PID = int(pid)
		live = append(live, p)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(live) == 0 {
		return nil
	}
	return upgrade.Refuse(version, live, total, "until "+HeartbeatTimeout.String()+" after it was last seen")
}

// Migrate creates or migrates the tables of opts.Schema to this package's
// schema version and returns the version it found and the one it left,
// without opening a Storage: the deploy step before a rolling restart (the
// server's -migrate-only), after which processes opened with
// Options.NoMigrate start. A contract migration (docs/upgrades.md) that a
// live process of an older version is recorded beside refuses to run with
// storage.ErrSchemaVersion, its message naming the processes; nothing is
// migrated then. opts.NoMigrate is ignored.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts *Options) (from, to int, err error) {
	if pool == nil {
		return 0, 0, fmt.Errorf("postgres: migrate: nil pool: %w", storage.ErrInvalid)
	}
	from, to, err = migrate(ctx, pool, opts.schema(), migrateOptions{list: opts.migrations()})
	if err != nil {
		if errors.Is(err, storage.ErrSchemaVersion) {
			return from, from, fmt.Errorf("postgres: migrate: %w", err)
		}
		if sentinel := classify(err); sentinel != nil {
			return from, from, fmt.Errorf("postgres: migrate: %v: %w", err, sentinel)
		}
		return from, from, fmt.Errorf("postgres: migrate: %v: %w", err, storage.ErrUnavailable)
	}
	return from, to, nil
}
