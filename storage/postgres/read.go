package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Load implements storage.Storage. The whole history is read by one
// plain query; a range of versions by loadRange, which reads the current
// version in the same snapshot.
func (s *store) Load(ctx context.Context, q storage.LoadQuery) (storage.Aggregate, error) {
	if err := s.check(ctx, "load"); err != nil {
		return storage.Aggregate{}, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	notFound := func() error {
		return fmt.Errorf("aggregate %s/%s: %w", q.AggregateType, q.AggregateID, storage.ErrNotFound)
	}
	agg := storage.Aggregate{Type: q.AggregateType, ID: q.AggregateID}
	after := max(q.AfterVersion, 0)
	if after == 0 && q.Limit <= 0 && q.MaxBytes <= 0 {
		rows, err := s.query(ctx, s.sql.load, q.AggregateType, q.AggregateID)
		if err != nil {
			return storage.Aggregate{}, s.fail(ctx, "load", err)
		}
		events, err := scanEvents(rows, nil)
		if err != nil {
			return storage.Aggregate{}, s.fail(ctx, "load", err)
		}
		if len(events) == 0 {
			return storage.Aggregate{}, notFound()
		}
		agg.Version, agg.Events = events[len(events)-1].Version, events
		return agg, nil
	}
	upTo := int64(1<<63 - 1)
	if q.Limit > 0 && after <= upTo-q.Limit {
		upTo = after + q.Limit
	}
	rows, err := s.query(ctx, s.sql.loadRange, q.AggregateType, q.AggregateID, after, upTo, q.Limit <= 0)
	if err != nil {
		return storage.Aggregate{}, s.fail(ctx, "load", err)
	}
	found := false
	agg.Events, err = scanHeadEvents(rows, func(current int64) { found, agg.Version = true, current },
		&budget{max: q.MaxBytes, byVersion: true})
	if err != nil {
		return storage.Aggregate{}, s.fail(ctx, "load", err)
	}
	if !found {
		return storage.Aggregate{}, notFound()
	}
	return agg, nil
}

// scanEvents reads rows of selectCols, up to the end of b (nil for none),
// and closes rows.
func scanEvents(rows pgx.Rows, b *budget) ([]storage.Event, error) {
	if b == nil {
		b = &budget{}
	}
	if d := (rowDecoder{budget: *b}); d.checkFormats(rows) {
		err := d.decode(rows)
		*b = d.budget
		return d.events, err
	}
	defer rows.Close()
	var events []storage.Event
	for !b.cut && rows.Next() {
		var e storage.Event
		var data []byte
		var meta string
		if err := rows.Scan(&e.Position, &e.AggregateType, &e.AggregateID, &e.ID, &e.Type,
			&data, &e.Version, &e.Sequence, &e.RecordedAt, &e.FeedSequence, &e.EncryptedData, &meta); err != nil {
			return nil, err
		}
		var err error
		if e.Metadata, err = storage.ParseMetadataString(meta); err != nil {
			return nil, err
		}
		e.Data = data
		e.RecordedAt = e.RecordedAt.UTC()
		if b.take(&e) {
			events = append(events, e)
		}
	}
	rows.Close()
	return events, rows.Err()
}

// scanHeadEvents reads rows of a number followed by the event columns,
// where a row with position 0 carries only the number, up to the end of b,
// and closes rows. It calls head with the number of every row read; the
// number must be the same in every row.
func scanHeadEvents(rows pgx.Rows, head func(int64), b *budget) ([]storage.Event, error) {
	if d := (rowDecoder{lead: 1, budget: *b}); d.checkFormats(rows) {
		err := d.decode(rows)
		*b = d.budget
		for _, h := range d.lead0 {
			head(h)
		}
		return d.events, err
	}
	defer rows.Close()
	var events []storage.Event
	for !b.cut && rows.Next() {
		var e storage.Event
		var data []byte
		var h int64
		var meta string
		if err := rows.Scan(&h, &e.Position, &e.AggregateType, &e.AggregateID, &e.ID, &e.Type,
			&data, &e.Version, &e.Sequence, &e.RecordedAt, &e.FeedSequence, &e.EncryptedData, &meta); err != nil {
			return nil, err
		}
		var err error
		if e.Metadata, err = storage.ParseMetadataString(meta); err != nil {
			return nil, err
		}
		head(h)
		if e.Position == 0 {
			continue // no event: the row only carries the number
		}
		e.Data = data
		e.RecordedAt = e.RecordedAt.UTC()
		if b.take(&e) {
			events = append(events, e)
		}
	}
	rows.Close()
	return events, rows.Err()
}

// ReadFeed implements storage.Storage. Writers commit side by side, not
// in position order (see runBatch): every read returns only the rows of
// transactions below the watermark (see statements.watermark), below
// which every position is visible or never will be, so a read in position
// order never skips an event that commits later.
func (s *store) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	if err := s.check(ctx, "read feed"); err != nil {
		return storage.FeedPage{}, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	limit := max(q.Limit, 1)
	after := max(q.After, 0)
	if q.AfterFeedSequence > 0 && q.AggregateType == "" {
		return storage.FeedPage{}, fmt.Errorf("postgres: read feed: AfterFeedSequence without an AggregateType: %w",
			storage.ErrInvalid)
	}
	from, to, dated := q.RecordedRange()
	if dated && from > to {
		// An empty range: nothing, and Head at the end of the feed.
		var head int64
		if err := s.queryRowWM(ctx, []any{&head}, s.sql.head); err != nil {
			return storage.FeedPage{}, s.fail(ctx, "read feed", err)
		}
		return storage.FeedPage{Head: max(after, head)}, nil
	}
	if q.AggregateType == "" {
		var rows pgx.Rows
		var br pgx.BatchResults
		var err error
		if dated {
			rows, br, err = s.queryWM(ctx, s.sql.feedDated, after, limit, pgTime(from), pgTime(to))
		} else {
			rows, br, err = s.queryWM(ctx, s.sql.feed, after, limit)
		}
		if err != nil {
			return storage.FeedPage{}, s.fail(ctx, "read feed", err)
		}
		b := budget{max: q.MaxBytes, rows: limit}
		events, err := scanEvents(rows, &b)
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return storage.FeedPage{}, s.fail(ctx, "read feed", err)
		}
		page := storage.FeedPage{Events: events, Head: after, Truncated: b.cut}
		if len(events) > 0 {
			page.Head = events[len(events)-1].Position
			s.sawHead(ctx, page.Head) // not after: a caller's cursor
		}
		return page, nil
	}

	// The feed of one type: read the highest visible position in the same
	// statement, so that a quiet feed's Head keeps up with the store.
	var rows pgx.Rows
	var br pgx.BatchResults
	var err error
	switch {
	case dated:
		rows, br, err = s.queryWM(ctx, s.sql.feedTypeDated, after, limit, pgTime(from), pgTime(to),
			q.AggregateType, max(q.AfterFeedSequence, 0))
	case q.AfterFeedSequence > 0:
		rows, br, err = s.queryWM(ctx, s.sql.feedSeq, q.AfterFeedSequence, limit, q.AggregateType, after)
	default:
		rows, br, err = s.queryWM(ctx, s.sql.feedType, after, limit, q.AggregateType)
	}
	if err != nil {
		return storage.FeedPage{}, s.fail(ctx, "read feed", err)
	}
	var head int64
	b := budget{max: q.MaxBytes, rows: limit}
	events, err := scanHeadEvents(rows, func(h int64) { head = h }, &b)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return storage.FeedPage{}, s.fail(ctx, "read feed", err)
	}
	page := storage.FeedPage{Events: events, Head: max(after, head), Truncated: b.cut}
	if len(events) == limit || b.cut {
		page.Head = events[len(events)-1].Position
	}
	// A type's head is below the store's, as usual: no rewind check.
	// Not page.Head, which may be after (a caller's cursor).
	s.see(head)
	if len(events) > 0 {
		s.see(events[len(events)-1].Position)
	}
	return page, nil
}

