package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"

	"github.com/eventkit-go/eventstore/storage"
	"modernc.org/sqlite"
)

// The append path talks to the write connection through the driver's own
// interfaces, as the read paths do (rawquery.go): a database/sql
// transaction starts a goroutine to watch its context, and every statement
// run inside it one more in the driver, which for a lone writer's save of
// one event cost more CPU than its INSERT.

// writeConn is the single write connection at the driver level, with the
// append statements prepared on it. Only the holder of the connection
// (see Storage.onWriteConn) uses it.
type writeConn struct {
	dc    any
	stmts [numStmts]driver.Stmt
	args  []driver.NamedValue // reused argument buffer
	dest  []driver.Value      // reused row buffer
	head  head
}

// head is what the write connection knows of the file's numbering after
// its last commit: the last position assigned, the latest feed sequence
// of the types it appended to or looked up, and the version and last
// sequence of the aggregates it appended to. It holds only while nothing
// else wrote to the file, which the file's data version tells: SQLite
// changes it at every commit to the file, by this connection or any other,
// of this process or another (SQLITE_FCNTL_DATA_VERSION), and BEGIN
// IMMEDIATE brings it up to date before the batch reads anything.
type head struct {
	valid    bool
	version  uint32 // the data version after the commit that cached the head
	position int64  // -1 when unknown
	feeds    map[string]feedHead
	aggs     map[aggKey]aggHead
}

// aggKey names an aggregate.
type aggKey struct{ typ, id string }

// aggHead is the version and last event sequence of an aggregate.
type aggHead struct{ version, sequence int64 }

// aggWrite is the head an aggregate reached in a transaction.
type aggWrite struct {
	key  aggKey
	head aggHead
}

// maxHeadFeeds and maxHeadAggs bound the feed sequences and aggregate
// heads a head keeps; past them it starts over.
const (
	maxHeadFeeds = 1024
	maxHeadAggs  = 4096
)

// dataVersion returns the data version of the main database of c.
func (c *writeConn) dataVersion() (uint32, bool) {
	fc, ok := c.dc.(sqlite.FileControl)
	if !ok {
		return 0, false
	}
	v, err := fc.FileControlDataVersion("main")
	return v, err == nil
}

// takeHead returns the head: when nothing wrote to the file since
// keepHead cached it, as cached; otherwise empty, with position -1. Until
// keepHead, the head is forgotten: a batch that fails leaves none. Call it
// inside the batch's transaction, and only read the maps it returns.
func (c *writeConn) takeHead() *head {
	h := &c.head
	valid := h.valid
	h.valid = false
	if h.feeds == nil {
		h.feeds = make(map[string]feedHead)
		h.aggs = make(map[aggKey]aggHead)
	}
	if valid {
		if v, ok := c.dataVersion(); ok && v == h.version {
			return h
		}
	}
	h.position = -1
	clear(h.feeds)
	clear(h.aggs)
	return h
}

// keepHead caches what a batch committed: the last position assigned,
// the types' feed sequences and the heads of the aggregates written.
func (c *writeConn) keepHead(position int64, feeds []feedCounts, aggs []aggWrite) {
	v, ok := c.dataVersion()
	if !ok {
		return
	}
	h := &c.head
	if len(h.feeds)+len(feeds) > maxHeadFeeds {
		clear(h.feeds)
	}
	for _, f := range feeds {
		if f.settled >= 0 { // the type has a row
			h.feeds[f.aggregateType] = f.feedHead
		}
	}
	if len(h.aggs)+len(aggs) > maxHeadAggs {
		clear(h.aggs)
	}
	for _, a := range aggs {
		h.aggs[a.key] = a.head
	}
	h.position, h.version, h.valid = position, v, true
}

// onWriteConn calls fn with the write connection, which database/sql hands
// to no one else until fn returns. When database/sql has replaced the
// connection, its statements are prepared anew.
func (s *store) onWriteConn(ctx context.Context, fn func(c *writeConn) error) error {
	conn, err := s.writeDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		if s.wc == nil || s.wc.dc != dc {
			s.wc = &writeConn{dc: dc}
		}
		return fn(s.wc)
	})
}

