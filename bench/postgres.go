package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/google/uuid"
	hcore "github.com/hallgren/eventsourcing/core"
	hsql "github.com/hallgren/eventsourcing/eventstore/sql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for hallgren
	gpostgres "github.com/modernice/goes/backend/postgres"
)

// pgEnv hands out a fresh schema to every PostgreSQL subject and drops
// them all when the run ends.
type pgEnv struct {
	url   string // as given, without pool settings
	conns int    // connections per subject pool
	// stores is how many Storages "ours" opens on its schema, standing
	// for that many server processes.
	stores int
	admin  *pgxpool.Pool
	run    string // prefix of this run's schemas

	mu      sync.Mutex
	n       int
	schemas []string
}

func newPGEnv(ctx context.Context, rawURL string, conns, stores int) (*pgEnv, error) {
	if _, err := url.Parse(rawURL); err != nil {
		return nil, fmt.Errorf("-pg-url: %w", err)
	}
	admin, err := pgxpool.New(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", rawURL, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := admin.Ping(pctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("connect to %s: %w", rawURL, err)
	}
	return &pgEnv{url: rawURL, conns: conns, stores: stores, admin: admin,
		run: fmt.Sprintf("bench_%d", time.Now().UnixNano()%1e9)}, nil
}

// schema returns a new schema name (not yet created) for subject name.
func (e *pgEnv) schema(name string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	s := fmt.Sprintf("%s_%s_%d", e.run, name, e.n)
	e.schemas = append(e.schemas, s)
	return s
}

// withParams returns the URL with extra query parameters.
func (e *pgEnv) withParams(params ...string) string {
	return withParams(e.url, params...)
}

func (e *pgEnv) drop(ctx context.Context, schema string) error {
	_, err := e.admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	return err
}

// close drops every schema of the run and closes the admin pool.
func (e *pgEnv) close(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for _, s := range e.schemas {
		errs = append(errs, e.drop(ctx, s))
	}
	e.admin.Close()
	return errors.Join(errs...)
}

// pool opens a pool of e.conns connections whose search_path is schema.
func (e *pgEnv) pool(ctx context.Context, schema string) (*pgxpool.Pool, error) {
	return pgxpool.New(ctx, e.withParams(fmt.Sprintf("pool_max_conns=%d", e.conns), "search_path="+schema))
}

func (e *pgEnv) makers() []maker {
	return []maker{
		{"ours", func(ctx context.Context) (subject, error) {
			schema := e.schema("ours")
			drop := func() error { return e.drop(context.Background(), schema) }
			if e.stores <= 1 {
				s, err := postgres.OpenURL(ctx, e.withParams(fmt.Sprintf("pool_max_conns=%d", e.conns)),
					&postgres.Options{Schema: schema})
				if err != nil {
					return nil, err
				}
				return newOurs(s, drop)
			}
			// Several Storages on one schema stand for several server
			// processes: each coalesces its own saves, and they
			// serialise on the advisory lock.
			var m multi
			for range e.stores {
				s, err := postgres.OpenURL(ctx, e.withParams(fmt.Sprintf("pool_max_conns=%d", max(2, e.conns/e.stores))),
					&postgres.Options{Schema: schema})
				if err == nil {
					var o *ours
					if o, err = newOurs(s, nil); err == nil {
						m = append(m, o)
						continue
					}
				}
				_ = m.close()
				_ = drop()
				return nil, err
			}
			m[0].cleanup = drop
			return m, nil
		}},
		{"raw", func(ctx context.Context) (subject, error) {
			schema := e.schema("raw")
			if _, err := e.admin.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
				return nil, err
			}
			p, err := e.pool(ctx, schema)
			if err != nil {
				return nil, err
			}
			if _, err := p.Exec(ctx, rawPGSchema); err != nil {
				p.Close()
				return nil, err
			}
			return &rawPG{pool: p, cleanup: func() error { p.Close(); return e.drop(context.Background(), schema) }}, nil
		}},
		{"hallgren", func(ctx context.Context) (subject, error) {
			schema := e.schema("hallgren")
			if _, err := e.admin.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
				return nil, err
			}
			db, err := sql.Open("pgx", e.withParams("search_path="+schema))
			if err != nil {
				return nil, err
			}
			db.SetMaxOpenConns(e.conns)
			db.SetMaxIdleConns(e.conns)
			s, err := hsql.NewPostgres(db)
			if err != nil {
				db.Close()
				return nil, err
			}
			return &hallgren{store: s, all: func() hcore.Fetcher { return s.All(1) },
				cleanup: func() error { s.Close(); return e.drop(context.Background(), schema) }}, nil
		}},
		{"goes", func(ctx context.Context) (subject, error) {
			schema := e.schema("goes")
			if _, err := e.admin.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
				return nil, err
			}
			p, err := e.pool(ctx, schema)
			if err != nil {
				return nil, err
			}
			s := gpostgres.NewEventStore(goesCodec(), gpostgres.Pool(p), gpostgres.Table("events"))
			if err := s.Connect(ctx); err != nil {
				p.Close()
				return nil, err
			}
			return &goes{store: s, cleanup: func() error { p.Close(); return e.drop(context.Background(), schema) }}, nil
		}},
	}
}

