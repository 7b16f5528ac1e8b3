package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// eventColumns are the columns scanner.event reads, in order; feedColumns
// add the aggregate, which Load knows already.
const (
	eventColumns = `event_id, event_type, data, version, sequence, position, recorded_at, feed_sequence, encrypted_data, metadata`
	feedColumns  = eventColumns + `, aggregate_type, aggregate_id`
)

const (
	// loadQuery reads an aggregate's events in order, from a sequence on:
	// one range scan of the (aggregate_type, aggregate_id, sequence) index.
	loadQuery = `SELECT ` + eventColumns + ` FROM events
		WHERE aggregate_type = ? AND aggregate_id = ? AND sequence > ? ORDER BY sequence`
	// versionQuery is an aggregate's current version and last sequence.
	versionQuery = `SELECT version, sequence FROM events
		WHERE aggregate_type = ? AND aggregate_id = ? ORDER BY sequence DESC LIMIT 1`
	// versionAtQuery is the version of an aggregate's first event from a
	// sequence on.
	versionAtQuery = `SELECT version FROM events
		WHERE aggregate_type = ? AND aggregate_id = ? AND sequence >= ? ORDER BY sequence LIMIT 1`
	// feedQuery reads the global feed; feedTypeQuery reads that of one
	// aggregate type, from a feed sequence on, through the
	// (aggregate_type, feed_sequence) index: its entries end with the
	// position, and a type's feed sequences rise with its positions, so
	// they are in position order (typefeed.go finds where to start for a
	// position).
	feedQuery = `SELECT ` + feedColumns + ` FROM events
		WHERE position > ? ORDER BY position LIMIT ?`
	feedTypeQuery = `SELECT ` + feedColumns + ` FROM events
		WHERE aggregate_type = ? AND feed_sequence >= ? AND position > ? ORDER BY feed_sequence, position LIMIT ?`
)

// errStop ends a rawQuery early without an error.
var errStop = errors.New("stop")

// Load implements storage.Storage. It is one index range scan of the
// aggregate's events, so its cost does not depend on the size of the store.
// A version range starts the scan at sequence q.AfterVersion (every version
// has at least one event, so that sequence is not past the range) and stops
// it after the range; the current version then comes from the same
// snapshot.
func (s *store) Load(ctx context.Context, q storage.LoadQuery) (storage.Aggregate, error) {
	defer s.span(&ctx, "Load")()
	if err := s.check(ctx, "load"); err != nil {
		return storage.Aggregate{}, err
	}
	after := max(q.AfterVersion, 0)
	last := int64(math.MaxInt64)
	if q.Limit > 0 && q.Limit <= math.MaxInt64-after {
		last = after + q.Limit
	}
	// A whole load takes the version from its last event, unless a byte
	// budget may end it early.
	whole := after == 0 && last == math.MaxInt64 && q.MaxBytes <= 0
	var size int64 // of the events read, with MaxBytes
	var events []storage.Event
	var version int64
	var sc scanner
	args := []driver.NamedValue{{Ordinal: 1, Value: q.AggregateType}, {Ordinal: 2, Value: q.AggregateID}, {Ordinal: 3, Value: after}}
	err := s.reads.with(ctx, s.readDB, func(dc *rawConn) error {
		if !whole {
			tx, err := rawBegin(ctx, dc)
			if err != nil {
				return err
			}
			defer tx.Rollback() // read only: nothing to commit
			var lastSeq int64
			err = rawQuery(ctx, dc, versionQuery, args[:2], func(r *rawRow) error {
				version, lastSeq = r.int64(0), r.int64(1)
				return nil
			})
			if err != nil || version <= after {
				return err
			}
			if after > 0 {
				from, err := firstSequenceAfter(ctx, dc, q.AggregateType, q.AggregateID, after, lastSeq)
				if err != nil {
					return err
				}
				args[2].Value = from - 1
			}
		}
		err := rawQuery(ctx, dc, loadQuery, args, func(r *rawRow) error {
			v := r.int64(3)
			if v <= after {
				return nil
			}
			if v > last || q.MaxBytes > 0 && size >= q.MaxBytes && v != events[len(events)-1].Version {
				return errStop
			}
			e := sc.event(r)
			e.AggregateType, e.AggregateID = q.AggregateType, q.AggregateID
			events = append(events, e)
			size += storage.EventBytes(&e)
			return nil
		})
		if errors.Is(err, errStop) {
			return nil
		}
		return err
	})
	if err != nil {
		return storage.Aggregate{}, s.fail(ctx, "load", err)
	}
	if whole && len(events) > 0 {
		version = events[len(events)-1].Version
	}
	if version == 0 {
		return storage.Aggregate{}, fmt.Errorf("aggregate %s/%s: %w", q.AggregateType, q.AggregateID, storage.ErrNotFound)
	}
	return storage.Aggregate{Type: q.AggregateType, ID: q.AggregateID, Version: version, Events: events}, nil
}

