package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// commitStmts are the statements every projection commit runs, prepared
// once on the write pool and bound to each commit's transaction with
// Tx.StmtContext, which reuses the statement already prepared on the one
// write connection. Preparing them per commit cost a projector more CPU
// than running them when each commit applies few events, as when saves go
// round-robin across many tenants' files (tenancy).
type commitStmts struct {
	mu         sync.Mutex
	prepared   bool
	checkpoint *sql.Stmt    // moves the checkpoint (compare-and-set)
	states     [3]*sql.Stmt // write a state: see commitProjection
	instances  *sql.Stmt    // adds to definitions.instances
}

// The statements of commitStmts.
const (
	checkpointQuery = `UPDATE definitions SET checkpoint = ? WHERE name = ? AND checkpoint = ?
AND (?4 IS NULL OR spec = ?4)`
	instancesQuery = `UPDATE definitions SET instances = instances + ? WHERE name = ?`
)

// stateQueries write a state: the first that changes a row wins. SQLite
// rewrites the entries of every index whose columns an UPDATE assigns, so
// the usual case, an instance whose creation time and reference stay,
// assigns only what moved.
var stateQueries = [3]string{
	`UPDATE projection_states SET data = ?3, position = ?4, updated_at = ?6
		WHERE name = ?1 AND instance_id = ?2 AND created_at = ?5
		AND ref_rank = ?7 AND ref_num = ?8 AND ref_text = ?9 AND ref_decimal = ?10`,
	`UPDATE projection_states SET
		data = ?3, position = ?4, created_at = ?5, updated_at = ?6,
		ref_rank = ?7, ref_num = ?8, ref_text = ?9, ref_decimal = ?10
		WHERE name = ?1 AND instance_id = ?2`,
	`INSERT INTO projection_states
		(name, instance_id, data, position, created_at, updated_at, ref_rank, ref_num, ref_text, ref_decimal)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)`,
}

// prepare prepares the statements on db unless done. It must be called
// without holding db's connection: db has one, which preparing takes.
func (c *commitStmts) prepare(ctx context.Context, db *sql.DB) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prepared {
		return nil
	}
	var stmts []*sql.Stmt
	var firstErr error
	add := func(query string) *sql.Stmt {
		if firstErr != nil {
			return nil
		}
		st, err := db.PrepareContext(ctx, query)
		if err != nil {
			firstErr = err
			return nil
		}
		stmts = append(stmts, st)
		return st
	}
	cp, in := add(checkpointQuery), add(instancesQuery)
	var states [3]*sql.Stmt
	for i, q := range stateQueries {
		states[i] = add(q)
	}
	if firstErr != nil {
		for _, st := range stmts {
			_ = st.Close()
		}
		return firstErr
	}
	c.checkpoint, c.instances, c.states, c.prepared = cp, in, states, true
	return nil
}

// close closes the statements.
func (c *commitStmts) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.prepared {
		return nil
	}
	c.prepared = false
	errs := []error{c.checkpoint.Close(), c.instances.Close()}
	for _, st := range c.states {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}

// loadStmtIDs is the most instance ids for which LoadProjections keeps a
// prepared statement (one per count: the IN list differs); a projector
// mostly loads one or a few instances per catch-up.
const loadStmtIDs = 8

// loadStmts are LoadProjections' statements for 1 to loadStmtIDs ids,
// prepared once on the read pool; Tx.StmtContext reuses the statement
// already prepared on a transaction's connection.
type loadStmts struct {
	mu    sync.Mutex
	stmts [loadStmtIDs + 1]*sql.Stmt
}

// get returns the statement for n ids, preparing it on db when needed, or
// nil when n is above loadStmtIDs. It must be called without holding a
// connection of db: preparing takes one.
func (l *loadStmts) get(ctx context.Context, db *sql.DB, n int) (*sql.Stmt, error) {
	if n < 1 || n > loadStmtIDs {
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if st := l.stmts[n]; st != nil {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, loadStatesQuery(n))
	if err != nil {
		return nil, err
	}
	l.stmts[n] = st
	return st, nil
}

// close closes the statements.
func (l *loadStmts) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for i, st := range l.stmts {
		if st != nil {
			errs = append(errs, st.Close())
			l.stmts[i] = nil
		}
	}
	return errors.Join(errs...)
}

// loadStatesQuery reads the states of n instances of a projection.
func loadStatesQuery(n int) string {
	return `SELECT ` + stateColumns + ` FROM projection_states
				WHERE name = ? AND instance_id IN (` + placeholders(n) + `)`
}
