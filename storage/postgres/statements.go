package postgres

import (
	"fmt"
	"strings"
)

// statements holds the SQL of every query, with the schema filled in.
type statements struct {
	append, appendGroup, appendOne, appendSingle   string
	appendLean                                     string
	load, loadRange, feed, feedType, feedSeq       string
	feedDated, feedTypeDated                       string
	head, typeHead, feeds, deleteAgg, deleteType   string
	createDef, def, defs                           string
	deleteDef, resetDef, renameDef, updateSpec     string
	loadState, loadStates                          string
	commit, checkpoint, upsertStates, deleteStates string
	insertErrors, trimErrors                       string
	deleteStatesOf, deleteErrorsOf, renameStatesOf string
	renameErrorsOf, countStates                    string
	saveSnapshot, loadSnapshot                     string
	deleteAggSnapshot, deleteTypeSnapshots         string
	// reserve, watermark and inFlight are the statements of the
	// watermark (see newStatements).
	reserve, watermark, inFlight string
	// notify follows an append's COMMIT in its pipeline: when the append
	// wrote, it notifies listeners of the channel, with the tenant as the
	// payload, in a transaction of its own committed with synchronous_commit
	// off (it stores nothing, and holds the server's notification lock for
	// microseconds).
	notify string
	// feedLag is the number of positions between the head a feed reader
	// sees and the highest position committed (FeedLag).
	feedLag string
	// lastPosition and advance are the statements of rewind detection
	// (rewindStatements).
	lastPosition, advance string
	// probe is the statement of ProbeWrite (probeSQL).
	probe string
}

const (
	// eventCols are the columns an append writes, in the order of its
	// INSERT.
	eventCols = `position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at,
	feed_sequence, encrypted_data, tx, metadata`
	// baseSQL is the position before the first of the block an append
	// reserved (see reserveSQL), for the statements of its transaction.
	baseSQL = `current_setting('eventstore.base')::bigint`
	// txSQL is the id of the appending transaction, stored in events.tx.
	txSQL = `pg_current_xact_id()::text::bigint`
	// wmSQL is the watermark a feed read set in the statement before it
	// (see statements.watermark): only rows of transactions below it are
	// returned.
	wmSQL = `current_setting('eventstore.wm')::bigint`
	// selectCols are the columns scanEvents reads.
	selectCols = `position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at,
	feed_sequence, coalesce(encrypted_data, ''), coalesce(metadata, '')`
	// headSQL is the highest position visible below the watermark
	// (wmSQL), stored or deleted since (the mark of feed ''): every row
	// at a lower position is visible or will never be. Rows of
	// transactions at or above the watermark are few (those that
	// committed while an older append was in flight), so the backward scan
	// stops early.
	headSQL = `greatest((SELECT position FROM {{schema}}.events WHERE tx < ` + wmSQL + `
	ORDER BY position DESC LIMIT 1),
	(SELECT mark FROM {{schema}}.deleted_marks WHERE feed = ''), 0)`
	// joinedCols are selectCols of an event e outer-joined to a row that
	// leads them (a version or a head): with no event, position 0 and
	// empty values, which rowDecoder and scanHeadEvents skip.
	joinedCols = `coalesce(e.position, 0), coalesce(e.aggregate_type, ''), coalesce(e.aggregate_id, ''),
       coalesce(e.event_id, ''), coalesce(e.event_type, ''), e.data, coalesce(e.version, 0),
       coalesce(e.sequence, 0), coalesce(e.recorded_at, 'epoch'), coalesce(e.feed_sequence, 0),
       coalesce(e.encrypted_data, ''), coalesce(e.metadata, '')`
	// storedCols are the columns of a stored event e that an append
	// returns for each of its event ids already stored, after event_id,
	// version and position, for storage.PlanAppend to tell a retry from a
	// reuse of the id; noStoredCols stand in for them in the other rows.
	storedCols = `e.event_type AS s_type, e.data AS s_data, coalesce(e.encrypted_data, '') AS s_enc,
	       coalesce(e.metadata, '') AS s_meta`
	storedNames  = `s_type, s_data, s_enc, s_meta`
	noStoredCols = `'' AS s_type, NULL::bytea AS s_data, '' AS s_enc, '' AS s_meta`
	// tenantText is the text of the transaction's tenant (tenantSQL), as
	// events_event_key hashes it.
	tenantText = tenantSQL + `::text`
	// stateCols are the columns of a projection state that readState
	// reads.
	stateCols = `instance_id, data, position, created_at, updated_at, ref_rank, ref_num, ref_text, ref_number`
)

// typeKeyCols are the leading columns of events_type_key (schema version
// 16): 32-bit hashes of the tenant's text and of the aggregate type, which
// keep a type's entries together in the tenant's; typeKeyOf is the same of
// the transaction's tenant and a type typ given as an SQL expression of
// type text. The first hash is the same in every entry of a store without
// tenants, as the tenant was, so the planner sees the index's order follow
// the table's.
const typeKeyCols = tenantHash + `, hashtext(aggregate_type)`

// tenantHash is the 32-bit hash of a row's tenant that leads
// events_type_key and events_recorded_time (schema versions 16 and 17);
// sameTenantHash compares it with the hash of the transaction's tenant.
const (
	tenantHash     = `hashtext(tenant::text)`
	sameTenantHash = tenantHash + ` = hashtext(` + tenantText + `)`
)

