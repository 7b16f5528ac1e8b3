package sqlite

import (
	"context"
	"database/sql/driver"
	"errors"
	"slices"

	"github.com/eventkit-go/eventstore/storage"
)

// Reads of the events recorded in a range (storage.FeedQuery.From and To).
const (
	// datedPositionsQuery and datedTypePositionsQuery pick the first
	// positions after a position ($3, $4 with a type) recorded within the
	// range: a range scan of the events_by_time index, whose entries end
	// with the position, and a sort of the integers found, without reading
	// a row; of a type, each entry's row is read for its type (schema
	// version 13 dropped the index of each type's times, see migrations),
	// so that a read of a type holding a share s of the range's events
	// looks at 1/s times the rows it returns. RecordedAt need not rise
	// with the position, so every entry of the range after the position is
	// looked at: the cost grows with the events recorded in the range, not
	// with the feed.
	datedPositionsQuery = `SELECT position FROM events INDEXED BY events_by_time
		WHERE recorded_at BETWEEN ? AND ? AND position > ? ORDER BY position LIMIT ?`
	datedTypePositionsQuery = `SELECT position FROM events INDEXED BY events_by_time
		WHERE aggregate_type = ? AND recorded_at BETWEEN ? AND ? AND position > ? ORDER BY position LIMIT ?`
	// datedSpanQuery reads the rows from one position to another that
	// are within the range (and of the type, when ?5 is not NULL): one
	// scan of the table in position order, used when the positions picked
	// are dense, as they are when the range's events were saved about
	// when they were recorded.
	datedSpanQuery = `SELECT ` + feedColumns + ` FROM events NOT INDEXED
		WHERE position BETWEEN ?1 AND ?2 AND recorded_at BETWEEN ?3 AND ?4 AND (?5 IS NULL OR aggregate_type = ?5)
		ORDER BY position`
	// datedRowsQuery reads the rows at the positions picked one by one,
	// when they are sparse: the same pick as a subquery, then one look-up
	// per position.
	datedRowsQuery     = `SELECT ` + feedColumns + ` FROM events WHERE position IN (` + datedPositionsQuery + `) ORDER BY position`
	datedTypeRowsQuery = `SELECT ` + feedColumns + ` FROM events WHERE position IN (` + datedTypePositionsQuery + `) ORDER BY position`
	// datedCountQuery and datedTypeCountQuery count the positions of the
	// range after a position, up to a cap (datedCap), with the first and
	// the last, from the index alone and without sorting; datedPickQuery and datedTypePickQuery do the same for the
	// first Limit of them.
	// The count queries also return the highest position (as
	// lastPositionQuery), the Head of a page that is not full.
	datedCountQuery = `SELECT count(*), coalesce(min(position), 0), coalesce(max(position), 0), (` + lastPositionQuery + `)
		FROM (SELECT position FROM events INDEXED BY events_by_time WHERE recorded_at BETWEEN ? AND ? AND position > ? LIMIT ?)`
	datedTypeCountQuery = `SELECT count(*), coalesce(min(position), 0), coalesce(max(position), 0), (` + lastPositionQuery + `)
		FROM (SELECT position FROM events INDEXED BY events_by_time
			WHERE aggregate_type = ? AND recorded_at BETWEEN ? AND ? AND position > ? LIMIT ?)`
	datedPickQuery     = `SELECT count(*), coalesce(min(position), 0), coalesce(max(position), 0) FROM (` + datedPositionsQuery + `)`
	datedTypePickQuery = `SELECT count(*), coalesce(min(position), 0), coalesce(max(position), 0) FROM (` + datedTypePositionsQuery + `)`
	// typeFirstAfterQuery is the first position of a type's batches after
	// a feed sequence, through events_by_feed.
	typeFirstAfterQuery = `SELECT position FROM events INDEXED BY events_by_feed
		WHERE aggregate_type = ? AND feed_sequence > ? ORDER BY feed_sequence, position LIMIT 1`
)

// Reads of a range that covers every event recorded (of the type): the
// feed read in position order with the range as a filter, whose cost
// grows with the page, not with the range.
const (
	// recordedSpanQuery is the earliest and latest RecordedAt stored: one
	// index probe each. A range that covers them covers every type's
	// events too; one that covers a type's but not all is read as a range
	// (no index gives a type's earliest and latest since schema version
	// 12).
	recordedSpanQuery = `SELECT coalesce((SELECT min(recorded_at) FROM events INDEXED BY events_by_time), 0),
		coalesce((SELECT max(recorded_at) FROM events INDEXED BY events_by_time), -1)`
	// coveredQuery is feedQuery with the range; coveredTypeQuery is
	// feedTypeQuery with it.
	coveredQuery = `SELECT ` + feedColumns + ` FROM events NOT INDEXED
		WHERE position > ? AND recorded_at BETWEEN ? AND ? ORDER BY position LIMIT ?`
	coveredTypeQuery = `SELECT ` + feedColumns + ` FROM events INDEXED BY events_by_feed
		WHERE aggregate_type = ? AND feed_sequence >= ? AND position > ? AND recorded_at BETWEEN ? AND ?
		ORDER BY feed_sequence, position LIMIT ?`
)

// datedCap is how many positions of a range readDated counts at most
// before it sorts them: past it, the range is large.
func datedCap(limit int) int { return 4*limit + 64 }

