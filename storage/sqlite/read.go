package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore"
)

// eventColumns are the columns scanner.event reads, in order; feedColumns
// add the aggregate, which Load knows already.
const (
	eventColumns = `event_id, event_type, data, version, sequence, position, recorded_at`
	feedColumns  = eventColumns + `, aggregate_type, aggregate_id`
)

const (
	// loadQuery reads an aggregate's events in order: one range scan of
	// the (aggregate_type, aggregate_id, sequence) index.
	loadQuery = `SELECT ` + eventColumns + ` FROM events
		WHERE aggregate_type = ? AND aggregate_id = ? ORDER BY sequence`
	// feedQuery and feedTypeQuery read the global feed, or that of one
	// aggregate type through the (aggregate_type, position) index.
	feedQuery = `SELECT ` + feedColumns + ` FROM events
		WHERE position > ? ORDER BY position LIMIT ?`
	feedTypeQuery = `SELECT ` + feedColumns + ` FROM events
		WHERE aggregate_type = ? AND position > ? ORDER BY position LIMIT ?`
	headQuery = `SELECT coalesce(max(position), 0) FROM events`
)

// Load implements eventstore.Storage. It is one index range scan of the
// aggregate's events, so its cost does not depend on the size of the store.
func (s *Storage) Load(ctx context.Context, q eventstore.LoadQuery) (eventstore.Aggregate, error) {
	aggregateType, aggregateID := q.AggregateType, q.AggregateID // TODO(contract): honour q.AfterVersion and q.Limit
	if err := s.check(ctx, "load"); err != nil {
		return eventstore.Aggregate{}, err
	}
	var events []eventstore.Event
	var sc scanner
	args := []driver.NamedValue{{Ordinal: 1, Value: aggregateType}, {Ordinal: 2, Value: aggregateID}}
	err := withRawConn(ctx, s.readDB, func(dc any) error {
		return rawQuery(ctx, dc, loadQuery, args, func(r *rawRow) error {
			e := sc.event(r)
			e.AggregateType, e.AggregateID = aggregateType, aggregateID
			events = append(events, e)
			return nil
		})
	})
	if err != nil {
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
	query := feedQuery
	args := []driver.NamedValue{{Ordinal: 1, Value: after}, {Ordinal: 2, Value: int64(limit)}}
	if q.AggregateType != "" {
		query = feedTypeQuery
		args = []driver.NamedValue{{Ordinal: 1, Value: q.AggregateType}, {Ordinal: 2, Value: after}, {Ordinal: 3, Value: int64(limit)}}
	}
	page := eventstore.FeedPage{Head: after}
	err := withRawConn(ctx, s.readDB, func(dc any) error {
		tx, err := rawBegin(ctx, dc)
		if err != nil {
			return err
		}
		defer tx.Rollback() // read only: nothing to commit
		var sc scanner
		err = rawQuery(ctx, dc, query, args, func(r *rawRow) error {
			page.Events = append(page.Events, sc.event(r))
			return nil
		})
		if err != nil {
			return err
		}
		if n := len(page.Events); n == limit {
			page.Head = page.Events[n-1].Position
			return nil
		}
		// The snapshot holds nothing more that matches: move Head to its end.
		return rawQuery(ctx, dc, headQuery, nil, func(r *rawRow) error {
			page.Head = max(after, r.int64(0))
			return nil
		})
	})
	if err != nil {
		return eventstore.FeedPage{}, s.fail(ctx, "read feed", err)
	}
	return page, nil
}

// scanner converts event rows. It shares the strings of repeated event
// types and aggregates within one result, and copies data into shared
// chunks, so a result of many events costs few allocations. Each Data slice
// is clipped to its length, so a caller appending to one cannot overwrite
// another.
type scanner struct {
	strs map[string]string
	buf  []byte
}

// dataChunk is the size of the buffers event data is copied into.
const dataChunk = 32 << 10

// intern returns a string equal to v, shared with earlier rows.
func (sc *scanner) intern(v string) string {
	if u, ok := sc.strs[v]; ok {
		return u
	}
	if sc.strs == nil {
		sc.strs = make(map[string]string)
	}
	sc.strs[v] = v
	return v
}

// copyData returns a copy of d, or nil for nil (a NULL column).
func (sc *scanner) copyData(d []byte) []byte {
	if d == nil {
		return nil
	}
	if len(d) > dataChunk/4 {
		return append([]byte{}, d...)
	}
	if cap(sc.buf)-len(sc.buf) < len(d) {
		sc.buf = make([]byte, 0, dataChunk)
	}
	start := len(sc.buf)
	sc.buf = append(sc.buf, d...)
	return sc.buf[start:len(sc.buf):len(sc.buf)]
}

// event converts one row of eventColumns or feedColumns.
func (sc *scanner) event(r *rawRow) eventstore.Event {
	e := eventstore.Event{
		ID:         r.string(0),
		Type:       sc.intern(r.string(1)),
		Data:       sc.copyData(r.bytes(2)),
		Version:    r.int64(3),
		Sequence:   r.int64(4),
		Position:   r.int64(5),
		RecordedAt: time.UnixMicro(r.int64(6)).UTC(),
	}
	if len(r.dest) > 7 {
		e.AggregateType = sc.intern(r.string(7))
		e.AggregateID = sc.intern(r.string(8))
	}
	return e
}
