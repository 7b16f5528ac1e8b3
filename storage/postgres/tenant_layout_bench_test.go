package postgres_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkTenantLayouts measures what the layout of many tenants' events
// in one PostgreSQL database costs a save, with raw pgx and no code of this
// package, to decide between the two layouts issue 19 names:
//
//	go test ./storage/postgres -run '^$' -bench TenantLayouts -benchtime 3000x
//
// Layouts: "schemas", a schema per tenant holding a table like this
// package's events table (same columns and indexes), as the server keeps
// tenants today; "column", one such table for every tenant with a tenant
// column leading every index and the tenant id as a statement parameter;
// "setting", the same one table with the tenant in a transaction setting
// (set_config in the save's pipeline) that the statements compare with;
// "rls", the same with a row-level security policy adding that
// comparison to every statement (so that a statement cannot forget it).
//
// A save is what this package's lone-writer save sends, in one pipeline:
// BEGIN, the aggregate's transaction lock, one statement that reads the
// aggregate's version, takes a position from a sequence and inserts the
// event, COMMIT. For each layout, benchTenants tenants get one save
// each (warm-up), then saves to one tenant and saves round-robin across
// all of them alternate in rounds of 100, as in tenancy's
// BenchmarkSaveRoundRobin. Reported per layout: the round-robin rate in %
// of the one tenant's (issue 19 asks at least 90 %), and the one
// tenant's rate in % of the schema layout's one tenant (what the layout
// costs when there is no round-robin).
func BenchmarkTenantLayouts(b *testing.B) {
	const tenants = 1000
	pool := layoutPool(b)
	ctx := context.Background()
	var single0 float64
	for _, layout := range []string{"schemas", "column", "setting", "rls"} {
		b.Run(layout, func(b *testing.B) {
			l := newLayout(b, pool, layout, tenants)
			n := 0
			save := func(tenant int) {
				n++
				if err := l.save(ctx, tenant, fmt.Sprintf("o-%d", n%100), fmt.Sprintf("e-%d", n)); err != nil {
					b.Fatal(err)
				}
			}
			for t := range tenants {
				save(t)
			}
			const round = 100
			var single, rr time.Duration
			next := 0
			b.ResetTimer()
			for done := 0; done < b.N; done += round {
				r := min(round, b.N-done)
				t0 := time.Now()
				for range r {
					save(0)
				}
				t1 := time.Now()
				for range r {
					save(next)
					next = (next + 1) % tenants
				}
				single, rr = single+t1.Sub(t0), rr+time.Since(t1)
			}
			b.StopTimer()
			singleRate, rrRate := float64(b.N)/single.Seconds(), float64(b.N)/rr.Seconds()
			if layout == "schemas" {
				single0 = singleRate
			}
			b.ReportMetric(rrRate, "saves/s-round-robin")
			b.ReportMetric(singleRate, "saves/s-one-tenant")
			b.ReportMetric(100*rrRate/singleRate, "%-of-one-tenant")
			if single0 > 0 {
				b.ReportMetric(100*singleRate/single0, "%-of-schemas-one-tenant")
			}
		})
	}
}