// readDated reads the events of q recorded within q.From and q.To, in one
// read transaction. A type's batches after q.AfterFeedSequence are those
// from the first one's position on (a type's feed sequences rise with its
// positions), so that bound becomes a position.
func (s *store) readDated(ctx context.Context, q storage.FeedQuery, after int64, limit int) (storage.FeedPage, error) {
	from, to, _ := q.RecordedRange()
	page := storage.FeedPage{Head: after}
	err := s.reads.with(ctx, s.readDB, func(dc *rawConn) error {
		tx, err := rawBegin(ctx, dc)
		if err != nil {
			return err
		}
		defer tx.Rollback() // read only: nothing to commit
		start := after
		none := from > to
		if !none && q.AggregateType != "" && q.AfterFeedSequence > 0 {
			first := int64(-1)
			err := rawQuery(ctx, dc, typeFirstAfterQuery,
				[]driver.NamedValue{{Ordinal: 1, Value: q.AggregateType}, {Ordinal: 2, Value: q.AfterFeedSequence}},
				func(r *rawRow) error {
					first = r.int64(0)
					return nil
				})
			if err != nil {
				return err
			}
			none = first < 0
			start = max(start, first-1)
		}
		var sc scanner
		var size int64 // of the events read, with MaxBytes
		read := func(query string, args []driver.NamedValue) error {
			err := rawQuery(ctx, dc, query, args, func(r *rawRow) error {
				if q.MaxBytes > 0 && size >= q.MaxBytes {
					page.Truncated = true // and this row is visible
					return errStop
				}
				page.Events = append(page.Events, sc.event(r))
				size += storage.EventBytes(&page.Events[len(page.Events)-1])
				return nil
			})
			if errors.Is(err, errStop) {
				return nil
			}
			return err
		}
		var n, lo, hi int64 // how many positions picked, the first and the last
		last := int64(-1)   // the highest position, when read
		if !none {
			args := []driver.NamedValue{{Ordinal: 1, Value: from}, {Ordinal: 2, Value: to}, {Ordinal: 3, Value: start}, {Ordinal: 4, Value: int64(limit)}}
			if q.AggregateType != "" {
				args = append([]driver.NamedValue{{Ordinal: 1, Value: q.AggregateType}}, args...)
				for i := range args {
					args[i].Ordinal = i + 1
				}
			}
			count := func(query string, args []driver.NamedValue) error {
				return rawQuery(ctx, dc, query, args, func(r *rawRow) error {
					n, lo, hi = r.int64(0), r.int64(1), r.int64(2)
					if len(r.dest) > 3 {
						last = r.int64(3)
					}
					return nil
				})
			}
			countQuery, pickQuery := datedCountQuery, datedPickQuery
			if q.AggregateType != "" {
				countQuery, pickQuery = datedTypeCountQuery, datedTypePickQuery
			}
			// Count the range's positions after start, up to a cap,
			// without sorting them.
			capped := slices.Clone(args)
			capped[len(capped)-1].Value = int64(datedCap(limit))
			if err := count(countQuery, capped); err != nil {
				return err
			}
			covered := false
			if n == int64(datedCap(limit)) {
				// A large range: when it covers everything stored, read in
				// position order with the range as a filter (a range such
				// as year 1 to 9999 would make the sort below visit every
				// entry of the index).
				err := rawQuery(ctx, dc, recordedSpanQuery, nil, func(r *rawRow) error {
					covered = from <= r.int64(0) && r.int64(1) <= to
					return nil
				})
				if err != nil {
					return err
				}
			}
			switch {
			case covered && q.AggregateType == "":
				n = 0 // read here
				err := read(coveredQuery, []driver.NamedValue{{Ordinal: 1, Value: start}, {Ordinal: 2, Value: from}, {Ordinal: 3, Value: to}, {Ordinal: 4, Value: int64(limit)}})
				if err != nil {
					return err
				}
			case covered:
				n = 0
				fs, err := typeFeedStart(ctx, dc, q.AggregateType, start, max(q.AfterFeedSequence, 0)+1)
				if err != nil {
					return err
				}
				err = read(coveredTypeQuery, []driver.NamedValue{{Ordinal: 1, Value: q.AggregateType}, {Ordinal: 2, Value: fs},
					{Ordinal: 3, Value: start}, {Ordinal: 4, Value: from}, {Ordinal: 5, Value: to}, {Ordinal: 6, Value: int64(limit)}})
				if err != nil {
					return err
				}
			case n > int64(limit):
				// Sort to find the first limit.
				if err := count(pickQuery, args); err != nil {
					return err
				}
			}
		}
		if n > 0 {
			var query string
			var args []driver.NamedValue
			if hi-lo < 2*n {
				var typ any // NULL: every type
				if q.AggregateType != "" {
					typ = q.AggregateType
				}
				query = datedSpanQuery
				args = []driver.NamedValue{{Ordinal: 1, Value: lo}, {Ordinal: 2, Value: hi}, {Ordinal: 3, Value: from}, {Ordinal: 4, Value: to}, {Ordinal: 5, Value: typ}}
			} else {
				query = datedRowsQuery
				args = []driver.NamedValue{{Ordinal: 1, Value: from}, {Ordinal: 2, Value: to}, {Ordinal: 3, Value: start}, {Ordinal: 4, Value: int64(limit)}}
				if q.AggregateType != "" {
					query = datedTypeRowsQuery
					args = append([]driver.NamedValue{{Ordinal: 1, Value: q.AggregateType}}, args...)
					for i := range args {
						args[i].Ordinal = i + 1
					}
				}
			}
			if err := read(query, args); err != nil {
				return err
			}
		}
		if n := len(page.Events); n == limit || page.Truncated {
			page.Head = page.Events[n-1].Position
			return nil
		}
		// The snapshot holds nothing more that matches: move Head to its end.
		if last >= 0 {
			page.Head = max(after, last)
			return nil
		}
		return rawQuery(ctx, dc, lastPositionQuery, nil, func(r *rawRow) error {
			page.Head = max(after, r.int64(0))
			return nil
		})
	})
	return page, err
}