// pgMinMicros is the start of 4712 BC in Unix microseconds, within the
// range of timestamptz (which starts in 4713 BC); its end is past that of
// int64 microseconds.
var pgMinMicros = time.Date(-4711, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()

// pgTime returns a bound of storage.FeedQuery.RecordedRange as a
// timestamptz parameter: infinite beyond the range PostgreSQL stores.
func pgTime(micros int64) pgtype.Timestamptz {
	switch {
	case micros < pgMinMicros:
		return pgtype.Timestamptz{InfinityModifier: pgtype.NegativeInfinity, Valid: true}
	case micros == math.MaxInt64:
		return pgtype.Timestamptz{InfinityModifier: pgtype.Infinity, Valid: true}
	}
	return pgtype.Timestamptz{Time: time.UnixMicro(micros).UTC(), Valid: true}
}

// FeedHead implements storage.Storage. A type whose events were all
// deleted still has a head (the FeedSequence of its last batch); only a
// type that never had events wraps ErrNotFound.
func (s *store) FeedHead(ctx context.Context, aggregateType string) (int64, error) {
	if err := s.check(ctx, "feed head"); err != nil {
		return 0, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	if aggregateType == "" {
		var head int64
		if err := s.queryRowWM(ctx, []any{&head}, s.sql.head); err != nil {
			return 0, s.fail(ctx, "feed head", err)
		}
		s.sawHead(ctx, head)
		return head, nil
	}
	var stored, mark *int64
	if err := s.queryRowWM(ctx, []any{&stored, &mark}, s.sql.typeHead, aggregateType); err != nil {
		return 0, s.fail(ctx, "feed head", err)
	}
	switch {
	case stored == nil && mark == nil:
		return 0, fmt.Errorf("feed %s: %w", aggregateType, storage.ErrNotFound)
	case stored == nil:
		return *mark, nil
	case mark == nil:
		return *stored, nil
	}
	return max(*stored, *mark), nil
}

// Feeds implements storage.Storage. It counts the events of every type,
// so its cost grows with the store.
func (s *store) Feeds(ctx context.Context) ([]storage.FeedInfo, error) {
	if err := s.check(ctx, "feeds"); err != nil {
		return nil, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	rows, err := s.query(ctx, s.sql.feeds)
	if err != nil {
		return nil, s.fail(ctx, "feeds", err)
	}
	feeds := []storage.FeedInfo{}
	var f storage.FeedInfo
	_, err = pgx.ForEachRow(rows, []any{&f.AggregateType, &f.AggregateCount, &f.BatchCount, &f.EventCount}, func() error {
		feeds = append(feeds, f)
		return nil
	})
	if err != nil {
		return nil, s.fail(ctx, "feeds", err)
	}
	return feeds, nil
}

// queryWM runs the watermark statement (which sets the tenant), then sql, in one pipeline (one
// round trip), and returns the rows of sql; the caller closes br after
// reading them.
func (s *store) queryWM(ctx context.Context, sql string, args ...any) (rows pgx.Rows, br pgx.BatchResults, err error) {
	if s.replica != nil {
		return s.replica.queryWM(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	b.Queue(s.sql.watermark, s.tenant)
	b.Queue(sql, args...)
	br = s.pool.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, nil, err
	}
	if rows, err = br.Query(); err != nil {
		br.Close()
		return nil, nil, err
	}
	return rows, br, nil
}

// queryRowWM is queryWM for a statement of one row, scanned into dest.
func (s *store) queryRowWM(ctx context.Context, dest []any, sql string, args ...any) error {
	rows, br, err := s.queryWM(ctx, sql, args...)
	if err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, dest, func() error { return nil })
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// FeedLag returns how many positions the feed readers of s, a Storage of
// this package, are behind the newest committed append: the positions
// between the head they see and the highest position committed. It is 0
// unless an append committed while an older one was still in flight (which
// holds readers back until it ends: see ReadFeed), so a value that stays
// up points at a stuck append transaction. It returns an error wrapping
// storage.ErrInvalid when s is not a Storage of this package.
func FeedLag(ctx context.Context, s storage.Storage) (int64, error) {
	pg, ok := asStore(s)
	if !ok {
		return 0, fmt.Errorf("postgres: feed lag: %T is not a PostgreSQL storage: %w", s, storage.ErrInvalid)
	}
	if err := pg.check(ctx, "feed lag"); err != nil {
		return 0, err
	}
	ctx, cancel := pg.readCtx(ctx)
	defer cancel()
	var lag int64
	if err := pg.queryRowWM(ctx, []any{&lag}, pg.sql.feedLag); err != nil {
		return 0, pg.fail(ctx, "feed lag", err)
	}
	return lag, nil
}