// layoutPool returns a pool like the server's tenants pool (10
// connections, pgx's default statement cache).
func layoutPool(b *testing.B) *pgxpool.Pool {
	b.Helper()
	testPool(b)
	cfg, err := pgxpool.ParseConfig(databaseURL())
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 10
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// layoutTable is the events table of this package (its columns and
// indexes after every migration), with {{tenant}} before the columns of
// every key: empty for the schema layout, "tenant, " for the others.
const layoutTable = `
CREATE TABLE {{schema}}.events (
	{{tenantCol}}
	position       bigint      NOT NULL,
	aggregate_type text        NOT NULL,
	aggregate_id   text        NOT NULL,
	event_id       text        NOT NULL,
	event_type     text        NOT NULL,
	data           bytea,
	version        bigint      NOT NULL,
	sequence       bigint      NOT NULL,
	recorded_at    timestamptz NOT NULL,
	feed_sequence  bigint      NOT NULL,
	encrypted_data text,
	tx             bigint      NOT NULL,
	PRIMARY KEY ({{tenant}}position),
	UNIQUE ({{tenant}}aggregate_type, aggregate_id, sequence),
	UNIQUE ({{tenant}}aggregate_type, aggregate_id, event_id)
);
CREATE INDEX ON {{schema}}.events ({{tenant}}aggregate_type, position);
CREATE INDEX ON {{schema}}.events ({{tenant}}aggregate_type, feed_sequence);
CREATE INDEX ON {{schema}}.events ({{tenant}}aggregate_type, aggregate_id COLLATE "C") INCLUDE (recorded_at);
CREATE INDEX ON {{schema}}.events ({{tenant}}recorded_at, position);
CREATE INDEX ON {{schema}}.events ({{tenant}}aggregate_type, recorded_at, position);
CREATE SEQUENCE {{schema}}.positions AS bigint;
`

// layoutInsert reads the aggregate's version and inserts one event after
// it; {{where}} is the tenant condition of the layout, {{tenantVal}} the
// tenant column's value ($5 for the column layout).
const layoutInsert = `
WITH cur AS (
	SELECT coalesce(max(version), 0) AS v FROM (
		SELECT version FROM {{schema}}.events
		WHERE {{where}}aggregate_type = $1 AND aggregate_id = $2
		ORDER BY sequence DESC LIMIT 1) l
), p AS (SELECT nextval('{{schema}}.positions') AS p)
INSERT INTO {{schema}}.events ({{tenant}}position, aggregate_type, aggregate_id, event_id, event_type, data, version,
	sequence, recorded_at, feed_sequence, tx)
SELECT {{tenantVal}}p.p, $1, $2, $3, 'Placed', $4, cur.v + 1, cur.v + 1, now(), p.p, 0 FROM cur, p`

// layout is one way of keeping many tenants' events.
type layout struct {
	pool *pgxpool.Pool
	kind string
	sql  []string // per tenant for "schemas", one for the others
}

func newLayout(b *testing.B, pool *pgxpool.Pool, kind string, tenants int) *layout {
	b.Helper()
	ctx := context.Background()
	prefix := fmt.Sprintf("es_layout_%d_", time.Now().UnixNano())
	var schemas []string
	b.Cleanup(func() {
		for _, s := range schemas {
			_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+s+" CASCADE")
		}
	})
	fill := func(sql, schema string) string {
		const setting = "current_setting('eventstore.tenant')::int"
		r := map[string]string{"schemas": "", "column": "tenant, ", "setting": "tenant, ", "rls": "tenant, "}[kind]
		where := map[string]string{"schemas": "", "column": "tenant = $5 AND ", "setting": "tenant = " + setting + " AND ", "rls": ""}[kind]
		val := map[string]string{"schemas": "", "column": "$5, ", "setting": setting + ", ", "rls": setting + ", "}[kind]
		col := ""
		if kind != "schemas" {
			col = "tenant int NOT NULL,"
		}
		return strings.NewReplacer("{{schema}}", schema, "{{tenantCol}}", col, "{{tenant}}", r,
			"{{where}}", where, "{{tenantVal}}", val).Replace(sql)
	}
	create := func(schema string) {
		schemas = append(schemas, schema)
		ddl := "CREATE SCHEMA " + schema + ";" + fill(layoutTable, schema)
		if kind == "rls" {
			ddl += "ALTER TABLE " + schema + ".events ENABLE ROW LEVEL SECURITY;" +
				"ALTER TABLE " + schema + ".events FORCE ROW LEVEL SECURITY;" +
				"CREATE POLICY tenant ON " + schema + ".events USING (tenant = current_setting('eventstore.tenant')::int);"
		}
		if _, err := pool.Exec(ctx, ddl); err != nil {
			b.Fatal(err)
		}
	}
	l := &layout{pool: pool, kind: kind}
	if kind == "schemas" {
		for t := range tenants {
			s := fmt.Sprintf("%s%d", prefix, t)
			create(s)
			l.sql = append(l.sql, fill(layoutInsert, s))
		}
	} else {
		s := prefix + kind
		create(s)
		l.sql = []string{fill(layoutInsert, s)}
	}
	return l
}

// save appends one event to aggregate agg of tenant t.
func (l *layout) save(ctx context.Context, t int, agg, id string) error {
	i := 0
	if l.kind == "schemas" {
		i = t
	}
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%d/%s", t, agg)
	bt := &pgx.Batch{}
	bt.Queue("BEGIN")
	if l.kind == "rls" || l.kind == "setting" {
		bt.Queue("SELECT set_config('eventstore.tenant', $1, true)", fmt.Sprint(t))
	}
	bt.Queue("SELECT pg_advisory_xact_lock($1)", int64(h.Sum64()))
	args := []any{"order", agg, id, []byte(`{"amount":12}`)}
	if l.kind == "column" {
		args = append(args, t)
	}
	bt.Queue(l.sql[i], args...)
	bt.Queue("COMMIT")
	return l.pool.SendBatch(ctx, bt).Close()
}
