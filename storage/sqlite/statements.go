package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// statements are the write statements, prepared once in Open on the single
// write connection and used inside transactions through Tx.StmtContext,
// which reuses the connection's prepared statement.
type statements struct {
	savepoint, release, rollbackTo *sql.Stmt
	head, stored                   *sql.Stmt
	// inserts[k] inserts k+1 events with one statement.
	inserts                                       [insertRows]*sql.Stmt
	lastPosition, lastFeed, saveFeed              *sql.Stmt
	groupSavepoint, groupRelease, groupRollbackTo *sql.Stmt
}

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

func (st *statements) list() []struct {
	into  **sql.Stmt
	query string
} {
	list := []struct {
		into  **sql.Stmt
		query string
	}{
		{&st.savepoint, `SAVEPOINT req`},
		{&st.release, `RELEASE req`},
		{&st.rollbackTo, `ROLLBACK TO req`},
		{&st.groupSavepoint, `SAVEPOINT reqs`},
		{&st.groupRelease, `RELEASE reqs`},
		{&st.groupRollbackTo, `ROLLBACK TO reqs`},
		{&st.head, `SELECT version, sequence FROM events
			WHERE aggregate_type = ? AND aggregate_id = ? ORDER BY sequence DESC LIMIT 1`},
		{&st.stored, `SELECT version, position FROM events
			WHERE aggregate_type = ? AND aggregate_id = ? AND event_id = ?`},
		{&st.lastPosition, lastPositionQuery},
		{&st.lastFeed, `SELECT feed_sequence FROM feeds WHERE aggregate_type = ?`},
		{&st.saveFeed, `INSERT INTO feeds (aggregate_type, feed_sequence, aggregates, batches, events)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (aggregate_type) DO UPDATE SET
				feed_sequence = excluded.feed_sequence,
				aggregates = aggregates + excluded.aggregates,
				batches = batches + excluded.batches,
				events = events + excluded.events`},
	}
	for i := range st.inserts {
		list = append(list, struct {
			into  **sql.Stmt
			query string
		}{&st.inserts[i], insertQuery(i + 1)})
	}
	return list
}

func (st *statements) prepare(ctx context.Context, writeDB *sql.DB) error {
	for _, p := range st.list() {
		stmt, err := writeDB.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.query, err)
		}
		*p.into = stmt
	}
	return nil
}

// close closes the statements prepared so far. Errors are ignored: the
// connection is being closed too.
func (st *statements) close() {
	for _, p := range st.list() {
		if *p.into != nil {
			_ = (*p.into).Close()
		}
	}
}
