package postgres

import (
	"context"
	"fmt"

	"github.com/eventkit-go/eventstore/internal/upgrade"
	"github.com/jackc/pgx/v5"
)

// migrations are the schema versions, in order: migrations[i] brings the
// schema from version i to version i+1. Never edit a released migration;
// append a new one, with its kind: upgrade.Expand when a process of the
// version before can keep running beside it, else upgrade.Contract, which
// migrate refuses to run while a live process of an older version is
// recorded (docs/upgrades.md lists every migration's kind and why).
//
// Event data, definition specs and projection states are bytea so that the
// bytes given are the bytes returned (jsonb would normalise them).
var migrations = []migration{
	// 1: the initial schema.
	{upgrade.Expand, `
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
`},
	// 2: feed sequences, encrypted data, high-water marks that survive
	// deletion, and what projection lists sort and filter on.
	//
	// events.feed_sequence numbers the batches of each aggregate type;
	// existing batches (the events of one aggregate version) are numbered
	// in position order. deleted_marks keeps, per feed, the highest number
	// ever deleted: for feed '' the highest position, for an aggregate
	// type its highest FeedSequence; writers continue after
	// greatest(what is stored, the mark), so numbers are never reused.
	//
	// projection_states gains created_at (set to updated_at for existing
	// instances, the best known) and the reference: ref_rank (0 number, 1
	// text, 2 none, the order of storage.Reference), ref_num (the number,
	// else 0), ref_text (the text, else ''), ref_number (the decimal text of
	// a number, else NULL). instance_id and ref_text sort by bytes (COLLATE
	// "C") whatever the database's collation. definitions.instances counts
	// the instances, so an unfiltered count reads one row.
	{upgrade.Contract, `
ALTER TABLE {{schema}}.events ADD COLUMN feed_sequence bigint, ADD COLUMN encrypted_data text;
UPDATE {{schema}}.events e SET feed_sequence = b.fs
FROM (
	SELECT position, dense_rank() OVER (PARTITION BY aggregate_type ORDER BY first) AS fs
	FROM (
		SELECT position, aggregate_type,
		       min(position) OVER (PARTITION BY aggregate_type, aggregate_id, version) AS first
		FROM {{schema}}.events
	) x
) b
WHERE e.position = b.position;
ALTER TABLE {{schema}}.events ALTER COLUMN feed_sequence SET NOT NULL;
CREATE INDEX events_type_feed ON {{schema}}.events (aggregate_type, feed_sequence);

CREATE TABLE {{schema}}.deleted_marks (
	feed text   PRIMARY KEY,
	mark bigint NOT NULL
);

ALTER TABLE {{schema}}.definitions ADD COLUMN instances bigint NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.projection_states
	ALTER COLUMN instance_id TYPE text COLLATE "C",
	ADD COLUMN created_at timestamptz,
	ADD COLUMN ref_rank   smallint         NOT NULL DEFAULT 2,
	ADD COLUMN ref_num    double precision NOT NULL DEFAULT 0,
	ADD COLUMN ref_text   text COLLATE "C" NOT NULL DEFAULT '',
	ADD COLUMN ref_number text;
UPDATE {{schema}}.projection_states SET created_at = updated_at;
ALTER TABLE {{schema}}.projection_states ALTER COLUMN created_at SET NOT NULL;
UPDATE {{schema}}.definitions d
SET instances = (SELECT count(*) FROM {{schema}}.projection_states s WHERE s.name = d.name);
CREATE INDEX projection_states_ref ON {{schema}}.projection_states (name, ref_rank, ref_num, ref_text, instance_id);
CREATE INDEX projection_states_created ON {{schema}}.projection_states (name, created_at, instance_id);
CREATE INDEX projection_states_updated ON {{schema}}.projection_states (name, updated_at, instance_id);
`},
	// 3: one index entry per aggregate, for ListAggregates: the first
	// event (sequence 1) of each aggregate, by type and id in byte order
	// (COLLATE "C", whatever the database's collation), with its
	// recorded_at, the aggregate's creation time. Only an aggregate's
	// first append writes an entry.
	{upgrade.Expand, `
CREATE INDEX events_aggregates ON {{schema}}.events (aggregate_type, aggregate_id COLLATE "C") INCLUDE (recorded_at)
WHERE sequence = 1;
`},
	// 4: reads of the feed, and of a type's feed, by the time the events
	// were recorded (storage.FeedQuery.From and To). The position ends
	// each entry, so a read after a position filters in the index.
	{upgrade.Expand, `
CREATE INDEX events_recorded ON {{schema}}.events (recorded_at, position);
CREATE INDEX events_type_recorded ON {{schema}}.events (aggregate_type, recorded_at, position);
`},
	// 5: projection search. search holds the words of an instance's
	// indexed fields as a tsvector of exactly those words (no parser, no
	// dictionary), NULL when it has none; a GIN index answers prefix
	// queries ('word':*) on it. Built in: no extension is needed. New
	// entries wait in the index's pending list, which every search reads
	// whole until a flush: 128 kB (not the default 4 MB) keeps that read
	// well under a millisecond while inserts still go in batches (a
	// search of 100,000 instances took 10-60 ms with 4 MB before a
	// VACUUM, and fastupdate = off made rebuilds 1.4x slower).
	{upgrade.Expand, `
ALTER TABLE {{schema}}.projection_states ADD COLUMN search tsvector;
CREATE INDEX projection_states_search ON {{schema}}.projection_states USING gin (search) WITH (gin_pending_list_limit = 128)
WHERE search IS NOT NULL;
`},
	// 6: appends commit side by side (docs/appends-side-by-side.md).
	// Positions come from the sequence positions, taken in blocks under
	// the append lock, which a writer releases before its COMMIT, so that
	// the commits of writers in many processes overlap; a rolled-back or
	// refused append leaves its numbers unused. events.tx is the id of
	// the transaction that appended the row (0 for rows older than this
	// migration, all committed): feed readers return only rows of
	// transactions below the store's watermark. The sequence continues
	// after every position stored or deleted.
	{upgrade.Contract, `
ALTER TABLE {{schema}}.events ADD COLUMN tx bigint NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.events ALTER COLUMN tx DROP DEFAULT;
CREATE SEQUENCE {{schema}}.positions AS bigint MINVALUE 1;
SELECT setval({{positions}}, greatest(
	(SELECT coalesce(max(position), 0) FROM {{schema}}.events),
	(SELECT coalesce(max(mark), 0) FROM {{schema}}.deleted_marks WHERE feed = '')) + 1, false);
`},
	// 7: reactions (storage.ReactionStorage). Times
	// are Unix microseconds, 0 for none. reactions_due holds only the
	// pending and ongoing reactions, so claiming what is due (FOR UPDATE
	// SKIP LOCKED) reads the index of the active ones and nothing else.
	{upgrade.Expand, `
CREATE TABLE {{schema}}.reaction_definitions (
	name       text   PRIMARY KEY,
	spec       bytea  NOT NULL,
	created_at bigint NOT NULL,
	checkpoint bigint NOT NULL
);
CREATE TABLE {{schema}}.reactions (
	id             text     PRIMARY KEY,
	definition     text     NOT NULL,
	aggregate_type text     NOT NULL,
	aggregate_id   text     NOT NULL,
	event_id       text     NOT NULL,
	event_type     text     NOT NULL,
	state          smallint NOT NULL,
	created_at     bigint   NOT NULL,
	trigger_at     bigint   NOT NULL,
	due_at         bigint   NOT NULL,
	finished_at    bigint   NOT NULL,
	attempts       integer  NOT NULL,
	claim          text     NOT NULL,
	last_error     text     NOT NULL,
	payload        bytea    NOT NULL
);
CREATE INDEX reactions_due ON {{schema}}.reactions (due_at, id) WHERE state IN (0, 1);
CREATE INDEX reactions_pending ON {{schema}}.reactions (definition, aggregate_id) WHERE state = 0;
CREATE INDEX reactions_trigger ON {{schema}}.reactions (trigger_at, id COLLATE "C");
CREATE INDEX reactions_aggregate ON {{schema}}.reactions (aggregate_type, aggregate_id);
`},
	// 8: tenants share the tables (docs/tenants-postgres.md). Each table
	// becomes TABLE_rows with a first column tenant (the schema's own
	// rows get DefaultTenant) leading every key and index, and TABLE a
	// view of the rows of the tenant set in eventstore.tenant, which
	// every statement goes through; the view checks that a row written
	// through it is that tenant's, the column's default. Reading the
	// setting without missing_ok makes a statement run without it fail.
	// A migration that adds a column to a table must recreate its view.
	// projection_states' view shows xmax as row_xmax, for upsertStates.
	// The GIN index of search spans the tenants (a btree column cannot
	// lead it without an extension); the rest of a search's condition
	// picks the tenant's rows.
	{upgrade.Contract, `
ALTER TABLE {{schema}}.events RENAME TO events_rows;
ALTER TABLE {{schema}}.events_rows ADD COLUMN tenant uuid NOT NULL DEFAULT '` + DefaultTenant + `';
ALTER TABLE {{schema}}.events_rows ALTER COLUMN tenant SET DEFAULT {{tenant}},
	DROP CONSTRAINT events_pkey,
	DROP CONSTRAINT events_aggregate_type_aggregate_id_sequence_key,
	DROP CONSTRAINT events_aggregate_type_aggregate_id_event_id_key,
	ADD CONSTRAINT events_pkey PRIMARY KEY (tenant, position),
	ADD CONSTRAINT events_aggregate_sequence_key UNIQUE (tenant, aggregate_type, aggregate_id, sequence),
	ADD CONSTRAINT events_aggregate_event_id_key UNIQUE (tenant, aggregate_type, aggregate_id, event_id);
DROP INDEX {{schema}}.events_type_position, {{schema}}.events_type_feed, {{schema}}.events_aggregates,
	{{schema}}.events_recorded, {{schema}}.events_type_recorded;
CREATE INDEX events_type_position ON {{schema}}.events_rows (tenant, aggregate_type, position);
CREATE INDEX events_type_feed ON {{schema}}.events_rows (tenant, aggregate_type, feed_sequence);
CREATE INDEX events_aggregates ON {{schema}}.events_rows (tenant, aggregate_type, aggregate_id COLLATE "C") INCLUDE (recorded_at)
WHERE sequence = 1;
CREATE INDEX events_recorded ON {{schema}}.events_rows (tenant, recorded_at, position);
CREATE INDEX events_type_recorded ON {{schema}}.events_rows (tenant, aggregate_type, recorded_at, position);
CREATE VIEW {{schema}}.events AS
SELECT position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at,
       feed_sequence, encrypted_data, tx, tenant
FROM {{schema}}.events_rows WHERE tenant = {{tenant}} WITH CHECK OPTION;

ALTER TABLE {{schema}}.definitions RENAME TO definitions_rows;
ALTER TABLE {{schema}}.definitions_rows ADD COLUMN tenant uuid NOT NULL DEFAULT '` + DefaultTenant + `';
ALTER TABLE {{schema}}.definitions_rows ALTER COLUMN tenant SET DEFAULT {{tenant}},
	DROP CONSTRAINT definitions_pkey, ADD CONSTRAINT definitions_pkey PRIMARY KEY (tenant, name);
CREATE VIEW {{schema}}.definitions AS
SELECT name, spec, created_at, checkpoint, instances, tenant
FROM {{schema}}.definitions_rows WHERE tenant = {{tenant}} WITH CHECK OPTION;

ALTER TABLE {{schema}}.projection_states RENAME TO projection_states_rows;
ALTER TABLE {{schema}}.projection_states_rows ADD COLUMN tenant uuid NOT NULL DEFAULT '` + DefaultTenant + `';
ALTER TABLE {{schema}}.projection_states_rows ALTER COLUMN tenant SET DEFAULT {{tenant}},
	DROP CONSTRAINT projection_states_pkey, ADD CONSTRAINT projection_states_pkey PRIMARY KEY (tenant, name, instance_id);
DROP INDEX {{schema}}.projection_states_ref, {{schema}}.projection_states_created, {{schema}}.projection_states_updated;
CREATE INDEX projection_states_ref ON {{schema}}.projection_states_rows (tenant, name, ref_rank, ref_num, ref_text, instance_id);
CREATE INDEX projection_states_created ON {{schema}}.projection_states_rows (tenant, name, created_at, instance_id);
CREATE INDEX projection_states_updated ON {{schema}}.projection_states_rows (tenant, name, updated_at, instance_id);
CREATE VIEW {{schema}}.projection_states AS
SELECT name, instance_id, data, position, updated_at, created_at, ref_rank, ref_num, ref_text, ref_number, search,
       tenant, xmax AS row_xmax
FROM {{schema}}.projection_states_rows WHERE tenant = {{tenant}} WITH CHECK OPTION;

ALTER TABLE {{schema}}.projection_errors RENAME TO projection_errors_rows;
ALTER TABLE {{schema}}.projection_errors_rows ADD COLUMN tenant uuid NOT NULL DEFAULT '` + DefaultTenant + `';
ALTER TABLE {{schema}}.projection_errors_rows ALTER COLUMN tenant SET DEFAULT {{tenant}};
DROP INDEX {{schema}}.projection_errors_name_id;
CREATE INDEX projection_errors_name_id ON {{schema}}.projection_errors_rows (tenant, name, id);
CREATE VIEW {{schema}}.projection_errors AS
SELECT id, name, position, event_id, event_type, instance_id, message, tenant
FROM {{schema}}.projection_errors_rows WHERE tenant = {{tenant}} WITH CHECK OPTION;

ALTER TABLE {{schema}}.deleted_marks RENAME TO deleted_marks_rows;
ALTER TABLE {{schema}}.deleted_marks_rows ADD COLUMN tenant uuid NOT NULL DEFAULT '` + DefaultTenant + `';
ALTER TABLE {{schema}}.deleted_marks_rows ALTER COLUMN tenant SET DEFAULT {{tenant}},
	DROP CONSTRAINT deleted_marks_pkey, ADD CONSTRAINT deleted_marks_pkey PRIMARY KEY (tenant, feed);
CREATE VIEW {{schema}}.deleted_marks AS
SELECT feed, mark, tenant
FROM {{schema}}.deleted_marks_rows WHERE tenant = {{tenant}} WITH CHECK OPTION;

ALTER TABLE {{schema}}.reaction_definitions RENAME TO reaction_definitions_rows;
ALTER TABLE {{schema}}.reaction_definitions_rows ADD COLUMN tenant uuid NOT NULL DEFAULT '` + DefaultTenant + `';
ALTER TABLE {{schema}}.reaction_definitions_rows ALTER COLUMN tenant SET DEFAULT {{tenant}},
	DROP CONSTRAINT reaction_definitions_pkey, ADD CONSTRAINT reaction_definitions_pkey PRIMARY KEY (tenant, name);
CREATE VIEW {{schema}}.reaction_definitions AS
SELECT name, spec, created_at, checkpoint, tenant
FROM {{schema}}.reaction_definitions_rows WHERE tenant = {{tenant}} WITH CHECK OPTION;

ALTER TABLE {{schema}}.reactions RENAME TO reactions_rows;
ALTER TABLE {{schema}}.reactions_rows ADD COLUMN tenant uuid NOT NULL DEFAULT '` + DefaultTenant + `';
ALTER TABLE {{schema}}.reactions_rows ALTER COLUMN tenant SET DEFAULT {{tenant}},
	DROP CONSTRAINT reactions_pkey, ADD CONSTRAINT reactions_pkey PRIMARY KEY (tenant, id);
DROP INDEX {{schema}}.reactions_due, {{schema}}.reactions_pending, {{schema}}.reactions_trigger,
	{{schema}}.reactions_aggregate;
CREATE INDEX reactions_due ON {{schema}}.reactions_rows (tenant, due_at, id) WHERE state IN (0, 1);
CREATE INDEX reactions_pending ON {{schema}}.reactions_rows (tenant, definition, aggregate_id) WHERE state = 0;
CREATE INDEX reactions_trigger ON {{schema}}.reactions_rows (tenant, trigger_at, id COLLATE "C");
CREATE INDEX reactions_aggregate ON {{schema}}.reactions_rows (tenant, aggregate_type, aggregate_id);
CREATE VIEW {{schema}}.reactions AS
SELECT id, definition, aggregate_type, aggregate_id, event_id, event_type, state, created_at, trigger_at, due_at,
       finished_at, attempts, claim, last_error, payload, tenant
FROM {{schema}}.reactions_rows WHERE tenant = {{tenant}} WITH CHECK OPTION;
`},
	// 9: one index less per appended event. Since version 6 a batch's
	// FeedSequence is its first position, so within a type FeedSequences
	// follow positions and every row has position >= feed_sequence:
	// reading a type's feed after a FeedSequence scans events_type_position
	// from that number on. Rows older than version 6 (tx = 0) were
	// numbered per type (1, 2, 3, ...), far below their positions; a
	// partial index of those rows alone, which appends never write to,
	// finds where a cursor among them starts.
	{upgrade.Expand, `
DROP INDEX {{schema}}.events_type_feed;
CREATE INDEX events_type_feed_before_v6 ON {{schema}}.events_rows (tenant, aggregate_type, feed_sequence)
WHERE tx = 0;
`},
	// 10: deliveries write fewer index entries (docs/reactions-save-rate.md).
	// The pending and ongoing reactions are queued in reaction_queue,
	// a narrow table that claims scan, and reactions keeps no index on
	// a column a delivery changes (state, due_at, claim, attempts,
	// finished_at, last_error), so that a claim and an outcome record
	// update a reaction in place (a HOT update: no index entry, a WAL
	// record of the changed bytes) where its page has room, which the
	// fill factor leaves. A row of the queue exists exactly while its
	// reaction's state is 0 or 1, with the same state and due_at; every
	// statement that changes both locks the row of the queue first.
	{upgrade.Contract, `
CREATE TABLE {{schema}}.reaction_queue_rows (
	tenant       uuid     NOT NULL DEFAULT {{tenant}},
	id           text     NOT NULL,
	definition   text     NOT NULL,
	aggregate_id text     NOT NULL,
	state        smallint NOT NULL,
	due_at       bigint   NOT NULL,
	PRIMARY KEY (tenant, id)
);
INSERT INTO {{schema}}.reaction_queue_rows (tenant, id, definition, aggregate_id, state, due_at)
SELECT tenant, id, definition, aggregate_id, state, due_at FROM {{schema}}.reactions_rows WHERE state IN (0, 1);
CREATE INDEX reaction_queue_due ON {{schema}}.reaction_queue_rows (tenant, due_at, id);
CREATE INDEX reaction_queue_pending ON {{schema}}.reaction_queue_rows (tenant, definition, aggregate_id) WHERE state = 0;
CREATE VIEW {{schema}}.reaction_queue AS
SELECT id, definition, aggregate_id, state, due_at, tenant
FROM {{schema}}.reaction_queue_rows WHERE tenant = {{tenant}} WITH CHECK OPTION;
DROP INDEX {{schema}}.reactions_due, {{schema}}.reactions_pending;
ALTER TABLE {{schema}}.reactions_rows SET (fillfactor = 70);
`},
	// 11: fewer bytes per stored event (issue 37). events_type_recorded
	// (tenant, type, time, position: 93 bytes of index per event, an
	// eighth of what an event cost on disk) served only reads of a type's
	// feed by date (FeedQuery.From and To with an AggregateType), which
	// events_recorded serves too: it reads the window's events of every
	// type and keeps the type's, so such a read of a type holding a share s
	// of the window's events looks at 1/s times the rows it returns. Older
	// processes run beside this one: no statement changes, only the plan of
	// that read.
	{upgrade.Expand, `
DROP INDEX {{schema}}.events_type_recorded;
`},
	// 12: snapshots (storage.Snapshot), at most one per aggregate, in a
	// table of rows of every tenant with a view per tenant, as the others
	// (version 8). Nothing else changes: a process of version 11 still
	// running beside one of this version goes on working (it never reads
	// the table), though its deletions leave snapshots behind, which a
	// recreated aggregate could then load; upgrade all processes of a
	// schema together. A process of version 11 started after the
	// migration refuses the schema, as it refuses any newer one.
	{upgrade.Contract, `
CREATE TABLE {{schema}}.snapshots_rows (
	tenant         uuid        NOT NULL DEFAULT {{tenant}},
	aggregate_type text        NOT NULL,
	aggregate_id   text        NOT NULL,
	version        bigint      NOT NULL,
	state_version  bigint      NOT NULL,
	data           bytea       NOT NULL,
	recorded_at    timestamptz NOT NULL,
	PRIMARY KEY (tenant, aggregate_type, aggregate_id)
);
CREATE VIEW {{schema}}.snapshots AS
SELECT aggregate_type, aggregate_id, version, state_version, data, recorded_at, tenant
FROM {{schema}}.snapshots_rows WHERE tenant = {{tenant}} WITH CHECK OPTION;
`},
	// 13: event metadata, as storage.AppendMetadata encodes it (compact
	// JSON, kept as text so that it reads back byte for byte), NULL when
	// the event has none; the view shows the new column last. A process
	// of version 12 can run beside it: its statements name their columns
	// (its inserts leave metadata NULL, its reads do not select it), so
	// it goes on working, though the events it saves carry no metadata;
	// only its Open refuses the newer schema.
	{upgrade.Expand, `
ALTER TABLE {{schema}}.events_rows ADD COLUMN metadata text;
CREATE OR REPLACE VIEW {{schema}}.events AS
SELECT position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at,
       feed_sequence, encrypted_data, tx, tenant, metadata
FROM {{schema}}.events_rows WHERE tenant = {{tenant}} WITH CHECK OPTION;
`},
	// 14: the processes that have the schema open (docs/upgrades.md): one
	// row per process (per pool, within a process) with the schema version
	// it runs against, refreshed every HeartbeatInterval and deleted when
	// its last Storage closes; a row not refreshed for HeartbeatTimeout is
	// dead. A contract migration refuses to run while a live row of an
	// older version exists. The table spans the tenants (a process is not
	// a tenant's), so that a process holding many tenants keeps one row.
	// Older processes run beside it: they never read the table.
	{upgrade.Expand, `
CREATE TABLE {{schema}}.processes (
	id         uuid        PRIMARY KEY,
	host       text        NOT NULL,
	pid        integer     NOT NULL,
	started_at timestamptz NOT NULL,
	version    integer     NOT NULL,
	last_seen  timestamptz NOT NULL
);
`},
	// 15: fewer bytes per stored event (issue 37). An event id is unique
	// within its aggregate; events_aggregate_event_id_key kept that with
	// entries of the tenant, type, aggregate id and event id (115-126
	// bytes of index per event in the growth benchmark, whose aggregate
	// ids have 8 characters; about 150 with UUIDs for both ids), used by
	// nothing but that check and the look-up of an append's ids already
	// stored. events_event_key keeps it with one 16-byte key per event
	// (about 40 bytes of index per event): 48 bits of the MD5 of the
	// tenant, type and aggregate id, so that the keys of an aggregate's
	// events lie together as before (a save of 10 events writes one leaf
	// page of the index, not 10), then 80 bits of the MD5 of the four (an
	// injective encoding: the tenant's text has a fixed length, the type
	// and the aggregate id are preceded by theirs). Appends look their ids
	// up by the key and the id (eventKey in statements.go), so a collision
	// of keys never passes one event for another: it could only refuse a
	// save as a conflict, which by accident takes two events of one
	// aggregate agreeing in 80 bits (odds of 10^-8 for an aggregate of 100
	// million events), and on purpose MD5 collisions made by the one who
	// saves both events, refusing only their own.
	//
	// A process of version 14 can keep running beside this one: its
	// appends of an id already stored still fail with unique_violation
	// (nothing reads the constraint's name), and its look-ups of stored
	// ids find them through events_aggregate_sequence_key and a filter
	// (reading the aggregate's entries: slower for long aggregates); only
	// its Open refuses the newer schema. The index is built inside the
	// migration's transaction, appends waiting meanwhile: 31 s per
	// million events on the shared 2-core machine at a load average of 30.
	{upgrade.Expand, `
CREATE UNIQUE INDEX events_event_key ON {{schema}}.events_rows ((
	(left(md5(tenant::text || length(aggregate_type)::text || ':' || aggregate_type || aggregate_id), 12) ||
	right(md5(tenant::text || length(aggregate_type)::text || ':' || aggregate_type || length(aggregate_id)::text || ':' ||
	aggregate_id || event_id), 20))::uuid));
ALTER TABLE {{schema}}.events_rows DROP CONSTRAINT events_aggregate_event_id_key;
`},
	// 16: fewer bytes per stored event (issue 37). events_type_position
	// (tenant, type, position) served a type's feed and its head; its
	// entries of 40 bytes filled its pages to about half (82 bytes of index
	// per event at 1M and 3M in the growth benchmark): an insert at the end
	// of a type's range that is not the end of the index splits the page
	// in two halves, and PostgreSQL's rising-insert heuristic, which
	// splits such a page at its fill factor instead, applies only to
	// entries of at most 16 bytes of keys. events_type_key keeps a type's
	// entries together by 32-bit hashes of the tenant and of the type
	// (typeKeyCols in statements.go), then the position: 16-byte keys,
	// pages filled to 90 % (about 32 bytes of index per event). Reads of a
	// type compare the hashes and the type (and, through the view, the
	// tenant), so a collision of hashes only makes a read skip the rows of
	// the other tenant or type.
	//
	// A process of version 15 can keep running beside this one: its
	// statements compare the type without the hashes, so its reads of a
	// type's feed read the tenant's feed (events_pkey) and filter the type,
	// or scan the table: slower, not wrong; only its Open refuses the
	// newer schema. The index is built inside the migration's transaction,
	// appends waiting meanwhile.
	{upgrade.Expand, `
CREATE INDEX events_type_key ON {{schema}}.events_rows (` + typeKeyCols + `, position);
DROP INDEX {{schema}}.events_type_position;
`},
	// 17: fewer bytes per stored event (issue 37). events_recorded
	// (tenant, recorded_at, position: 40-byte entries, 48-50 bytes of
	// index per event) served reads by date; events_recorded_time serves
	// them with a 32-bit hash of the tenant (tenantHash in statements.go)
	// and the time: 16-byte entries, about 32 bytes per event. A read by
	// date after a position now checks the position in the table's row,
	// not in the index entry: a read of a window whose earlier events it
	// returned already looks at them again, as it did in the index. Reads
	// compare the tenant through the view, so a collision of hashes only
	// makes a read look at another tenant's entries of the window.
	//
	// A process of version 16 can keep running beside this one: its reads
	// by date do not compare the hash, so they read the tenant's feed
	// (events_pkey) and filter the window: slower, not wrong; only its Open
	// refuses the newer schema. The index is built inside the migration's
	// transaction, appends waiting meanwhile.
	{upgrade.Expand, `
CREATE INDEX events_recorded_time ON {{schema}}.events_rows ((` + tenantHash + `), recorded_at);
DROP INDEX {{schema}}.events_recorded;
`},
	// 18: fewer bytes per stored event (issue 37). The constraint
	// events_aggregate_sequence_key (tenant, type, aggregate id,
	// sequence) kept a sequence unique within its aggregate and served
	// every read of one aggregate (loads, the head an append writes
	// after, deletions, snapshots): entries of the tenant's 16 bytes, the
	// type and the id as text and the sequence, 52 bytes and more (76 in
	// the growth benchmark per event, about 120 with UUID aggregate ids).
	// events_aggregate_key keeps the same uniqueness with the aggregate's
	// key (aggKey in statements.go: the MD5 of the tenant, type and id, in
	// eventKey's injective encoding) and the sequence: 24 bytes of keys
	// whatever the ids' length (52 bytes per event in the growth
	// benchmark). Reads compare the key and then the real type and id
	// (sameAggregate), so a collision of keys never returns another
	// aggregate's events; it could only refuse a save as a conflict, which
	// takes two aggregates agreeing in 128 bits of MD5: by accident, odds
	// of 10^-21 for a billion aggregates; on purpose, MD5 collisions made
	// by the one who names both aggregates, refusing only their own.
	//
	// A contract migration: a process of version 17 reads an aggregate by
	// its type and id without the key, which no index serves any longer,
	// so each of its saves and loads would read the whole table. The
	// index is built inside the migration's transaction, appends waiting
	// meanwhile.
	{upgrade.Contract, `
CREATE UNIQUE INDEX events_aggregate_key ON {{schema}}.events_rows ((` + aggKeyOfRow + `), sequence);
ALTER TABLE {{schema}}.events_rows DROP CONSTRAINT events_aggregate_sequence_key;
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
	// noMigrate refuses a schema older than list, or none, instead of
	// migrating it.
	noMigrate bool
	// record, when set, is the heartbeat row to write in the migration's
	// transaction (heartbeat.go), so that no migration that must not run
	// beside this process can start between the check and the row.
	record *heartbeat
}

// migrate creates schema and brings its tables to the latest version, in
// one transaction under an advisory lock, so that several processes opening
// the same schema at once do not trip over each other. It returns the
// version it found and the version it left.
// db is a pool, or a transaction, in which migrate runs in a savepoint.
func migrate(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, schema string, opts migrateOptions) (from, to int, err error) {
	if opts.list == nil {
		opts.list = migrations
	}
	latest := len(opts.list)
	quoted := pgx.Identifier{schema}.Sanitize()
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
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
		if err := tx.QueryRow(ctx, qualify(quoted,
			`SELECT coalesce(max(version), 0) FROM {{schema}}.schema_migrations`)).Scan(&from); err != nil {
			return err
		}
		to = from
		switch {
		case from > latest:
			return fmt.Errorf("schema %s: %w", schema, upgrade.Newer(from, latest))
		case from < latest && opts.noMigrate:
			return fmt.Errorf("schema %s: %w", schema, upgrade.Older(from, latest))
		}
		for v := from + 1; v <= latest; v++ {
			if opts.list[v-1].kind == upgrade.Contract && from > 0 {
				if err := refuseBesideOlder(ctx, tx, quoted, v); err != nil {
					return fmt.Errorf("schema %s: %w", schema, err)
				}
			}
			if _, err := tx.Exec(ctx, qualify(quoted, opts.list[v-1].sql)); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, qualify(quoted,
				`INSERT INTO {{schema}}.schema_migrations (version) VALUES ($1)`), v); err != nil {
				return err
			}
			to = v
		}
		if opts.record != nil {
			return opts.record.insert(ctx, tx, latest)
		}
		return nil
	})
	return from, to, err
}
