package sqlite

import (
	"context"
	"database/sql"
	"fmt"
)

// statements are the write statements, prepared once in Open on the single
// write connection and used inside transactions through Tx.StmtContext,
// which reuses the connection's prepared statement.
type statements struct {
	savepoint, release, rollbackTo *sql.Stmt
	head, insert, stored           *sql.Stmt
}

func (st *statements) prepare(ctx context.Context, writeDB *sql.DB) error {
	list := []struct {
		into  **sql.Stmt
		query string
	}{
		{&st.savepoint, `SAVEPOINT req`},
		{&st.release, `RELEASE req`},
		{&st.rollbackTo, `ROLLBACK TO req`},
		{&st.head, `SELECT version, sequence FROM events
			WHERE aggregate_type = ? AND aggregate_id = ? ORDER BY sequence DESC LIMIT 1`},
		{&st.insert, `INSERT INTO events
			(aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`},
		{&st.stored, `SELECT version, position FROM events
			WHERE aggregate_type = ? AND aggregate_id = ? AND event_id = ?`},
	}
	for _, p := range list {
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
	for _, s := range []*sql.Stmt{st.savepoint, st.release, st.rollbackTo, st.head, st.insert, st.stored} {
		if s != nil {
			_ = s.Close()
		}
	}
}
