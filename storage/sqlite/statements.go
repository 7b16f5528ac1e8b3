package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// eventColumns are the columns scanEvent reads, in order.
const eventColumns = `event_id, event_type, data, version, sequence, position, recorded_at`

// statements are prepared once in Open. Write statements belong to the
// single write connection and are used inside transactions through
// Tx.StmtContext, which reuses the connection's prepared statement.
type statements struct {
	// write connection
	savepoint, release, rollbackTo *sql.Stmt
	head, insert, stored           *sql.Stmt

	// read pool
	load, feedAll, feedType, maxPosition *sql.Stmt
}

func (st *statements) prepare(ctx context.Context, writeDB, readDB *sql.DB) error {
	list := []struct {
		db    *sql.DB
		into  **sql.Stmt
		query string
	}{
		{writeDB, &st.savepoint, `SAVEPOINT req`},
		{writeDB, &st.release, `RELEASE req`},
		{writeDB, &st.rollbackTo, `ROLLBACK TO req`},
		{writeDB, &st.head, `SELECT version, sequence FROM events
			WHERE aggregate_type = ? AND aggregate_id = ? ORDER BY sequence DESC LIMIT 1`},
		{writeDB, &st.insert, `INSERT INTO events
			(aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`},
		{writeDB, &st.stored, `SELECT version, position FROM events
			WHERE aggregate_type = ? AND aggregate_id = ? AND event_id = ?`},

		{readDB, &st.load, `SELECT ` + eventColumns + ` FROM events
			WHERE aggregate_type = ? AND aggregate_id = ? ORDER BY sequence`},
		{readDB, &st.feedAll, `SELECT aggregate_type, aggregate_id, ` + eventColumns + ` FROM events
			WHERE position > ? ORDER BY position LIMIT ?`},
		{readDB, &st.feedType, `SELECT aggregate_type, aggregate_id, ` + eventColumns + ` FROM events
			WHERE aggregate_type = ? AND position > ? ORDER BY position LIMIT ?`},
		{readDB, &st.maxPosition, `SELECT coalesce(max(position), 0) FROM events`},
	}
	for _, p := range list {
		stmt, err := p.db.PrepareContext(ctx, p.query)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", p.query, err)
		}
		*p.into = stmt
	}
	return nil
}

func (st *statements) close() {
	var errs []error
	for _, s := range []*sql.Stmt{st.savepoint, st.release, st.rollbackTo, st.head, st.insert,
		st.stored, st.load, st.feedAll, st.feedType, st.maxPosition} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	_ = errors.Join(errs...) // closing a statement of a closing DB cannot fail usefully
}
