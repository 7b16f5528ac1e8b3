package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"sync"
)

// The read paths that return many rows (Load, ReadFeed) talk to the driver
// through its own interfaces: database/sql's per-column conversion and
// copying costs as much as SQLite itself for a 1,000-event aggregate.

// rawConns keeps the statements the read paths prepare, per driver
// connection of the read pool: preparing a statement costs SQLite as much
// as running a small query. The read pool never closes a connection by
// itself (no lifetime or idle limit), so the statements live until Close,
// which finalises them once the reads in flight are done, before the pool
// closes the connections.
type rawConns struct {
	mu     sync.RWMutex // read-locked by every read; locked by close
	byConn sync.Map     // driver connection → *rawConn
	closed bool
}

// rawConn is a driver connection of the read pool with its prepared
// statements. Only the goroutine holding the connection uses it.
type rawConn struct {
	dc    any
	stmts map[string]driver.Stmt // nil once the cache is closed
}

// with calls fn with a driver connection of db's pool. fn must not keep
// the connection or anything read from it after it returns.
func (c *rawConns) with(ctx context.Context, db *sql.DB, fn func(rc *rawConn) error) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		if c.closed {
			return fn(&rawConn{dc: dc})
		}
		v, ok := c.byConn.Load(dc)
		if !ok {
			v, _ = c.byConn.LoadOrStore(dc, &rawConn{dc: dc, stmts: make(map[string]driver.Stmt)})
		}
		return fn(v.(*rawConn))
	})
}

// close finalises every cached statement, after the reads in flight.
func (c *rawConns) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	c.byConn.Range(func(k, v any) bool {
		c.byConn.Delete(k)
		rc := v.(*rawConn)
		if vc, ok := rc.dc.(driver.Validator); ok && !vc.IsValid() {
			return true // closed already, statements with it
		}
		for _, st := range rc.stmts {
			errs = append(errs, st.Close())
		}
		return true
	})
	return errors.Join(errs...)
}

// stmt returns query prepared on the connection, and the function to call
// when done with it (which closes it unless it is cached).
func (rc *rawConn) stmt(ctx context.Context, query string) (driver.Stmt, func(), error) {
	if st, ok := rc.stmts[query]; ok {
		return st, func() {}, nil
	}
	prep, ok := rc.dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, nil, errors.New("driver connection cannot prepare with a context")
	}
	st, err := prep.PrepareContext(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	if rc.stmts == nil {
		return st, func() { st.Close() }, nil
	}
	rc.stmts[query] = st
	return st, func() {}, nil
}

// rawQuery runs query on the driver connection rc and calls row for every
// result row. The row's values are valid only during the call.
func rawQuery(ctx context.Context, rc *rawConn, query string, args []driver.NamedValue, row func(r *rawRow) error) error {
	stmt, release, err := rc.stmt(ctx, query)
	if err != nil {
		return err
	}
	defer release()
	q, ok := stmt.(driver.StmtQueryContext)
	if !ok {
		return errors.New("driver statement cannot query with a context")
	}
	rows, err := q.QueryContext(ctx, args)
	if err != nil {
		return err
	}
	defer rows.Close()
	r := rawRow{dest: make([]driver.Value, len(rows.Columns()))}
	for {
		switch err := rows.Next(r.dest); {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		if err := row(&r); err != nil {
			return err
		}
		if r.err != nil {
			return r.err
		}
	}
}

// rawBegin starts a read transaction on the driver connection rc: one
// snapshot for several queries.
func rawBegin(ctx context.Context, rc *rawConn) (driver.Tx, error) {
	b, ok := rc.dc.(driver.ConnBeginTx)
	if !ok {
		return nil, errors.New("driver connection cannot begin with a context")
	}
	return b.BeginTx(ctx, driver.TxOptions{ReadOnly: true})
}

// rawRow reads the columns of one row. The first conversion error sticks
// and is returned by rawQuery.
type rawRow struct {
	dest []driver.Value
	err  error
}

func (r *rawRow) fail(i int, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("column %d holds %T, want %s", i, r.dest[i], want)
	}
}

// int64 returns column i as an integer.
func (r *rawRow) int64(i int) int64 {
	v, ok := r.dest[i].(int64)
	if !ok {
		r.fail(i, "an integer")
	}
	return v
}

// string returns column i as a string.
func (r *rawRow) string(i int) string {
	switch v := r.dest[i].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	r.fail(i, "text")
	return ""
}

// bytes returns column i as bytes, nil for NULL. The slice may be the
// driver's: copy it to keep it.
func (r *rawRow) bytes(i int) []byte {
	switch v := r.dest[i].(type) {
	case nil:
		return nil
	case []byte:
		if v == nil {
			return []byte{} // an empty BLOB, not NULL
		}
		return v
	case string:
		return []byte(v)
	}
	r.fail(i, "a blob")
	return nil
}