// rawPGSchema mirrors the events table of our PostgreSQL backend (same
// columns, unique constraints and index), with the position an identity
// column as a plain application would have it, and adds the tables the raw
// rebuild writes its states and checkpoint to.
const rawPGSchema = `
CREATE TABLE events (
	position       bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	aggregate_type text        NOT NULL,
	aggregate_id   text        NOT NULL,
	event_id       text        NOT NULL,
	event_type     text        NOT NULL,
	data           bytea,
	version        bigint      NOT NULL,
	sequence       bigint      NOT NULL,
	recorded_at    timestamptz NOT NULL,
	UNIQUE (aggregate_type, aggregate_id, sequence),
	UNIQUE (aggregate_type, aggregate_id, event_id)
);
CREATE INDEX events_type_position ON events (aggregate_type, position);
CREATE TABLE states (name text NOT NULL, instance_id text NOT NULL, data bytea NOT NULL,
	position bigint NOT NULL, PRIMARY KEY (name, instance_id));
CREATE TABLE checkpoints (name text PRIMARY KEY, position bigint NOT NULL);
`

// rawPG is the PostgreSQL baseline: each save is one autocommitted
// multi-row INSERT through pgx (committed, so as durable as ours under the
// server's synchronous_commit). Its version is the aggregate's last
// sequence; the unique constraint on the sequence is the optimistic
// concurrency check. It does not keep the feed gap-free: positions come
// from an identity column and commit out of order.
type rawPG struct {
	pool    *pgxpool.Pool
	n       atomic.Int64
	cleanup func() error
}

func (s *rawPG) append(ctx context.Context, agg string, expected int64, n int) (int64, error) {
	var b strings.Builder
	b.WriteString(`INSERT INTO events (aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at) VALUES `)
	args := make([]any, 0, 8*n)
	now := time.Now().UTC()
	for k := range n {
		if k > 0 {
			b.WriteByte(',')
		}
		j := len(args)
		fmt.Fprintf(&b, "($%d,$%d,$%d,$%d,$%d,$%d,$%d,$%d)", j+1, j+2, j+3, j+4, j+5, j+6, j+7, j+8)
		seq := expected + int64(k) + 1
		args = append(args, aggType, agg, uuid.NewString(), eventType, eventData, seq, seq, now)
	}
	if _, err := s.pool.Exec(ctx, b.String(), args...); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return 0, fmt.Errorf("%w: %v", errConflict, err)
		}
		return 0, err
	}
	return expected + int64(n), nil
}

func (s *rawPG) refresh(ctx context.Context, agg string, known int64) (int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+rawCols+` FROM events
		WHERE aggregate_type = $1 AND aggregate_id = $2 AND sequence > $3 ORDER BY sequence`, aggType, agg, known)
	if err != nil {
		return 0, err
	}
	events, err := scanPG(rows)
	if err != nil || len(events) == 0 {
		return known, err
	}
	return events[len(events)-1].sequence, nil
}

func scanPG(rows pgx.Rows) ([]rawEvent, error) {
	defer rows.Close()
	var out []rawEvent
	for rows.Next() {
		var e rawEvent
		if err := rows.Scan(&e.position, &e.aggType, &e.agg, &e.id, &e.typ, &e.data, &e.version, &e.sequence, &e.recordedAtTime); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func (s *rawPG) load(ctx context.Context, agg string) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+rawCols+` FROM events
		WHERE aggregate_type = $1 AND aggregate_id = $2 ORDER BY sequence`, aggType, agg)
	if err != nil {
		return 0, err
	}
	events, err := scanPG(rows)
	return len(events), err
}

func (s *rawPG) page(ctx context.Context, after int64) ([]rawEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+rawCols+` FROM events
		WHERE position > $1 ORDER BY position LIMIT $2`, after, feedPage)
	if err != nil {
		return nil, err
	}
	return scanPG(rows)
}

func (s *rawPG) feed(ctx context.Context) (int, error) {
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
func (s *rawPG) rebuild(ctx context.Context) (int, error) {
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
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var b pgx.Batch
			for agg, pos := range changed {
				data, _ := json.Marshal(states[agg])
				b.Queue(`INSERT INTO states (name, instance_id, data, position) VALUES ($1, $2, $3, $4)
					ON CONFLICT (name, instance_id) DO UPDATE SET data = excluded.data, position = excluded.position`,
					name, agg, data, pos)
			}
			b.Queue(`INSERT INTO checkpoints (name, position) VALUES ($1, $2)
				ON CONFLICT (name) DO UPDATE SET position = excluded.position`, name, after)
			return tx.SendBatch(ctx, &b).Close()
		})
		if err != nil {
			return total, err
		}
		total += len(p)
	}
}

func (s *rawPG) close() error { return s.cleanup() }

// multi spreads the writes of "ours" over several Stores on one schema by
// aggregate id, as a load balancer would over several server processes;
// reads go to the first.
type multi []*ours

func (m multi) pick(agg string) *ours {
	h := 0
	for i := 0; i < len(agg); i++ {
		h = h*31 + int(agg[i])
	}
	return m[(h&0x7fffffff)%len(m)]
}

func (m multi) append(ctx context.Context, agg string, expected int64, n int) (int64, error) {
	return m.pick(agg).append(ctx, agg, expected, n)
}

func (m multi) refresh(ctx context.Context, agg string, known int64) (int64, error) {
	return m.pick(agg).refresh(ctx, agg, known)
}

func (m multi) load(ctx context.Context, agg string) (int, error) { return m[0].load(ctx, agg) }
func (m multi) feed(ctx context.Context) (int, error)             { return m[0].feed(ctx) }
func (m multi) rebuild(ctx context.Context) (int, error)          { return m[0].rebuild(ctx) }

// close closes the Stores, the first last: it drops the schema.
func (m multi) close() error {
	var errs []error
	for i := len(m) - 1; i >= 0; i-- {
		errs = append(errs, m[i].close())
	}
	return errors.Join(errs...)
}
