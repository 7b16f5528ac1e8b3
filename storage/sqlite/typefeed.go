package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
)

// A type's feed is read through the (aggregate_type, feed_sequence) index
// alone: the events of a type take feed sequences in position order (the
// single writer numbers them as it assigns positions), so the index's
// entries, which end with the position, are in position order too, and no
// second index on (aggregate_type, position) is needed. A read by position
// must then find the feed sequence to start the range at.

const (
	// typeAtQuery is the feed sequence of the event at a position, when
	// it is of the type.
	typeAtQuery = `SELECT feed_sequence FROM events WHERE position = ? AND aggregate_type = ?`
	// typeLastQuery is the position and feed sequence of a type's last
	// event.
	typeLastQuery = `SELECT position, feed_sequence FROM events
		WHERE aggregate_type = ? ORDER BY feed_sequence DESC, position DESC LIMIT 1`
	// typeFirstFromQuery is the position of a type's first event with a
	// feed sequence of at least the given one.
	typeFirstFromQuery = `SELECT position FROM events
		WHERE aggregate_type = ? AND feed_sequence >= ? ORDER BY feed_sequence, position LIMIT 1`
)

// typeFeedStart returns the feed sequence, at least lo, from which to scan
// typ's feed for its events after position after (> 0): every such event
// has a feed sequence at least that high, and the scan passes over the
// events of at most one batch that are not after after. It runs in the
// caller's read transaction on dc.
//
// A reader continuing after the last event it read asks for the position
// of an event of typ: one look-up. Otherwise, unless typ has nothing after
// after, it searches the feed sequences in halves, one index probe each.
func typeFeedStart(ctx context.Context, dc *rawConn, typ string, after, lo int64) (int64, error) {
	at := int64(-1)
	err := rawQuery(ctx, dc, typeAtQuery, []driver.NamedValue{{Ordinal: 1, Value: after}, {Ordinal: 2, Value: typ}},
		func(r *rawRow) error {
			at = r.int64(0)
			return nil
		})
	if err != nil || at >= 0 {
		return max(lo, at), err
	}
	lastPos, lastFS := int64(0), int64(-1)
	err = rawQuery(ctx, dc, typeLastQuery, []driver.NamedValue{{Ordinal: 1, Value: typ}}, func(r *rawRow) error {
		lastPos, lastFS = r.int64(0), r.int64(1)
		return nil
	})
	switch {
	case err != nil:
		return 0, err
	case lastPos <= after || lastFS < lo:
		return max(lo, lastFS+1), nil // nothing to read
	}
	// Find the lowest m in [lo, lastFS+1] whose first event (the first
	// with a feed sequence of at least m) is after after, or that has
	// none (lastFS+1). The batch before m, when m > lo, holds the last
	// event not after after and maybe some after it: start there.
	probe, release, err := prepareRaw(ctx, dc, typeFirstFromQuery)
	if err != nil {
		return 0, err
	}
	defer release()
	hi := lastFS + 1
	m := lo
	for m < hi {
		mid := m + (hi-m)/2
		pos, ok, err := probe.int64(ctx, []driver.NamedValue{{Ordinal: 1, Value: typ}, {Ordinal: 2, Value: mid}})
		if err != nil {
			return 0, err
		}
		if !ok || pos > after {
			hi = mid
		} else {
			m = mid + 1
		}
	}
	if m > lo {
		m--
	}
	return m, nil
}

// rawStmt is a query prepared on a driver connection to run several times
// in a row.
type rawStmt struct {
	driver.Stmt
	dest []driver.Value
}

// prepareRaw prepares query on the driver connection rc. The caller must
// call release when done with the statement.
func prepareRaw(ctx context.Context, rc *rawConn, query string) (s *rawStmt, release func(), err error) {
	stmt, release, err := rc.stmt(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	return &rawStmt{Stmt: stmt}, release, nil
}

// int64 runs the query with args and returns the integer in the first
// column of its first row; ok is false when it returns no row.
func (s *rawStmt) int64(ctx context.Context, args []driver.NamedValue) (v int64, ok bool, err error) {
	q, isQ := s.Stmt.(driver.StmtQueryContext)
	if !isQ {
		return 0, false, errors.New("driver statement cannot query with a context")
	}
	rows, err := q.QueryContext(ctx, args)
	if err != nil {
		return 0, false, err
	}
	defer rows.Close()
	if s.dest == nil {
		s.dest = make([]driver.Value, len(rows.Columns()))
	}
	switch err := rows.Next(s.dest); {
	case errors.Is(err, io.EOF):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	r := rawRow{dest: s.dest}
	v = r.int64(0)
	return v, true, r.err
}
