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

// reactionStmts are the statements of ClaimReactions and FinishReactions,
// prepared once on the write pool and bound to each transaction with
// Tx.StmtContext. Their text is the same whatever the number of
// reactions (the ids and outcomes go in one JSON argument), so SQLite
// parses them once: parsing a statement of a hundred arguments per claim
// cost as much as running it, all of it while saves wait for the write
// connection.
type reactionStmts struct {
	mu     sync.Mutex
	due    *sql.Stmt // the ids due, earliest first
	claim  *sql.Stmt // claims the ids of a JSON array
	finish *sql.Stmt // applies the outcomes of a JSON array
}

// The statements of reactionStmts.
const (
	claimDueQuery = `SELECT id FROM reactions WHERE state IN (0, 1) AND due_at <= ? ORDER BY due_at, id LIMIT ?`
	claimQuery    = `UPDATE reactions SET state = 1, due_at = ?1, claim = ?2, attempts = attempts + 1
		WHERE id IN (SELECT value FROM json_each(?3)) RETURNING ` + reactionCols + `, payload`
	// finishQuery takes an array of [id, claim, state, due, finished,
	// error] arrays of distinct ids.
	finishQuery = `UPDATE reactions SET state = v.state,
		due_at = CASE WHEN v.due >= 0 THEN v.due ELSE reactions.due_at END,
		finished_at = v.finished, last_error = v.error, claim = ''
		FROM (SELECT value ->> 0 AS id, value ->> 1 AS claim, value ->> 2 AS state, value ->> 3 AS due,
			value ->> 4 AS finished, value ->> 5 AS error FROM json_each(?)) AS v
		WHERE reactions.id = v.id AND reactions.state = 1 AND reactions.claim = v.claim
		RETURNING reactions.id`
)

// get returns the statements, preparing them on db when needed. It must be
// called without holding db's connection: db has one, which preparing
// takes.
func (r *reactionStmts) get(ctx context.Context, db *sql.DB) (due, claim, finish *sql.Stmt, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.due == nil {
		var stmts [3]*sql.Stmt
		for i, q := range []string{claimDueQuery, claimQuery, finishQuery} {
			if stmts[i], err = db.PrepareContext(ctx, q); err != nil {
				for _, st := range stmts[:i] {
					_ = st.Close()
				}
				return nil, nil, nil, err
			}
		}
		r.due, r.claim, r.finish = stmts[0], stmts[1], stmts[2]
	}
	return r.due, r.claim, r.finish, nil
}

// close closes the statements.
func (r *reactionStmts) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.due == nil {
		return nil
	}
	err := errors.Join(r.due.Close(), r.claim.Close(), r.finish.Close())
	r.due, r.claim, r.finish = nil, nil, nil
	return err
}