// sameType is the condition of a read of the events of type typ (an SQL
// expression of type text) through events_type_key: the row's hashes
// equal those of the transaction's tenant and typ, and the row's type is
// typ (the view compares the tenant), so that a collision of hashes never
// returns another type's events.
func sameType(typ string) string {
	return sameTenantHash + ` AND hashtext(aggregate_type) = hashtext(` + typ +
		`) AND aggregate_type = ` + typ
}

// eventKey returns the key of events_event_key (schema version 15) of an
// event of the tenant, aggregate type, aggregate id and event id given as
// SQL expressions of type text: the index's expression, so that a look-up
// of an event id compares its key with the index's entries. Every look-up
// compares the event id too, so that a collision of keys never returns
// another event.
func eventKey(tenant, typ, id, eventID string) string {
	return fmt.Sprintf(`(left(md5(%[1]s || length(%[2]s)::text || ':' || %[2]s || %[3]s), 12) ||
	right(md5(%[1]s || length(%[2]s)::text || ':' || %[2]s || length(%[3]s)::text || ':' || %[3]s || %[4]s), 20))::uuid`,
		tenant, typ, id, eventID)
}

// aggKeyOfRow is aggKey of a row's tenant, type and id: the expression
// that events_aggregate_key (schema version 18) indexes.
const aggKeyOfRow = `md5(tenant::text || length(aggregate_type)::text || ':' || aggregate_type || aggregate_id)::uuid`

// sameAggregate is the condition of a read of the events of the
// aggregate $1, $2 (type and id) through events_aggregate_key, for
// statements that read all of them (loads, deletions): the row's key
// equals that of the transaction's tenant, $1 and $2, and the row's type
// and id are $1 and $2 (the view compares the tenant), so that a collision
// of keys never returns another aggregate's events. A read of the last or
// first event of an aggregate goes through lastOfAggregate instead.
const sameAggregate = aggKeyOfRow + ` = md5(` + tenantText + ` || length($1::text)::text || ':' || $1::text || $2::text)::uuid` +
	` AND aggregate_type = $1::text AND aggregate_id = $2::text`

// aggKey returns the key of events_aggregate_key (schema version 18) of
// the aggregate of the tenant, aggregate type and aggregate id given as SQL
// expressions of type text: the MD5 of the three as a uuid, in the
// injective encoding of eventKey (whose first 48 bits are this key's).
func aggKey(tenant, typ, id string) string {
	return fmt.Sprintf(`md5(%[1]s || length(%[2]s)::text || ':' || %[2]s || %[3]s)::uuid`, tenant, typ, id)
}

// loneCurrent starts the statements for one request (appendOne,
// appendSingle): the aggregate's current version and last sequence, and
// whether the request may write (not doomed, $10, and its expected
// version, $3, matches), for an aggregate $1, $2.
func loneCurrent() string {
	return `
WITH cur AS MATERIALIZED (
	SELECT coalesce(max(version), 0) AS v, coalesce(max(sequence), 0) AS s,
	       (NOT $10::bool AND ($3::bigint IS NULL OR $3::bigint = coalesce(max(version), 0))) AS go
	FROM (` + lastOfAggregate("version, sequence", "$1::text", "$2::text", "") + `) last
), `
}

// lastOfAggregate returns a query of the columns cols of the last event
// (the highest sequence) of the aggregate of type typ and id id (SQL
// expressions of type text) that meets cond (a condition on columns of
// events_rows, "" for every event, or a locking clause such as "FOR
// SHARE" for the last event), or of none. It scans
// events_aggregate_key back from the end of the aggregate's key and
// compares the tenant, type and id in the one row it keeps, outside the
// LIMIT: a comparison inside it is a filter whose selectivity the planner
// multiplies with the key's, and then, expecting a single row of the
// aggregate, it read every entry of the key and sorted them (a bitmap
// scan: a save read every event of its aggregate). The table, not the
// view: the view's comparison of the tenant is such a filter too.
func lastOfAggregate(cols, typ, id, cond string) string {
	return endOfAggregate(cols, typ, id, cond, " DESC")
}

// firstOfAggregate is lastOfAggregate for the first event (the lowest
// sequence) that meets cond.
func firstOfAggregate(cols, typ, id, cond string) string {
	return endOfAggregate(cols, typ, id, cond, "")
}

// endOfAggregate is lastOfAggregate (order " DESC") and firstOfAggregate
// (order "").
func endOfAggregate(cols, typ, id, cond, order string) string {
	where, lock := cond, ""
	if strings.HasPrefix(cond, "FOR ") {
		where, lock = "", " "+cond
	}
	if where != "" {
		where = " AND " + where
	}
	return `SELECT ` + cols + ` FROM (
		SELECT ` + cols + `, tenant AS k_tenant, aggregate_type AS k_type, aggregate_id AS k_id
		FROM {{schema}}.events_rows
		WHERE ` + aggKeyOfRow + ` = ` + aggKey(tenantText, typ, id) + where + `
		ORDER BY sequence` + order + ` LIMIT 1` + lock + `
	) h WHERE h.k_tenant = ` + tenantSQL + ` AND h.k_type = ` + typ + ` AND h.k_id = ` + id
}

