-- A database written by schema version 1 (storage/sqlite before migration 2):
-- sqlite3 .dump of a file filled through Append, CreateDefinition and CommitProjection.
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
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
INSERT INTO events VALUES(1,'order','1','00000000-0000-4000-8000-000000000001','Happened',X'7b226e223a317d',1,1,1767323046000006);
INSERT INTO events VALUES(2,'order','1','00000000-0000-4000-8000-000000000002','Happened',X'7b226e223a327d',1,2,1767323047000006);
INSERT INTO events VALUES(3,'invoice','9','00000000-0000-4000-8000-000000000003','Happened',X'7b226e223a337d',1,1,1767323048000006);
INSERT INTO events VALUES(4,'invoice','9','00000000-0000-4000-8000-000000000004','Happened',X'7b226e223a347d',1,2,1767323049000006);
INSERT INTO events VALUES(5,'invoice','9','00000000-0000-4000-8000-000000000005','Happened',X'7b226e223a357d',1,3,1767323050000006);
INSERT INTO events VALUES(6,'order','1','00000000-0000-4000-8000-000000000006','Happened',X'7b226e223a367d',2,3,1767323051000006);
INSERT INTO events VALUES(7,'order','2','00000000-0000-4000-8000-000000000007','Happened',X'7b226e223a377d',1,1,1767323052000006);
INSERT INTO events VALUES(8,'order','1','00000000-0000-4000-8000-000000000008','Happened',X'7b226e223a387d',3,4,1767323053000006);
INSERT INTO events VALUES(9,'order','1','00000000-0000-4000-8000-000000000009','Happened',X'7b226e223a397d',3,5,1767323054000006);
CREATE TABLE definitions (
	name       TEXT    PRIMARY KEY,
	spec       BLOB    NOT NULL,
	created_at INTEGER NOT NULL,       -- microseconds since the Unix epoch, UTC
	checkpoint INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
INSERT INTO definitions VALUES('totals',X'7b2276223a317d',1767323045000006,9);
CREATE TABLE projection_states (
	name        TEXT    NOT NULL REFERENCES definitions (name),
	instance_id TEXT    NOT NULL,
	data        BLOB    NOT NULL,
	position    INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,      -- microseconds since the Unix epoch, UTC
	PRIMARY KEY (name, instance_id)
) WITHOUT ROWID;
INSERT INTO projection_states VALUES('totals','1',X'7b226e223a357d',9,1767323054000006);
INSERT INTO projection_states VALUES('totals','2',X'7b226e223a317d',7,1767323052000006);
CREATE TABLE projection_errors (
	id          INTEGER PRIMARY KEY,   -- insertion order
	name        TEXT    NOT NULL REFERENCES definitions (name),
	position    INTEGER NOT NULL,
	event_id    TEXT    NOT NULL,
	event_type  TEXT    NOT NULL,
	instance_id TEXT    NOT NULL,
	message     TEXT    NOT NULL
);
INSERT INTO projection_errors VALUES(1,'totals',3,'e','Happened','1','bad');
CREATE INDEX events_by_type ON events (aggregate_type, position);
CREATE INDEX projection_errors_by_name ON projection_errors (name, id);
COMMIT;
PRAGMA user_version = 1;
