package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore"
)

// Load implements eventstore.Storage. It is one index range scan of the
// aggregate's events, so its cost does not depend on the size of the store.
func (s *Storage) Load(ctx context.Context, aggregateType, aggregateID string) (eventstore.Aggregate, error) {
	if err := s.check(ctx, "load"); err != nil {
		return eventstore.Aggregate{}, err
	}
	rows, err := s.stmts.load.QueryContext(ctx, aggregateType, aggregateID)
	if err != nil {
		return eventstore.Aggregate{}, s.fail(ctx, "load", err)
	}
	var events []eventstore.Event
	var sc scanner
	for rows.Next() {
		e, err := sc.event(rows, false)
		if err != nil {
			rows.Close()
			return eventstore.Aggregate{}, s.fail(ctx, "load", err)
		}
		e.AggregateType, e.AggregateID = aggregateType, aggregateID
		events = append(events, e)
	}
	if err := closeRows(rows); err != nil {
		return eventstore.Aggregate{}, s.fail(ctx, "load", err)
	}
	if len(events) == 0 {
		return eventstore.Aggregate{}, fmt.Errorf("aggregate %s/%s: %w", aggregateType, aggregateID, eventstore.ErrNotFound)
	}
	return eventstore.Aggregate{
		Type:    aggregateType,
		ID:      aggregateID,
		Version: events[len(events)-1].Version,
		Events:  events,
	}, nil
}

// ReadFeed implements eventstore.Storage. Positions are assigned by the
// single writer and a transaction's events become visible together at
// commit, so every position up to the highest visible one is visible: the
// feed has no in-flight gaps. The page and its Head come from one read
// transaction, that is one snapshot.
func (s *Storage) ReadFeed(ctx context.Context, q eventstore.FeedQuery) (eventstore.FeedPage, error) {
	if err := s.check(ctx, "read feed"); err != nil {
		return eventstore.FeedPage{}, err
	}
	limit := max(q.Limit, 1)
	after := max(q.After, 0)
	tx, err := s.readDB.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return eventstore.FeedPage{}, s.fail(ctx, "read feed", err)
	}
	defer tx.Rollback()
	var rows *sql.Rows
	if q.AggregateType == "" {
		rows, err = tx.StmtContext(ctx, s.stmts.feedAll).QueryContext(ctx, after, limit)
	} else {
		rows, err = tx.StmtContext(ctx, s.stmts.feedType).QueryContext(ctx, q.AggregateType, after, limit)
	}
	if err != nil {
		return eventstore.FeedPage{}, s.fail(ctx, "read feed", err)
	}
	page := eventstore.FeedPage{Head: after}
	var sc scanner
	for rows.Next() {
		e, err := sc.event(rows, true)
		if err != nil {
			rows.Close()
			return eventstore.FeedPage{}, s.fail(ctx, "read feed", err)
		}
		page.Events = append(page.Events, e)
	}
	if err := closeRows(rows); err != nil {
		return eventstore.FeedPage{}, s.fail(ctx, "read feed", err)
	}
	if n := len(page.Events); n == limit {
		page.Head = page.Events[n-1].Position
		return page, nil
	}
	// The snapshot holds nothing more that matches: move Head to its end.
	var head int64
	if err := tx.StmtContext(ctx, s.stmts.maxPosition).QueryRowContext(ctx).Scan(&head); err != nil {
		return eventstore.FeedPage{}, s.fail(ctx, "read feed", err)
	}
	page.Head = max(after, head)
	return page, nil
}

// closeRows closes rows and returns the error of the iteration, if any.
func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// scanner scans event rows, keeping its scan targets between rows. It
// shares the strings of repeated event types and aggregates within one
// result, and copies data into shared chunks, so a result of many events
// costs few allocations. Each Data slice is clipped to its length, so a
// caller appending to one cannot overwrite another.
type scanner struct {
	aggType, aggID, id, typ, data sql.RawBytes
	recordedAt                    int64
	strs                          map[string]string
	buf                           []byte
}

// dataChunk is the size of the buffers event data is copied into.
const dataChunk = 32 << 10

// intern returns b as a string, shared with earlier rows.
func (sc *scanner) intern(b []byte) string {
	if v, ok := sc.strs[string(b)]; ok {
		return v
	}
	if sc.strs == nil {
		sc.strs = make(map[string]string)
	}
	v := string(b)
	sc.strs[v] = v
	return v
}

// copyData returns a copy of d, or nil for a NULL column.
func (sc *scanner) copyData(d []byte) []byte {
	if d == nil {
		return nil
	}
	if len(d) > dataChunk/4 {
		return append([]byte(nil), d...)
	}
	if cap(sc.buf)-len(sc.buf) < len(d) {
		sc.buf = make([]byte, 0, dataChunk)
	}
	start := len(sc.buf)
	sc.buf = append(sc.buf, d...)
	return sc.buf[start:len(sc.buf):len(sc.buf)]
}

// event scans one row of eventColumns, preceded by aggregate_type and
// aggregate_id when withAggregate is set.
func (sc *scanner) event(rows *sql.Rows, withAggregate bool) (eventstore.Event, error) {
	var e eventstore.Event
	dest := []any{&sc.id, &sc.typ, &sc.data, &e.Version, &e.Sequence, &e.Position, &sc.recordedAt}
	if withAggregate {
		dest = append([]any{&sc.aggType, &sc.aggID}, dest...)
	}
	if err := rows.Scan(dest...); err != nil {
		return e, err
	}
	e.ID = string(sc.id)
	e.Type = sc.intern(sc.typ)
	e.Data = sc.copyData(sc.data)
	e.RecordedAt = time.UnixMicro(sc.recordedAt).UTC()
	if withAggregate {
		e.AggregateType = sc.intern(sc.aggType)
		e.AggregateID = sc.intern(sc.aggID)
	}
	return e, nil
}