// ReadFeed implements storage.Storage. Positions are assigned by the
// single writer and a transaction's events become visible together at
// commit, so every position up to the highest visible one is visible: the
// feed has no in-flight gaps. The page and its Head come from one read
// transaction, that is one snapshot.
func (s *store) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	defer s.span(&ctx, "ReadFeed")()
	if err := s.check(ctx, "read feed"); err != nil {
		return storage.FeedPage{}, err
	}
	limit := max(q.Limit, 1)
	after := max(q.After, 0)
	query := feedQuery
	args := []driver.NamedValue{{Ordinal: 1, Value: after}, {Ordinal: 2, Value: int64(limit)}}
	switch {
	case !q.From.IsZero() || !q.To.IsZero():
		if q.AfterFeedSequence > 0 && q.AggregateType == "" {
			return storage.FeedPage{}, fmt.Errorf("sqlite: read feed: a feed sequence needs an aggregate type: %w", storage.ErrInvalid)
		}
		page, err := s.readDated(ctx, q, after, limit)
		if err != nil {
			return storage.FeedPage{}, s.fail(ctx, "read feed", err)
		}
		return page, nil
	case q.AggregateType != "":
		// With both bounds, both hold: a reader that continues with
		// After = Head and the same AfterFeedSequence gets the rest of the
		// feed.
		query = feedTypeQuery
		args = []driver.NamedValue{{Ordinal: 1, Value: q.AggregateType}, {Ordinal: 2, Value: max(q.AfterFeedSequence, 0) + 1},
			{Ordinal: 3, Value: after}, {Ordinal: 4, Value: int64(limit)}}
	case q.AfterFeedSequence > 0:
		return storage.FeedPage{}, fmt.Errorf("sqlite: read feed: a feed sequence needs an aggregate type: %w", storage.ErrInvalid)
	}
	page := storage.FeedPage{Head: after}
	err := s.reads.with(ctx, s.readDB, func(dc *rawConn) error {
		tx, err := rawBegin(ctx, dc)
		if err != nil {
			return err
		}
		defer tx.Rollback() // read only: nothing to commit
		if query == feedTypeQuery && after > 0 {
			// Start the index range at the batch holding the first event
			// after After: the events before were read before.
			from, err := typeFeedStart(ctx, dc, q.AggregateType, after, args[1].Value.(int64))
			if err != nil {
				return err
			}
			args[1].Value = from
		}
		var sc scanner
		var size int64 // of the events read, with MaxBytes
		err = rawQuery(ctx, dc, query, args, func(r *rawRow) error {
			if q.MaxBytes > 0 && size >= q.MaxBytes {
				page.Truncated = true // and this row is visible
				return errStop
			}
			page.Events = storage.AppendEvent(page.Events, sc.event(r), limit)
			size += storage.EventBytes(&page.Events[len(page.Events)-1])
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		if n := len(page.Events); n == limit || page.Truncated {
			page.Head = page.Events[n-1].Position
			return nil
		}
		// The snapshot holds nothing more that matches: move Head to its end.
		return rawQuery(ctx, dc, lastPositionQuery, nil, func(r *rawRow) error {
			page.Head = max(after, r.int64(0))
			return nil
		})
	})
	if err != nil {
		return storage.FeedPage{}, s.fail(ctx, "read feed", err)
	}
	return page, nil
}

// FeedHead implements storage.Storage: the highest position ever
// assigned (kept across deletions), or the type's latest feed sequence:
// its latest batch's, or the one settled in the feeds table, which
// deletions keep. A type whose events were all deleted keeps its
// head, as the memory backend does; only a type never appended to is not
// found.
func (s *store) FeedHead(ctx context.Context, aggregateType string) (int64, error) {
	if err := s.check(ctx, "feed head"); err != nil {
		return 0, err
	}
	var head int64
	var err error
	if aggregateType == "" {
		err = s.readDB.QueryRowContext(ctx, lastPositionQuery).Scan(&head)
	} else {
		err = s.readDB.QueryRowContext(ctx,
			`SELECT max(feed_sequence, `+latestFeedSequence+`) FROM feeds WHERE aggregate_type = ?`, aggregateType).Scan(&head)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("sqlite: feed %q: %w", aggregateType, storage.ErrNotFound)
		}
	}
	if err != nil {
		return 0, s.fail(ctx, "feed head", err)
	}
	return head, nil
}

