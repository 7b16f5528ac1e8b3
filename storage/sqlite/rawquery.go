package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// The read paths that return many rows (Load, ReadFeed) talk to the driver
// through its own interfaces: database/sql's per-column conversion and
// copying costs as much as SQLite itself for a 1,000-event aggregate.

// withRawConn calls fn with a driver connection of db's pool. fn must not
// keep the connection or anything read from it after it returns.
func withRawConn(ctx context.Context, db *sql.DB, fn func(dc any) error) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(fn)
}

// rawQuery runs query on the driver connection dc and calls row for every
// result row. The row's values are valid only during the call.
func rawQuery(ctx context.Context, dc any, query string, args []driver.NamedValue, row func(r *rawRow) error) error {
	prep, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		return errors.New("driver connection cannot prepare with a context")
	}
	stmt, err := prep.PrepareContext(ctx, query)
	if err != nil {
		return err
	}
	defer stmt.Close()
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

// rawBegin starts a read transaction on the driver connection dc: one
// snapshot for several queries.
func rawBegin(ctx context.Context, dc any) (driver.Tx, error) {
	b, ok := dc.(driver.ConnBeginTx)
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
