package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrations are the schema versions, in order: migrations[i] brings the
// schema from version i to version i+1. Never edit a released migration;
// append a new one.
//
// Event data, definition specs and projection states are bytea so that the
// bytes given are the bytes returned (jsonb would normalise them).
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE {{schema}}.events (
	position       bigint      PRIMARY KEY,
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
CREATE INDEX events_type_position ON {{schema}}.events (aggregate_type, position);

CREATE TABLE {{schema}}.definitions (
	name       text        PRIMARY KEY,
	spec       bytea       NOT NULL,
	created_at timestamptz NOT NULL,
	checkpoint bigint      NOT NULL DEFAULT 0
);

CREATE TABLE {{schema}}.projection_states (
	name        text        NOT NULL,
	instance_id text        NOT NULL,
	data        bytea       NOT NULL,
	position    bigint      NOT NULL,
	updated_at  timestamptz NOT NULL,
	PRIMARY KEY (name, instance_id)
);

CREATE TABLE {{schema}}.projection_errors (
	id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	name        text   NOT NULL,
	position    bigint NOT NULL,
	event_id    text   NOT NULL,
	event_type  text   NOT NULL,
	instance_id text   NOT NULL,
	message     text   NOT NULL
);
CREATE INDEX projection_errors_name_id ON {{schema}}.projection_errors (name, id);
`,
}

// migrate creates schema and brings its tables to the latest version, in
// one transaction under an advisory lock, so that several processes opening
// the same schema at once do not trip over each other.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	quoted := pgx.Identifier{schema}.Sanitize()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockKey("migrate", schema)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, qualify(quoted, `
CREATE SCHEMA IF NOT EXISTS {{schema}};
CREATE TABLE IF NOT EXISTS {{schema}}.schema_migrations (
	version    integer     PRIMARY KEY,
	applied_at timestamptz NOT NULL DEFAULT now()
)`)); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, qualify(quoted,
			`SELECT coalesce(max(version), 0) FROM {{schema}}.schema_migrations`)).Scan(&current); err != nil {
			return err
		}
		if current > len(migrations) {
			return fmt.Errorf("schema %s is at version %d, newer than this program knows (%d)", schema, current, len(migrations))
		}
		for v := current + 1; v <= len(migrations); v++ {
			if _, err := tx.Exec(ctx, qualify(quoted, migrations[v-1])); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, qualify(quoted,
				`INSERT INTO {{schema}}.schema_migrations (version) VALUES ($1)`), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// statements holds the SQL of every query, with the schema filled in.
type statements struct {
	append, appendLean, appendGroup             string
	load, feed, feedType                        string
	createDef, def, defs, defErrors, allErrors  string
	loadState, commit, checkpoint, upsertStates string
	insertErrors, trimErrors                    string
}

func newStatements(schema string) statements {
	q := func(sql string) string { return qualify(schema, sql) }
	const eventCols = `position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at`
	return statements{
		// append checks and writes one request in one statement. It returns
		// one row with kind 0 holding the aggregate's current version and
		// the last position written (0 when nothing was), then one row of
		// kind 1 per event id of the request that is already stored. It
		// writes only when no id is stored and the expected version ($4,
		// NULL for none) matches: exactly when eventstore.PlanAppend says
		// to write, which the caller checks.
		//
		// Keep it cheap to plan: after five executions PostgreSQL switches
		// a prepared statement to its generic plan, which saves ~0.3 ms of
		// planning per call, but only if the generic plan's estimated cost
		// is close to the custom ones (a LATERAL probe per id of $3 was
		// never switched and halved throughput). With event_id = ANY($3)
		// the generic plan probes the aggregate's ids through whichever
		// index the statistics favour (for small aggregates, a scan of the
		// aggregate's entries).
		append: q(`
WITH cur AS (
	SELECT version, sequence FROM {{schema}}.events
	WHERE aggregate_type = $1 AND aggregate_id = $2
	ORDER BY sequence DESC LIMIT 1
), stored AS (
	SELECT event_id, version, position FROM {{schema}}.events
	WHERE aggregate_type = $1 AND aggregate_id = $2 AND event_id = ANY($3::text[])
), ok AS (
	SELECT coalesce((SELECT version FROM cur), 0) AS v,
	       coalesce((SELECT sequence FROM cur), 0) AS s,
	       (SELECT coalesce(max(position), 0) FROM {{schema}}.events) AS p
	WHERE NOT EXISTS (SELECT 1 FROM stored)
	  AND ($4::bigint IS NULL OR $4::bigint = coalesce((SELECT version FROM cur), 0))
), ins AS (
	INSERT INTO {{schema}}.events (` + eventCols + `)
	SELECT ok.p + t.ord, $1, $2, t.id, t.typ, t.data, ok.v + 1, ok.s + t.ord, t.at
	FROM ok, unnest($3::text[], $5::text[], $6::bytea[], $7::timestamptz[]) WITH ORDINALITY AS t(id, typ, data, at, ord)
	RETURNING position
)
SELECT 0 AS kind, '' AS event_id, coalesce((SELECT version FROM cur), 0) AS version,
       coalesce((SELECT max(position) FROM ins), 0) AS position
UNION ALL
SELECT 1, event_id, version, position FROM stored`),
		// appendLean is the fast path of append: it writes the request
		// when the expected version ($4, NULL for none) matches, and
		// returns the aggregate's current version and the last position
		// written. It does not look for stored ids: when one is stored,
		// the unique index on event ids fails the statement
		// (unique_violation); when the version does not match, it writes
		// nothing and fails on purpose with division_by_zero (1 / the
		// count of rows written), so that a pipeline stops right there.
		// Either way the caller rolls back to the request's savepoint and
		// runs append, which decides with eventstore.PlanAppend. Skipping
		// the look-up and the result rows makes the common case about a
		// quarter cheaper for the server.
		appendLean: q(`
WITH cur AS (
	SELECT coalesce(max(version), 0) AS v, coalesce(max(sequence), 0) AS s FROM (
		SELECT version, sequence FROM {{schema}}.events
		WHERE aggregate_type = $1 AND aggregate_id = $2
		ORDER BY sequence DESC LIMIT 1
	) last
), ins AS (
	INSERT INTO {{schema}}.events (` + eventCols + `)
	SELECT (SELECT coalesce(max(position), 0) FROM {{schema}}.events) + t.ord, $1, $2, t.id, t.typ, t.data,
	       cur.v + 1, cur.s + t.ord, t.at
	FROM cur, unnest($3::text[], $5::text[], $6::bytea[], $7::timestamptz[]) WITH ORDINALITY AS t(id, typ, data, at, ord)
	WHERE $4::bigint IS NULL OR $4::bigint = cur.v
	RETURNING position
)
SELECT cur.v, (SELECT max(position) FROM ins) + 0 * (1 / (SELECT count(*) FROM ins)) FROM cur`),
		// appendGroup is appendLean for a whole group of requests on
		// distinct aggregates, in one statement. The requests come as
		// arrays ($1 aggregate types, $2 ids, $3 expected versions, NULL
		// for none, $4 how many events precede the request's own), the
		// events of all requests concatenated ($5 the index of the
		// request, from 1, $6 ids, $7 types, $8 data, $9 times). It
		// writes every request at its aggregate's current version + 1,
		// positions following the head in array order, and returns one
		// row per request, in order: the aggregate's current version and
		// the head it wrote after. It writes all or nothing: an id already
		// stored fails it with unique_violation, and a version that does
		// not match with division_by_zero (1 / whether every event was
		// written); the caller then runs the requests one by one.
		appendGroup: q(`
WITH cur AS MATERIALIZED (
	SELECT r.ri, r.atype, r.aid, r.expected, r.off,
	       coalesce(l.version, 0) AS v, coalesce(l.sequence, 0) AS s
	FROM unnest((SELECT $1::text[]), (SELECT $2::text[]), (SELECT $3::bigint[]), (SELECT $4::bigint[])) WITH ORDINALITY AS r(atype, aid, expected, off, ri)
	LEFT JOIN LATERAL (
		SELECT version, sequence FROM {{schema}}.events
		WHERE aggregate_type = r.atype AND aggregate_id = r.aid
		ORDER BY sequence DESC LIMIT 1
	) l ON true
), head AS MATERIALIZED (
	SELECT coalesce(max(position), 0) AS p FROM {{schema}}.events
), ins AS (
	INSERT INTO {{schema}}.events (` + eventCols + `)
	SELECT head.p + t.ord, cur.atype, cur.aid, t.id, t.typ, t.data, cur.v + 1, cur.s + t.ord - cur.off, t.at
	FROM head, unnest((SELECT $5::bigint[]), (SELECT $6::text[]), (SELECT $7::text[]), (SELECT $8::bytea[]),
		(SELECT $9::timestamptz[]))
		WITH ORDINALITY AS t(ri, id, typ, data, at, ord)
	JOIN cur ON cur.ri = t.ri
	WHERE cur.expected IS NULL OR cur.expected = cur.v
	RETURNING 1
)
SELECT cur.v, head.p + 0 * (1 / (SELECT (count(*) = cardinality($6::text[]))::int FROM ins))
FROM cur, head ORDER BY cur.ri`),
		load: q(`SELECT ` + eventCols + ` FROM {{schema}}.events
WHERE aggregate_type = $1 AND aggregate_id = $2 ORDER BY sequence`),
		feed: q(`SELECT ` + eventCols + ` FROM {{schema}}.events
WHERE position > $1 ORDER BY position LIMIT $2`),
		// feedType reads the feed of one aggregate type together with the
		// highest visible position, in one statement and so one snapshot.
		// A row with position 0 stands for no event.
		feedType: q(`
SELECT h.head, coalesce(e.position, 0), coalesce(e.aggregate_type, ''), coalesce(e.aggregate_id, ''),
       coalesce(e.event_id, ''), coalesce(e.event_type, ''), e.data, coalesce(e.version, 0),
       coalesce(e.sequence, 0), coalesce(e.recorded_at, 'epoch')
FROM (SELECT coalesce(max(position), 0) AS head FROM {{schema}}.events) h
LEFT JOIN LATERAL (
	SELECT ` + eventCols + ` FROM {{schema}}.events
	WHERE aggregate_type = $3 AND position > $1 ORDER BY position LIMIT $2
) e ON true
ORDER BY e.position`),
		createDef: q(`INSERT INTO {{schema}}.definitions (name, spec, created_at) VALUES ($1, $2, $3)`),
		def:       q(`SELECT name, spec, created_at, checkpoint FROM {{schema}}.definitions WHERE name = $1`),
		defs:      q(`SELECT name, spec, created_at, checkpoint FROM {{schema}}.definitions ORDER BY name`),
		defErrors: q(`SELECT name, position, event_id, event_type, instance_id, message FROM {{schema}}.projection_errors
WHERE name = $1 ORDER BY id`),
		allErrors: q(`SELECT name, position, event_id, event_type, instance_id, message FROM {{schema}}.projection_errors
ORDER BY name, id`),
		loadState: q(`SELECT data, position, updated_at FROM {{schema}}.projection_states
WHERE name = $1 AND instance_id = $2`),
		commit:     q(`UPDATE {{schema}}.definitions SET checkpoint = $3 WHERE name = $1 AND checkpoint = $2`),
		checkpoint: q(`SELECT checkpoint FROM {{schema}}.definitions WHERE name = $1`),
		upsertStates: q(`
INSERT INTO {{schema}}.projection_states (name, instance_id, data, position, updated_at)
SELECT $1, t.instance_id, t.data, t.position, t.updated_at
FROM unnest($2::text[], $3::bytea[], $4::bigint[], $5::timestamptz[]) AS t(instance_id, data, position, updated_at)
ON CONFLICT (name, instance_id) DO UPDATE
SET data = excluded.data, position = excluded.position, updated_at = excluded.updated_at`),
		insertErrors: q(`
INSERT INTO {{schema}}.projection_errors (name, position, event_id, event_type, instance_id, message)
SELECT $1, t.position, t.event_id, t.event_type, t.instance_id, t.message
FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY
	AS t(position, event_id, event_type, instance_id, message, ord)
ORDER BY t.ord`),
		trimErrors: q(`
DELETE FROM {{schema}}.projection_errors
WHERE name = $1 AND id <= (
	SELECT id FROM {{schema}}.projection_errors WHERE name = $1 ORDER BY id DESC OFFSET $2 LIMIT 1
)`),
	}
}
