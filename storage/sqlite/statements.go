package sqlite

import (
	"strings"
)

// stmtID names a statement of the append path, prepared once per write
// connection (see writeConn).
type stmtID int

const (
	stmtBegin stmtID = iota
	stmtCommit
	stmtRollback
	stmtSavepoint
	stmtRelease
	stmtRollbackTo
	stmtGroupSavepoint
	stmtGroupRelease
	stmtGroupRollbackTo
	stmtHead
	stmtStored
	stmtLastPosition
	stmtLastFeed
	stmtSaveFeed
	// stmtInsert+k inserts k+1 events with one statement.
	stmtInsert
	numStmts = stmtInsert + insertRows
)

// insertRows is the most events one INSERT statement writes; a batch of
// more is written in several.
const insertRows = 16

// insertColumns are the columns of an event row, in insert order.
const insertColumns = 11

// insertQuery returns the statement that inserts n events.
func insertQuery(n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", insertColumns), ", ") + ")"
	return `INSERT INTO events
		(position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at,
		 feed_sequence, encrypted_data)
		VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// lastPositionQuery is the highest position ever assigned: that of the
// last stored event, or the mark a deletion of the last events left.
const lastPositionQuery = `SELECT max(
	coalesce((SELECT max(position) FROM events), 0),
	coalesce((SELECT value FROM counters WHERE name = 'position'), 0))`

// query returns the text of statement id.
func query(id stmtID) string {
	switch id {
	case stmtBegin:
		// IMMEDIATE: take the write lock now, so that the reads of the
		// transaction see what it builds on.
		return `BEGIN IMMEDIATE`
	case stmtCommit:
		return `COMMIT`
	case stmtRollback:
		return `ROLLBACK`
	case stmtSavepoint:
		return `SAVEPOINT req`
	case stmtRelease:
		return `RELEASE req`
	case stmtRollbackTo:
		return `ROLLBACK TO req`
	case stmtGroupSavepoint:
		return `SAVEPOINT reqs`
	case stmtGroupRelease:
		return `RELEASE reqs`
	case stmtGroupRollbackTo:
		return `ROLLBACK TO reqs`
	case stmtHead:
		return `SELECT version, sequence FROM events
			WHERE aggregate_type = ? AND aggregate_id = ? ORDER BY sequence DESC LIMIT 1`
	case stmtStored:
		return `SELECT version, position FROM events
			WHERE aggregate_type = ? AND aggregate_id = ? AND event_id = ?`
	case stmtLastPosition:
		return lastPositionQuery
	case stmtLastFeed:
		return `SELECT feed_sequence FROM feeds WHERE aggregate_type = ?`
	case stmtSaveFeed:
		return `INSERT INTO feeds (aggregate_type, feed_sequence, aggregates, batches, events)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (aggregate_type) DO UPDATE SET
				feed_sequence = excluded.feed_sequence,
				aggregates = aggregates + excluded.aggregates,
				batches = batches + excluded.batches,
				events = events + excluded.events`
	}
	if id >= stmtInsert && id < numStmts {
		return insertQuery(int(id-stmtInsert) + 1)
	}
	panic("sqlite: unknown statement")
}