// Feeds implements storage.Storage, from the counts the feeds table
// keeps and those of the batches not settled there yet (see
// settleFeedQuery).
func (s *store) Feeds(ctx context.Context) ([]storage.FeedInfo, error) {
	if err := s.check(ctx, "feeds"); err != nil {
		return nil, err
	}
	rows, err := s.readDB.QueryContext(ctx, `SELECT f.aggregate_type,
			f.aggregates + count(DISTINCT CASE WHEN e.version = 1 THEN e.feed_sequence END),
			f.batches + count(DISTINCT e.feed_sequence),
			f.events + count(e.feed_sequence)
		FROM feeds f LEFT JOIN events e ON e.aggregate_type = f.aggregate_type AND e.feed_sequence > f.feed_sequence
		GROUP BY f.aggregate_type
		HAVING f.events + count(e.feed_sequence) > 0
		ORDER BY f.aggregate_type`)
	if err != nil {
		return nil, s.fail(ctx, "feeds", err)
	}
	feeds := []storage.FeedInfo{}
	for rows.Next() {
		var f storage.FeedInfo
		if err := rows.Scan(&f.AggregateType, &f.AggregateCount, &f.BatchCount, &f.EventCount); err != nil {
			rows.Close()
			return nil, s.fail(ctx, "feeds", err)
		}
		feeds = append(feeds, f)
	}
	if err := closeRows(rows); err != nil {
		return nil, s.fail(ctx, "feeds", err)
	}
	return feeds, nil
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
func (sc *scanner) event(r *rawRow) storage.Event {
	e := storage.Event{
		ID:           r.eventID(0),
		Type:         sc.intern(r.string(1)),
		Data:         sc.copyData(r.bytes(2)),
		Version:      r.int64(3),
		Sequence:     r.int64(4),
		Position:     r.int64(5),
		RecordedAt:   time.UnixMicro(r.int64(6)).UTC(),
		FeedSequence: r.int64(7),
	}
	if r.dest[8] != nil {
		e.EncryptedData = r.string(8)
	}
	if r.dest[9] != nil {
		e.Metadata = metadata(r, 9)
	}
	if len(r.dest) > 10 {
		e.AggregateType = sc.intern(r.string(10))
		e.AggregateID = sc.intern(r.string(11))
	}
	return e
}

// metadata decodes the metadata column i of r. A column that does not
// decode (not written by this package) fails the row as a conversion
// error does.
func metadata(r *rawRow, i int) storage.Metadata {
	m, err := storage.ParseMetadataString(r.string(i))
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("column %d: %w", i, err)
	}
	return m
}

// firstSequenceAfter returns the sequence of the first event of an
// aggregate whose version is above after, given that its last event (at
// lastSeq) is. A version's events take sequences at least as high as the
// version, so the answer lies in [after+1, lastSeq]: with one event per
// save it is after+1, one probe; otherwise the range is halved, one index
// probe each, so that a load of the last versions of a long aggregate saved
// in batches does not scan its history.
func firstSequenceAfter(ctx context.Context, dc *rawConn, typ, id string, after, lastSeq int64) (int64, error) {
	probe, release, err := prepareRaw(ctx, dc, versionAtQuery)
	if err != nil {
		return 0, err
	}
	defer release()
	args := []driver.NamedValue{{Ordinal: 1, Value: typ}, {Ordinal: 2, Value: id}, {Ordinal: 3}}
	versionAt := func(seq int64) (int64, error) {
		args[2].Value = seq
		v, _, err := probe.int64(ctx, args)
		return v, err
	}
	lo, hi := after+1, lastSeq
	if v, err := versionAt(lo); err != nil || v > after {
		return lo, err
	}
	lo++ // lo's version is not above after
	for lo < hi {
		mid := lo + (hi-lo)/2
		v, err := versionAt(mid)
		if err != nil {
			return 0, err
		}
		if v > after {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}
