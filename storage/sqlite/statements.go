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
	stmtCreateFeed
	stmtSettleFeed
	stmtAddFeed
	// stmtInsert+k inserts k+1 events with one statement.
	stmtInsert
	numStmts = stmtInsert + insertRows
)

// insertRows is the most events one INSERT statement writes; a batch of
// more is written in several.
const insertRows = 16

// insertColumns are the columns of an event row, in insert order.
const insertColumns = 12

// insertQuery returns the statement that inserts n events.
func insertQuery(n int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", insertColumns), ", ") + ")"
	return `INSERT INTO events
		(position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at,
		 feed_sequence, encrypted_data, metadata)
		VALUES ` + strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// lastPositionQuery is the highest position ever assigned: that of the
// last stored event, or the mark a deletion of the last events left.
const lastPositionQuery = `SELECT max(
	coalesce((SELECT max(position) FROM events), 0),
	coalesce((SELECT value FROM counters WHERE name = 'position'), 0))`

// A type's row in the feeds table is settled up to its feed_sequence: its
// counts are those of the batches up to there. The writer appends batches
// without touching the row, which saves a statement and a page write per
// commit; their events, at higher feed sequences, are counted from the
// events_by_feed index by whoever needs the counts (Feeds) or the head
// (FeedHead), until the writer settles the row (every settleEvery batches)
// or a deletion does (before it removes events). The row is created, and
// settled, by the type's first append.

// latestFeedSequence, in a query on the feeds table, is the feed sequence
// of the type's latest stored batch, or 0.
const latestFeedSequence = `coalesce((SELECT max(e.feed_sequence) FROM events e
	WHERE e.aggregate_type = feeds.aggregate_type), 0)`

// settleFeedQuery adds the batches past a type's settled feed sequence to
// its counts and moves the settled feed sequence to the latest. (SET reads
// the row as it was before the update.)
const settleFeedQuery = `UPDATE feeds SET
	aggregates = aggregates + (SELECT count(DISTINCT e.feed_sequence) FROM events e
		WHERE e.aggregate_type = feeds.aggregate_type AND e.feed_sequence > feeds.feed_sequence AND e.version = 1),
	batches = batches + (SELECT count(DISTINCT e.feed_sequence) FROM events e
		WHERE e.aggregate_type = feeds.aggregate_type AND e.feed_sequence > feeds.feed_sequence),
	events = events + (SELECT count(*) FROM events e
		WHERE e.aggregate_type = feeds.aggregate_type AND e.feed_sequence > feeds.feed_sequence),
	feed_sequence = max(feed_sequence, ` + latestFeedSequence + `)
	WHERE aggregate_type = ?`

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
		return `SELECT version, position, event_type, data, coalesce(encrypted_data, ''), coalesce(metadata, '') FROM events
			WHERE aggregate_type = ? AND aggregate_id = ? AND event_id = ?`
	case stmtLastPosition:
		return lastPositionQuery
	case stmtLastFeed:
		return `SELECT feed_sequence, ` + latestFeedSequence + ` FROM feeds WHERE aggregate_type = ?`
	case stmtCreateFeed:
		return `INSERT INTO feeds (aggregate_type, feed_sequence, aggregates, batches, events)
			VALUES (?, 0, 0, 0, 0) ON CONFLICT (aggregate_type) DO NOTHING`
	case stmtSettleFeed:
		return settleFeedQuery
	case stmtAddFeed:
		// Settles a row when the writer knows the counts to add.
		return `UPDATE feeds SET feed_sequence = ?2, aggregates = aggregates + ?3,
			batches = batches + ?4, events = events + ?5 WHERE aggregate_type = ?1`
	}
	if id >= stmtInsert && id < numStmts {
		return insertQuery(int(id-stmtInsert) + 1)
	}
	panic("sqlite: unknown statement")
}