// newStatements returns the statements for the quoted schema name; channel
// is the quoted SQL string literal of the channel appends notify, regKey
// the first key of the advisory locks by which appending transactions of
// the schema register, and db the oid of the database.
func newStatements(schema, channel string, regKey int32, db uint32) statements {
	q := func(sql string) string {
		return qualify(schema, strings.ReplaceAll(sql, "{{channel}}", channel))
	}
	// notify, a CTE, marks the session as having written (eventstore.wrote,
	// a session setting, rolled back with the transaction, holding the
	// tenant written to), for notifySQL after the COMMIT, which sends the
	// tenant as the notification's payload. Not pg_notify itself: a transaction that notifies
	// takes a lock of the whole server at its commit and holds it until
	// the commit is durable, which made the appends of every process
	// commit one at a time.
	const notify = `notify AS (SELECT set_config('eventstore.wrote', current_setting('eventstore.tenant'), false) FROM ins LIMIT 1)`
	// registered selects from pg_locks the registrations of the appends
	// in flight: a shared advisory lock (regKey, the low 32 bits of the
	// transaction id) that each appending transaction takes inside the
	// append lock and holds until it has committed or rolled back.
	registered := fmt.Sprintf(`locktype = 'advisory' AND database = %d::oid AND classid = %d::oid AND objsubid = 2`,
		db, regKey)
	return statements{
		// reserve is the first statement of an append's transaction; it
		// sets the tenant ($5) for the statements after it. In
		// this order (each level of the statement is evaluated before the
		// one around it; OFFSET 0 keeps the planner from merging them):
		// it takes the transaction locks of the aggregates written ($1,
		// sorted keys: a second writer of an aggregate waits here for the
		// first one's commit, holding nothing else), then the append lock
		// ($2, a session lock), and inside it registers the transaction
		// (which gives it its id, so that ids and positions are given in
		// one order, that of the lock), takes the drain lock ($4, shared;
		// a deletion waits for every holder) and reserves a block of $3
		// positions from the sequence (one nextval for a block of one:
		// setval writes a WAL record every time, nextval once in 32
		// calls, which makes a lone event's save write ~19 % less WAL),
		// whose predecessor it stores in eventstore.base for the append
		// statements (baseSQL); then it
		// releases the append lock. The rows are written after it, and
		// the transaction commits side by side with the others; feed
		// readers stay behind it until it ends (see watermark). The
		// numbers of a block that are not written stay unused.
		//
		// $6 is the highest position the Storage has handed out or read
		// (store.seen). A sequence that gives a number at or below it
		// went back (a failover that lost the last commits, a restored
		// backup): the block is then taken after $6 + $7 (RewindMargin)
		// instead, so that no number is given twice, and the statement
		// returns the number the sequence gave (was), and $6, for the
		// caller to report the rewind.
		reserve: q(fmt.Sprintf(`SELECT set_config('eventstore.base', r.base::text, true), pg_advisory_unlock($2),
	set_config('eventstore.tenant', $5, true), r.was, $6::bigint AS seen
FROM (
	SELECT CASE WHEN v.was > $6::bigint THEN
	            CASE WHEN $3::bigint = 1 THEN v.was ELSE setval({{positions}}, v.was + $3::bigint - 1) END
	            ELSE setval({{positions}}, $6::bigint + $7::bigint + $3::bigint) END - $3::bigint AS base,
	       v.was
	FROM (
		SELECT nextval({{positions}}) AS was,
		       pg_advisory_xact_lock_shared(%d, ((`+txSQL+` + 2147483648) %% 4294967296 - 2147483648)::int4) AS registered,
		       pg_advisory_xact_lock_shared($4) AS drain
		FROM (
			SELECT pg_advisory_lock($2) AS locked
			FROM (SELECT count(*) FROM (SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS k OFFSET 0) l OFFSET 0) a
			OFFSET 0
		) b
		OFFSET 0
	) v
	OFFSET 0
) r`, regKey)),
		// watermark sets the tenant ($1) and eventstore.wm (wmSQL) for the
		// feed read that follows it in the same pipeline: the lowest id of the appends
		// registered in flight, or, with none, the first id not yet
		// given (xmax, of this statement's snapshot). Ids are rebuilt
		// from their low 32 bits by their signed distance to xmax, which
		// is safe because an id in flight is within 2^31 of it: an
		// append that took its id after the snapshot and registered
		// before pg_locks was read is above xmax, and does not lower the
		// watermark (rebuilding it below xmax would put the watermark
		// 2^32 too low, hiding the whole feed). It runs in a statement of
		// its own so that it is read before the read's snapshot is taken:
		// see docs/appends-side-by-side.md for why no row is then
		// skipped.
		watermark: fmt.Sprintf(`SELECT set_config('eventstore.wm', (
	SELECT least(s.x, min(s.x - (((s.x - l.objid::bigint) + 2147483648) & 4294967295) + 2147483648))::text
	FROM (SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS x) s
	LEFT JOIN pg_locks l ON %s
	GROUP BY s.x), true), set_config('eventstore.tenant', $1, true)`, strings.ReplaceAll(registered, "locktype", "l.locktype")),
		notify: q(`SELECT pg_notify({{channel}}, w.tenant), set_config('synchronous_commit', 'off', true),
	set_config('eventstore.wrote', '', false)
FROM (SELECT current_setting('eventstore.wrote', true) AS tenant OFFSET 0) w
WHERE w.tenant <> ''`),
		// inFlight reports whether an append is registered in flight.
		inFlight: `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE ` + registered + `)`,
		// append checks and writes one request in one statement. It returns
		// one row with kind 0 holding the aggregate's current version and
		// the last position written (0 when nothing was), then one row of
		// kind 1 per event id of the request that is already stored. It
		// writes only when no id is stored and the expected version ($4,
		// NULL for none) matches: exactly when storage.PlanAppend says
		// to write, which the caller checks. The arguments are $1 the
		// aggregate type, $2 its id, then per event $3 ids, $5 types, $6
		// data, $7 times, $8 encrypted data (NULL when no event has
		// any), $9 the offset of its positions and $10 metadata (NULL when
		// no event has any, "" for an event without).
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
	` + lastOfAggregate("version, sequence", "$1::text", "$2::text", "") + `
), stored AS (
	SELECT e.event_id, e.version, e.position, ` + storedCols + ` FROM {{schema}}.events e
	WHERE ` + eventKey("e.tenant::text", "e.aggregate_type", "e.aggregate_id", "e.event_id") + ` = ANY(ARRAY(SELECT ` + eventKey(tenantText, "$1::text", "$2::text", "u.id") + `
		FROM unnest($3::text[]) AS u(id)))
	  AND e.aggregate_type = $1 AND e.aggregate_id = $2 AND e.event_id = ANY($3::text[])
), ok AS (
	SELECT coalesce((SELECT version FROM cur), 0) AS v,
	       coalesce((SELECT sequence FROM cur), 0) AS s,
	       ` + baseSQL + ` + $9::bigint AS p
	WHERE NOT EXISTS (SELECT 1 FROM stored)
	  AND ($4::bigint IS NULL OR $4::bigint = coalesce((SELECT version FROM cur), 0))
), ins AS (
	INSERT INTO {{schema}}.events (` + eventCols + `)
	SELECT ok.p + t.ord, $1, $2, t.id, t.typ, t.data, ok.v + 1, ok.s + t.ord, t.at, ok.p + 1, t.enc, ` + txSQL + `,
	       nullif(t.meta, '')
	FROM ok, unnest($3::text[], $5::text[], $6::bytea[], $7::timestamptz[], $8::text[], $10::text[])
		WITH ORDINALITY AS t(id, typ, data, at, enc, meta, ord)
	RETURNING position
), ` + notify + `
SELECT 0 AS kind, '' AS event_id, coalesce((SELECT version FROM cur), 0) AS version,
       coalesce((SELECT max(position) FROM ins), 0) AS position, ` + noStoredCols + `
FROM (SELECT count(*) FROM notify) n
UNION ALL
SELECT 1, event_id, version, position, ` + storedNames + ` FROM stored`),
		// appendGroup appends one round of requests, on distinct
		// aggregates, in one statement. The requests come as arrays ($1
		// aggregate types, $2 ids, $3 expected versions, NULL for none, $4
		// their numbers of events), the events of all requests
		// concatenated ($5 the index of the request, from 1, $6 ids, $7
		// types, $8 data, $9 times, $10 encrypted data or NULL, $11 the
		// event's place in its request, from 1), then $12 the distinct
		// aggregate types. It writes every request whose expected version
		// matches at its aggregate's current version + 1, positions
		// following the head and FeedSequences following their type's
		// head, both in request order and without gaps for the requests it
		// skips. It does not look for stored ids among the requests it
		// writes: an id already stored fails it with unique_violation (the
		// caller then decides the requests one by one). It returns a row per
		// request, in request order: kind 0 when written, 1 when refused,
		// with the request's index, its aggregate's current version and the
		// head before the statement; each refused request is followed by a
		// row of kind 2 per event id of it already stored (its version and
		// position), which storage.PlanAppend needs to tell a retry of a
		// stored save from a conflict. With $13 set (all or nothing) a
		// refused request fails the statement with division_by_zero
		// instead. $14 marks the doomed requests; $15 is the events'
		// metadata (NULL when no event has any, "" for an event without).
		//
		// A conflict is a result, not an error, on purpose: an error costs
		// the server a log entry with the whole statement and the client a
		// rollback, and makes pgx forget the prepared statements of the
		// pipeline (re-prepared and re-planned on the next use), which made
		// every attempt on a contended aggregate several times slower.
		appendGroup: q(`
WITH req AS MATERIALIZED (
	SELECT r.ri, r.atype, r.aid, r.n, coalesce(l.version, 0) AS v, coalesce(l.sequence, 0) AS s,
	       (NOT r.doomed AND (r.expected IS NULL OR r.expected = coalesce(l.version, 0))) AS go
	FROM unnest((SELECT $1::text[]), (SELECT $2::text[]), (SELECT $3::bigint[]), (SELECT $4::bigint[]),
		(SELECT $14::bool[])) WITH ORDINALITY AS r(atype, aid, expected, n, doomed, ri)
	LEFT JOIN LATERAL (
		` + lastOfAggregate("version, sequence", "r.atype", "r.aid", "") + `
	) l ON true
), head AS MATERIALIZED (
	SELECT ` + baseSQL + ` + $12::bigint AS p
), w AS MATERIALIZED (
	SELECT req.ri, req.atype, req.aid, req.v, req.s,
	       sum(req.n) OVER (ORDER BY req.ri) - req.n AS off
	FROM req WHERE req.go
), ins AS (
	INSERT INTO {{schema}}.events (` + eventCols + `)
	SELECT head.p + w.off + t.k, w.atype, w.aid, t.id, t.typ, t.data, w.v + 1, w.s + t.k, t.at, head.p + w.off + 1, t.enc,
	       ` + txSQL + `, nullif(t.meta, '')
	FROM head, unnest((SELECT $5::bigint[]), (SELECT $6::text[]), (SELECT $7::text[]), (SELECT $8::bytea[]),
		(SELECT $9::timestamptz[]), (SELECT $10::text[]), (SELECT $11::bigint[]), (SELECT $15::text[]))
		AS t(ri, id, typ, data, at, enc, k, meta)
	JOIN w ON w.ri = t.ri
	RETURNING 1
), ` + notify + `, stored AS (
	SELECT req.ri, e.event_id, e.version, e.position, ` + storedCols + `
	FROM req
	JOIN unnest((SELECT $5::bigint[]), (SELECT $6::text[])) AS u(ri, id) ON u.ri = req.ri
	CROSS JOIN LATERAL (
		SELECT * FROM {{schema}}.events
		WHERE ` + eventKey("tenant::text", "aggregate_type", "aggregate_id", "event_id") + ` =
		      ` + eventKey(tenantText, "req.atype", "req.aid", "u.id") + `
		  AND aggregate_type = req.atype AND aggregate_id = req.aid AND event_id = u.id
		LIMIT 1 -- one at most (unique); keeps the look-up a probe per id
	) e
	WHERE NOT req.go
)
SELECT CASE WHEN req.go THEN 0 ELSE 1 END AS kind, req.ri, req.v,
       head.p + 0 * (1 / CASE WHEN $13::bool AND NOT req.go THEN 0 ELSE 1 END) AS position, '' AS event_id,
       ` + noStoredCols + `
FROM req, head, (SELECT count(*) FROM notify) n
UNION ALL
SELECT 2, ri, version, position, event_id, ` + storedNames + ` FROM stored
ORDER BY 2, 1`),
		// appendOne is appendGroup for a round of one request, with a
		// plan a third the size (no window functions, joins or sorts of
		// requests), which matters as much as its execution for a lone
		// writer: the server spends about as long starting the executor
		// for the plan of appendGroup as running it. The arguments are $1
		// the aggregate type, $2 its id, $3 the expected version (NULL for
		// none), per event $4 ids, $5 types, $6 data, $7 times, $8
		// encrypted data (NULL when no event has any), then $9 strict and
		// $10 doomed, as for appendGroup, $11 the offset of its positions
		// and $12 metadata (as for appendGroup); the rows are those of
		// appendGroup. The arrays are read through sub-selects, as in
		// appendGroup, so that custom plans do not see their lengths:
		// their costs then match the generic plan's and PostgreSQL
		// switches to it after five runs (with the arrays as constants it
		// never did, and planned every call). The request's row comes
		// before the stored ids without a sort: a statement that writes
		// runs no parallel plan, so UNION ALL returns its branches in
		// order (readGroup checks the order).
		appendOne: q(loneCurrent() + `ins AS (
	INSERT INTO {{schema}}.events (` + eventCols + `)
	SELECT ` + baseSQL + ` + $11::bigint + t.ord, $1, $2, t.id, t.typ, t.data,
	       cur.v + 1, cur.s + t.ord, t.at, ` + baseSQL + ` + $11::bigint + 1, t.enc, ` + txSQL + `, nullif(t.meta, '')
	FROM cur, unnest($4::text[], $5::text[], $6::bytea[], $7::timestamptz[], $8::text[], $12::text[])
		WITH ORDINALITY AS t(id, typ, data, at, enc, meta, ord)
	WHERE cur.go
	RETURNING position
), ` + notify + `, stored AS (
	SELECT e.event_id, e.version, e.position, ` + storedCols + `
	FROM cur, unnest((SELECT $4::text[])) AS u(id)
	CROSS JOIN LATERAL (
		SELECT * FROM {{schema}}.events
		WHERE ` + eventKey("tenant::text", "aggregate_type", "aggregate_id", "event_id") + ` =
		      ` + eventKey(tenantText, "$1::text", "$2::text", "u.id") + `
		  AND aggregate_type = $1 AND aggregate_id = $2 AND event_id = u.id
		LIMIT 1
	) e
	WHERE NOT cur.go
)
SELECT CASE WHEN cur.go THEN 0 ELSE 1 END AS kind, 1::bigint AS ri, cur.v,
       coalesce((SELECT min(position) FROM ins) - 1, 0) + 0 * (1 / CASE WHEN $9::bool AND NOT cur.go THEN 0 ELSE 1 END),
       '' AS event_id, ` + noStoredCols + `
FROM cur, (SELECT count(*) FROM notify) n
UNION ALL
SELECT 2, 1, version, position, event_id, ` + storedNames + ` FROM stored`),
		// appendSingle is appendOne for a request of one event, with
		// scalar arguments: $1 the aggregate type, $2 its id, $3 the
		// expected version (NULL for none), $4 the event id, $5 its type,
		// $6 data, $7 time, $8 encrypted data (NULL for none), then $9
		// strict and $10 doomed, $11 the offset of its position and $12
		// the metadata (NULL for none); the rows are those of appendGroup. A lone
		// writer saving one event at a time runs nothing else, and the
		// server spends about a fifth less CPU on it than on appendOne
		// (no arrays to decode and unnest, no ordinality, no lateral
		// look-up per id).
		appendSingle: q(loneCurrent() + `ins AS (
	INSERT INTO {{schema}}.events (` + eventCols + `)
	SELECT ` + baseSQL + ` + $11::bigint + 1, $1, $2, $4, $5, $6, cur.v + 1, cur.s + 1, $7,
	       ` + baseSQL + ` + $11::bigint + 1, $8, ` + txSQL + `, $12::text
	FROM cur
	WHERE cur.go
	RETURNING position
), ` + notify + `
SELECT CASE WHEN cur.go THEN 0 ELSE 1 END AS kind, 1::bigint AS ri, cur.v,
       coalesce((SELECT position FROM ins) - 1, 0) + 0 * (1 / CASE WHEN $9::bool AND NOT cur.go THEN 0 ELSE 1 END),
       '' AS event_id, ` + noStoredCols + `
FROM cur, (SELECT count(*) FROM notify) n
UNION ALL
SELECT 2, 1, e.version, e.position, e.event_id, ` + storedCols + `
FROM cur, {{schema}}.events e
WHERE NOT cur.go AND ` + eventKey("e.tenant::text", "e.aggregate_type", "e.aggregate_id", "e.event_id") + ` = ` + eventKey(tenantText, "$1::text", "$2::text", "$4::text") + `
  AND e.aggregate_type = $1 AND e.aggregate_id = $2 AND e.event_id = $4`),
		// appendLean writes a request of one event when its expected
		// version ($7, NULL for none) matches, and returns its position and
		// version; it returns no row when it does not match, and fails
		// with unique_violation when the event id is stored already: it
		// says nothing of why, for the lone writer's common case, which it
		// makes about a tenth cheaper than appendSingle (no refusal rows;
		// see BenchmarkStatementCost). It notifies the channel when it
		// writes. The arguments are $1 the
		// aggregate type, $2 its id, $3 the event id, $4 its type, $5 data,
		// $6 time, $8 encrypted data (NULL for none), $9 metadata (NULL
		// for none).
		appendLean: q(`
WITH ins AS (
INSERT INTO {{schema}}.events (` + eventCols + `)
SELECT ` + baseSQL + ` + 1, $1, $2, $3, $4, $5, cur.v + 1, cur.s + 1, $6, ` + baseSQL + ` + 1, $8, ` + txSQL + `, $9::text
FROM (
	SELECT coalesce(max(version), 0) AS v, coalesce(max(sequence), 0) AS s FROM (
		` + lastOfAggregate("version, sequence", "$1::text", "$2::text", "") + `
	) last
) cur
WHERE $7::bigint IS NULL OR $7::bigint = cur.v
RETURNING position, version
), ` + notify + `
SELECT position, version FROM ins, (SELECT count(*) FROM notify) n`),
		load: q(`SELECT ` + selectCols + ` FROM {{schema}}.events
WHERE ` + sameAggregate + ` ORDER BY sequence`),
		// loadRange reads the versions in ($3, $4] of an aggregate with its
		// current version, in one snapshot. A row with position 0 stands
		// for no event; no row at all for no aggregate. The scan of the
		// aggregate's sequence index starts after the last event of version
		// $3 when $5 (a read to the end, such as a writer catching up after
		// a conflict: found by scanning back from the end, over no more
		// entries than it returns), else after sequence $3 (a version's
		// events have sequences at least as high as the version) and up to
		// the first event of a version after $4 (found by scanning forward
		// from there), so a page of a long aggregate neither starts at its
		// first event nor runs to its last.
		loadRange: q(`
SELECT c.version, ` + joinedCols + `
FROM (
	` + lastOfAggregate("version", "$1::text", "$2::text", "") + `
) c
LEFT JOIN LATERAL (
	SELECT * FROM {{schema}}.events
	WHERE ` + sameAggregate + ` AND version > $3 AND version <= $4
	  AND sequence > (CASE WHEN $5::boolean THEN coalesce((
		` + lastOfAggregate("sequence", "$1::text", "$2::text", "version <= $3") + `), 0) ELSE $3::bigint END)
	  AND sequence < (CASE WHEN $5::boolean THEN 9223372036854775807 ELSE coalesce((
		` + firstOfAggregate("sequence", "$1::text", "$2::text", "sequence > $3::bigint AND version > $4") + `), 9223372036854775807) END)
	ORDER BY sequence
) e ON true
ORDER BY e.sequence`),
		feed: q(`SELECT ` + selectCols + ` FROM {{schema}}.events
WHERE position > $1 AND tx < ` + wmSQL + ` ORDER BY position LIMIT $2`),
		// feedType reads the feed of one aggregate type together with the
		// highest visible position, in one statement and so one snapshot.
		// A row with position 0 stands for no event.
		feedType: q(`
SELECT h.head, ` + joinedCols + `
FROM (SELECT ` + headSQL + ` AS head) h
LEFT JOIN LATERAL (
	SELECT * FROM {{schema}}.events
	WHERE ` + sameType("$3") + ` AND position > $1 AND tx < ` + wmSQL + ` ORDER BY position LIMIT $2
) e ON true
ORDER BY e.position`),
		// feedSeq is feedType after a FeedSequence ($1) instead of a
		// position. Within a type FeedSequences follow positions, and a
		// batch's FeedSequence is its first position (since schema
		// version 6), so the events wanted are those of the type with
		// feed_sequence > $1 and they all have position > $1: a scan of
		// events_type_key (sameType) from there, which skips at most the rest
		// of batch $1. Rows older than version 6 (tx = 0) were numbered
		// 1, 2, 3, ... per type, below their positions: the partial index
		// events_type_feed_before_v6 gives the position of the first of
		// them after $1 when there is one (the scan starts there), else
		// that of the last of them (nothing after it is older), so that
		// no read scans the older rows it does not return. A position $4
		// other than 0 restricts them further. Every row has position >=
		// feed_sequence (older rows were numbered below their positions),
		// so position > $1 holds for every row wanted: a bound the planner
		// sees (the other is an InitPlan's, for which it assumes a third of
		// the type), without which it read a cursor near the head of a big
		// store by scanning the table (TestTypeFeedPlansNearTheHead).
		feedSeq: q(`
SELECT h.head, ` + joinedCols + `
FROM (SELECT ` + headSQL + ` AS head) h
LEFT JOIN LATERAL (
	SELECT * FROM {{schema}}.events
	WHERE ` + sameType("$3") + ` AND feed_sequence > $1 AND tx < ` + wmSQL + ` AND position > $1
	  AND position > greatest($4, coalesce(
		(SELECT position - 1 FROM {{schema}}.events
		 WHERE aggregate_type = $3 AND tx = 0 AND feed_sequence > $1 ORDER BY feed_sequence LIMIT 1),
		greatest($1, (SELECT position FROM {{schema}}.events
		 WHERE aggregate_type = $3 AND tx = 0 ORDER BY feed_sequence DESC LIMIT 1))))
	ORDER BY position LIMIT $2
) e ON true
ORDER BY e.position`),
		// feedDated and feedTypeDated read the events recorded within
		// [$3, $4] (FeedQuery.From and To) after position $1, the latter
		// with the highest visible position as feedType does (the former,
		// like feed, leaves Head at the last event): a range scan of
		// events_recorded_time (sameTenantHash and the time; position > $1
		// is checked in the row), then a sort by position of what it
		// found, since recorded_at need not rise with the position. For a range that holds much of the feed the planner
		// may instead read in position order and filter. feedTypeDated
		// restricts to type $5 and FeedSequences after $6, filtering the
		// window's rows of every type (schema version 11 dropped the index
		// of each type's times, see migrations).
		feedDated: q(`SELECT ` + selectCols + ` FROM {{schema}}.events
WHERE ` + sameTenantHash + ` AND recorded_at BETWEEN $3 AND $4 AND position > $1 AND tx < ` + wmSQL + `
ORDER BY position LIMIT $2`),
		feedTypeDated: q(`
SELECT h.head, ` + joinedCols + `
FROM (SELECT ` + headSQL + ` AS head) h
LEFT JOIN LATERAL (
	SELECT * FROM {{schema}}.events
	WHERE aggregate_type = $5 AND ` + sameTenantHash + ` AND recorded_at BETWEEN $3 AND $4 AND position > $1
	  AND feed_sequence > $6
	  AND tx < ` + wmSQL + `
	ORDER BY position LIMIT $2
) e ON true
ORDER BY e.position`),
		head:    q(`SELECT ` + headSQL),
		feedLag: q(`SELECT greatest(0, coalesce((SELECT max(position) FROM {{schema}}.events), 0) - ` + headSQL + `)`),
		typeHead: q(`SELECT (SELECT feed_sequence FROM {{schema}}.events WHERE ` + sameType("$1") + ` AND tx < ` + wmSQL + `
	ORDER BY position DESC LIMIT 1), (SELECT mark FROM {{schema}}.deleted_marks WHERE feed = $1)`),
		feeds: q(`
SELECT aggregate_type, count(DISTINCT aggregate_id), count(DISTINCT feed_sequence), count(*)
FROM {{schema}}.events GROUP BY aggregate_type ORDER BY aggregate_type COLLATE "C"`),
		// deleteAgg and deleteType delete events ($1 the type, $2 the
		// aggregate id) and raise the marks of feed '' and of the type to
		// the highest position and FeedSequence deleted, so that appends
		// never reuse them. They return how many events they deleted.
		deleteAgg:  q(deleteSQL(sameAggregate)),
		deleteType: q(deleteSQL(sameType("$1"))),
		// deleteAggSnapshot and deleteTypeSnapshots follow deleteAgg and
		// deleteType in their transaction, as statements of their own, so
		// that they see a snapshot committed while the deletion waited for
		// saveSnapshot's lock on the aggregate's last event.
		deleteAggSnapshot:   q(`DELETE FROM {{schema}}.snapshots WHERE aggregate_type = $1 AND aggregate_id = $2`),
		deleteTypeSnapshots: q(`DELETE FROM {{schema}}.snapshots WHERE aggregate_type = $1`),
		// saveSnapshot writes a snapshot ($3 its version) when the
		// aggregate is at version $3 or later, replacing a stored one of
		// a version up to $3, and returns the aggregate's version (NULL
		// for none). It locks the aggregate's last event (FOR SHARE), so
		// a deletion in progress makes it wait and then find no event,
		// and a deletion that starts later waits for it to commit and
		// then deletes the snapshot.
		saveSnapshot: q(`
WITH agg AS (
	` + lastOfAggregate("version", "$1::text", "$2::text", "FOR SHARE") + `
), up AS (
	INSERT INTO {{schema}}.snapshots (aggregate_type, aggregate_id, version, state_version, data, recorded_at)
	SELECT $1, $2, $3, $4, $5, $6 FROM agg WHERE agg.version >= $3
	ON CONFLICT (tenant, aggregate_type, aggregate_id) DO UPDATE
	SET version = excluded.version, state_version = excluded.state_version, data = excluded.data,
	    recorded_at = excluded.recorded_at
	WHERE {{schema}}.snapshots.version <= excluded.version
	RETURNING 1
)
SELECT (SELECT version FROM agg), (SELECT count(*) FROM up)`),
		loadSnapshot: q(`SELECT version, state_version, data, recorded_at FROM {{schema}}.snapshots
WHERE aggregate_type = $1 AND aggregate_id = $2`),
		createDef: q(`INSERT INTO {{schema}}.definitions (name, spec, created_at) VALUES ($1, $2, $3)`),
		// def and defs read definitions with their errors, one row per
		// error (a row with NULL errors for a definition without any),
		// ordered by definition and error (see readDefinitions).
		def: q(`SELECT d.name, d.spec, d.created_at, d.checkpoint,
	e.position, e.event_id, e.event_type, e.instance_id, e.message
FROM {{schema}}.definitions d
LEFT JOIN {{schema}}.projection_errors e ON e.name = d.name
WHERE d.name = $1 ORDER BY e.id`),
		defs: q(`SELECT d.name, d.spec, d.created_at, d.checkpoint,
	e.position, e.event_id, e.event_type, e.instance_id, e.message
FROM {{schema}}.definitions d
LEFT JOIN {{schema}}.projection_errors e ON e.name = d.name
ORDER BY d.name COLLATE "C", e.id`),
		deleteDef:      q(`DELETE FROM {{schema}}.definitions WHERE name = $1`),
		resetDef:       q(`UPDATE {{schema}}.definitions SET checkpoint = 0, instances = 0 WHERE name = $1`),
		renameDef:      q(`UPDATE {{schema}}.definitions SET name = $2 WHERE name = $1`),
		updateSpec:     q(`UPDATE {{schema}}.definitions SET spec = $3 WHERE name = $1 AND spec = $2`),
		deleteStatesOf: q(`DELETE FROM {{schema}}.projection_states WHERE name = $1`),
		deleteErrorsOf: q(`DELETE FROM {{schema}}.projection_errors WHERE name = $1`),
		renameStatesOf: q(`UPDATE {{schema}}.projection_states SET name = $2 WHERE name = $1`),
		renameErrorsOf: q(`UPDATE {{schema}}.projection_errors SET name = $2 WHERE name = $1`),
		loadState: q(`SELECT ` + stateCols + ` FROM {{schema}}.projection_states
WHERE name = $1 AND instance_id = $2`),
		loadStates: q(`SELECT ` + stateCols + ` FROM {{schema}}.projection_states
WHERE name = $1 AND instance_id = ANY($2::text[])`),
		countStates: q(`SELECT instances FROM {{schema}}.definitions WHERE name = $1`),
		// commit moves a definition's checkpoint from $2 to $3 when its
		// spec is $4 (any spec when NULL), and fails with
		// division_by_zero when it does not, so that the states that
		// follow it in CommitProjection's pipeline are rolled back with it.
		commit: q(`
WITH c AS (
	UPDATE {{schema}}.definitions SET checkpoint = $3
	WHERE name = $1 AND checkpoint = $2 AND ($4::bytea IS NULL OR spec = $4::bytea)
	RETURNING 1
)
SELECT 1 / (SELECT count(*)::int FROM c)`),
		checkpoint: q(`SELECT checkpoint FROM {{schema}}.definitions WHERE name = $1`),
		// upsertStates writes states and adds the number of new instances
		// to the definition's count. The indexed text ($11, words
		// separated by spaces) becomes a tsvector of exactly those words
		// (array_to_tsvector neither parses nor normalizes them); "" is
		// NULL, no indexed text.
		upsertStates: q(`
WITH up AS (
	INSERT INTO {{schema}}.projection_states
		(name, instance_id, data, position, created_at, updated_at, ref_rank, ref_num, ref_text, ref_number, search)
	SELECT $1, t.instance_id, t.data, t.position, t.created_at, t.updated_at, t.ref_rank, t.ref_num, t.ref_text, t.ref_number,
		array_to_tsvector(string_to_array(nullif(t.search, ''), ' '))
	FROM unnest($2::text[], $3::bytea[], $4::bigint[], $5::timestamptz[], $6::timestamptz[], $7::smallint[],
		$8::float8[], $9::text[], $10::text[], $11::text[])
		AS t(instance_id, data, position, created_at, updated_at, ref_rank, ref_num, ref_text, ref_number, search)
	ON CONFLICT (tenant, name, instance_id) DO UPDATE
	SET data = excluded.data, position = excluded.position, created_at = excluded.created_at,
	    updated_at = excluded.updated_at, ref_rank = excluded.ref_rank, ref_num = excluded.ref_num,
	    ref_text = excluded.ref_text, ref_number = excluded.ref_number, search = excluded.search
	RETURNING row_xmax = 0 AS inserted
)
UPDATE {{schema}}.definitions SET instances = instances + (SELECT count(*) FROM up WHERE inserted)
WHERE name = $1`),
		// deleteStates removes instances and subtracts them from the
		// definition's count.
		deleteStates: q(`
WITH del AS (
	DELETE FROM {{schema}}.projection_states WHERE name = $1 AND instance_id = ANY($2::text[])
	RETURNING 1
)
UPDATE {{schema}}.definitions SET instances = instances - (SELECT count(*) FROM del)
WHERE name = $1`),
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

// deleteSQL is the statement of deleteAgg and deleteType: it deletes the
// events that where selects, raises the marks of feed ” and of the type
// ($1) to the highest position and FeedSequence deleted, and returns how
// many events it deleted.
func deleteSQL(where string) string {
	return `
WITH del AS (
	DELETE FROM {{schema}}.events WHERE ` + where + `
	RETURNING position, feed_sequence
), marks AS (
	INSERT INTO {{schema}}.deleted_marks (feed, mark)
	SELECT '', max(position) FROM del HAVING count(*) > 0
	UNION ALL
	SELECT $1, max(feed_sequence) FROM del HAVING count(*) > 0
	ON CONFLICT (tenant, feed) DO UPDATE SET mark = greatest({{schema}}.deleted_marks.mark, excluded.mark)
)
SELECT count(*) FROM del`
}