// prepare prepares every statement, so that Open reports a bad one.
func (c *writeConn) prepare(ctx context.Context) error {
	for id := range numStmts {
		if _, err := c.stmt(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// close finalises the statements.
func (c *writeConn) close() error {
	var errs []error
	for i, st := range c.stmts {
		if st != nil {
			errs = append(errs, st.Close())
			c.stmts[i] = nil
		}
	}
	return errors.Join(errs...)
}

// stmt returns statement id, prepared on first use.
func (c *writeConn) stmt(ctx context.Context, id stmtID) (driver.Stmt, error) {
	if st := c.stmts[id]; st != nil {
		return st, nil
	}
	prep, ok := c.dc.(driver.ConnPrepareContext)
	if !ok {
		return nil, errors.New("driver connection cannot prepare with a context")
	}
	q := query(id)
	st, err := prep.PrepareContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("prepare %q: %w", q, err)
	}
	c.stmts[id] = st
	return st, nil
}

// bind returns args as the driver's arguments, in c's reused buffer.
func (c *writeConn) bind(args []any) []driver.NamedValue {
	nv := c.args[:0]
	for i, a := range args {
		nv = append(nv, driver.NamedValue{Ordinal: i + 1, Value: a})
	}
	c.args = nv
	return nv
}

// unbind drops the references the argument buffer holds.
func (c *writeConn) unbind() { clear(c.args[:cap(c.args)]) }

// exec runs statement id with args.
func (c *writeConn) exec(ctx context.Context, id stmtID, args ...any) error {
	st, err := c.stmt(ctx, id)
	if err != nil {
		return err
	}
	ex, ok := st.(driver.StmtExecContext)
	if !ok {
		return errors.New("driver statement cannot execute with a context")
	}
	_, err = ex.ExecContext(ctx, c.bind(args))
	c.unbind()
	return err
}

// queryRow runs statement id with args and scans the integer columns of
// its first row into dest, a NULL as 0. It reports whether there was a
// row.
func (c *writeConn) queryRow(ctx context.Context, id stmtID, dest []*int64, args ...any) (bool, error) {
	rows, row, found, err := c.firstRow(ctx, id, args)
	if !found || err != nil {
		return false, err
	}
	for i, d := range dest {
		switch v := row[i].(type) {
		case int64:
			*d = v
		case nil:
			*d = 0
		default:
			rows.Close()
			return false, fmt.Errorf("column %d holds %T, want an integer", i, row[i])
		}
	}
	clear(row)
	return true, rows.Close()
}

// firstRow runs statement id with args and reads its first row into
// c.dest. Without a row (found false) or on an error the rows are closed;
// else the caller reads row and closes rows.
func (c *writeConn) firstRow(ctx context.Context, id stmtID, args []any) (rows driver.Rows, row []driver.Value, found bool, err error) {
	st, err := c.stmt(ctx, id)
	if err != nil {
		return nil, nil, false, err
	}
	q, ok := st.(driver.StmtQueryContext)
	if !ok {
		return nil, nil, false, errors.New("driver statement cannot query with a context")
	}
	rows, err = q.QueryContext(ctx, c.bind(args))
	c.unbind()
	if err != nil {
		return nil, nil, false, err
	}
	if n := len(rows.Columns()); cap(c.dest) < n {
		c.dest = make([]driver.Value, n)
	}
	row = c.dest[:len(rows.Columns())]
	if err = rows.Next(row); err != nil {
		clear(row)
		cerr := rows.Close()
		if errors.Is(err, io.EOF) {
			return nil, nil, false, cerr
		}
		return nil, nil, false, err
	}
	return rows, row, true, nil
}

// queryEvent runs statement id with args and reads its first row, the
// columns version, position, event_type, data, encrypted_data and
// metadata of a stored event, into e, copying what it keeps. It reports
// whether there was a row.
func (c *writeConn) queryEvent(ctx context.Context, id stmtID, e *storage.Event, args ...any) (bool, error) {
	rows, row, found, err := c.firstRow(ctx, id, args)
	if !found || err != nil {
		return false, err
	}
	defer clear(row)
	r := rawRow{dest: row}
	e.Version, e.Position, e.Type = r.int64(0), r.int64(1), r.string(2)
	if d := r.bytes(3); d != nil {
		e.Data = append([]byte{}, d...)
	}
	e.EncryptedData = r.string(4)
	e.Metadata = metadata(&r, 5)
	if r.err != nil {
		rows.Close()
		return false, r.err
	}
	return true, rows.Close()
}

// rollback ends the transaction open on c, if any, without its writes. It
// fails harmlessly when none is open.
func (c *writeConn) rollback(ctx context.Context) {
	_ = c.exec(ctx, stmtRollback)
}
