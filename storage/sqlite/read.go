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

// scanner scans event rows, keeping its scan targets between rows.
type scanner struct {
	aggType, aggID, id, typ string
	data                    sql.RawBytes
	recordedAt              int64
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
	e.ID = sc.id
	e.Type = sc.typ
	if sc.data != nil {
		e.Data = append([]byte(nil), sc.data...)
	}
	e.RecordedAt = time.UnixMicro(sc.recordedAt).UTC()
	if withAggregate {
		e.AggregateType = sc.aggType
		e.AggregateID = sc.aggID
	}
	return e, nil
}
