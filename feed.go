package eventstore

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/eventkit-go/eventstore/storage"
	"go.opentelemetry.io/otel/trace"
)

// Limits of a feed read (the others are in internal/limits).
const (
	// maxFeedEvents bounds the events of one read: a read stops adding
	// entries (and reports HasMore) once it holds that many.
	maxFeedEvents = 20_000
	// maxPageEvents bounds the events of one Storage.ReadFeed call.
	maxPageEvents = 5000
)

// FeedOptions are optional arguments of Store.ReadFeed and Store.Subscribe;
// nil means all defaults.
type FeedOptions struct {
	Limit int      // the most entries a read returns; it also stops at 20,000 events
	Types []string // only these aggregate types, in the feed of all types
	// PartitionCount > 0 keeps only partition PartitionNumber (Partition).
	PartitionCount, PartitionNumber int
	// From and To, when not zero, keep the entries whose RecordedAt is in
	// [From, To] (years 1 to 9999), still in feed order.
	From, To time.Time
	Wait     time.Duration // how long ReadFeed waits for an entry (a long poll)
	// poll, when not 0, is the PollInterval of this read
	// (hooks.FeedPoll).
	poll time.Duration
}

// FeedEntry is one saved batch: the events one Save (or one batch of a
// SaveAll) appended to one aggregate.
type FeedEntry struct {
	// Cursor is the entry's number in the feed read, to read on after:
	// its FeedSequence, or in the feed of all types its last Position.
	Cursor                     int64
	AggregateType, AggregateID string
	Version                    int64 // the aggregate version the batch produced
	RecordedAt                 time.Time
	Events                     []Event
}

// FeedResult is the result of Store.ReadFeed.
type FeedResult struct {
	Entries []FeedEntry // after the cursor, in feed order
	HasMore bool        // entries exist after the returned ones
	Next    int64       // the cursor to read on from, past entries Types or partitions left out
	Head    int64       // the feed's latest FeedSequence or Position, whatever the options
}

// CursorAheadError (wrapping ErrConflict) refuses a feed read after a
// cursor past the head: one never given, or lost by a restore or failover.
type CursorAheadError struct {
	AggregateType string // the feed's type, "" for the feed of all types
	Cursor        int64  // the cursor read after
	Head          int64  // the feed's head (FeedResult.Head)
}

// Error implements the error interface.
func (e *CursorAheadError) Error() string {
	return fmt.Sprintf("eventstore: read %s after %d: the cursor is past the feed's head %d: %v",
		feedName(e.AggregateType), e.Cursor, e.Head, ErrConflict)
}

// Unwrap returns ErrConflict.
func (e *CursorAheadError) Unwrap() error { return ErrConflict }

// ReadFeed reads the feed of aggregateType ("" for all types) after the
// cursor after (0 for the start); a reader going on from Next sees every
// entry once, in order (see Feeds in the package doc). With opts.Wait it
// long-polls until an entry exists. A type without events is ErrNotFound,
// a cursor past the feed's head a *CursorAheadError.
func (s *Store) ReadFeed(ctx context.Context, aggregateType string, after int64, opts *FeedOptions) (res FeedResult, err error) {
	var span tracing.Span
	if s.tracer.Enabled() { // inlined: no call while nothing traces
		ctx, span = s.tracer.Start(ctx, spanReadFeed, trace.SpanKindInternal)
		defer func() { endReadFeed(span, aggregateType, after, opts, res, err) }()
	}
	q, err := s.feedQuery(aggregateType, after, opts)
	if err != nil {
		return FeedResult{}, err
	}
	var wait, poll time.Duration
	if opts != nil {
		wait, poll = opts.Wait, max(opts.poll, 0)
	}
	if wait <= 0 {
		return s.readFeed(ctx, q)
	}
	deadline := time.Now().Add(wait)
	for {
		changed := s.watch()
		res, err := s.readFeed(ctx, q)
		if err != nil || len(res.Entries) > 0 || !time.Now().Before(deadline) {
			return res, err
		}
		q.after = res.Next
		if !s.waitChange(ctx, changed, nil, poll, deadline) {
			if err := ctx.Err(); err != nil {
				return FeedResult{}, fmt.Errorf("%s: %w", q.name(), err)
			}
			return FeedResult{}, fmt.Errorf("%s: %w", q.name(), ErrClosed)
		}
	}
}

// FeedHead returns the latest FeedSequence of aggregateType, or for "" the
// latest Position of all types (0 when empty). A type without events fails
// with ErrNotFound.
func (s *Store) FeedHead(ctx context.Context, aggregateType string) (int64, error) {
	if aggregateType != "" {
		v := validation{op: "read feed"}
		checkName(&v, "aggregateType", aggregateType)
		if err := v.err(); err != nil {
			return 0, err
		}
	}
	if s.closed.Load() {
		return 0, fmt.Errorf("feed head: %w", ErrClosed)
	}
	h, err := s.storage.FeedHead(ctx, aggregateType)
	if err != nil {
		return 0, wrapNotFound(feedName(aggregateType), err)
	}
	return h, nil
}

// Feeds returns the counts of every aggregate type that has events, by type.
func (s *Store) Feeds(ctx context.Context) ([]FeedInfo, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("feeds: %w", ErrClosed)
	}
	fs, err := s.storage.Feeds(ctx)
	if err != nil {
		return nil, fmt.Errorf("feeds: %w", err)
	}
	return fs, nil
}

func feedName(aggregateType string) string {
	if aggregateType == "" {
		return "feed of all types"
	}
	return fmt.Sprintf("feed %s", aggregateType)
}

// feedQuery is a validated feed read.
type feedQuery struct {
	typ        string
	after      int64
	limit      int
	types      []string
	partitions uint32
	partition  uint32
	from, to   time.Time // zero: unbounded
}

func (q *feedQuery) name() string { return "read " + feedName(q.typ) }

func (s *Store) feedQuery(aggregateType string, after int64, opts *FeedOptions) (feedQuery, error) {
	v := validation{op: "read feed"}
	if aggregateType != "" {
		checkName(&v, "aggregateType", aggregateType)
	}
	if opts == nil {
		opts = &FeedOptions{}
	}
	q := feedQuery{typ: aggregateType, after: after, limit: opts.Limit}
	if after < 0 {
		v.add("since", "must not be negative, got %d", after)
	}
	switch {
	case opts.Limit == 0:
		q.limit = limits.DefaultFeedLimit
	case opts.Limit < 0 || opts.Limit > limits.MaxFeedLimit:
		v.add("limit", "must be between 1 and %d, got %d", limits.MaxFeedLimit, opts.Limit)
	}
	switch {
	case len(opts.Types) > 0 && aggregateType != "":
		v.add("filterType", "is only allowed on the feed of all types")
	case len(opts.Types) > limits.MaxFeedTypes:
		v.add("filterType", "at most %d types are allowed, got %d", limits.MaxFeedTypes, len(opts.Types))
	default:
		for i, t := range opts.Types {
			checkName(&v, fmt.Sprintf("filterType[%d]", i), t)
			if !slices.Contains(q.types, t) {
				q.types = append(q.types, t)
			}
		}
		slices.Sort(q.types)
	}
	switch {
	case opts.PartitionCount == 0 && opts.PartitionNumber == 0:
	case opts.PartitionCount < 1 || opts.PartitionCount > limits.MaxPartitionCount:
		v.add("partitionCount", "must be between 1 and %d, got %d", limits.MaxPartitionCount, opts.PartitionCount)
	case opts.PartitionNumber < 0 || opts.PartitionNumber >= opts.PartitionCount:
		v.add("partitionNumber", "must be between 0 and partitionCount-1 (%d), got %d", opts.PartitionCount-1, opts.PartitionNumber)
	default:
		q.partitions, q.partition = uint32(opts.PartitionCount), uint32(opts.PartitionNumber)
	}
	for _, b := range []struct {
		field string
		t     time.Time
	}{{"from", opts.From}, {"to", opts.To}} {
		if !b.t.IsZero() && (b.t.Before(limits.MinFeedTime) || b.t.After(limits.MaxFeedTime)) {
			v.add(b.field, "must be between %s and %s, got %s", limits.MinFeedTime.Format(time.RFC3339), limits.MaxFeedTime.Format(time.RFC3339Nano), b.t.UTC().Format(time.RFC3339Nano))
		}
	}
	if !opts.From.IsZero() && !opts.To.IsZero() && opts.From.After(opts.To) {
		v.add("from", "must not be after to (%s), got %s", opts.To.UTC().Format(time.RFC3339Nano), opts.From.UTC().Format(time.RFC3339Nano))
	}
	if err := v.err(); err != nil {
		return feedQuery{}, err
	}
	q.from, q.to = opts.From, opts.To
	return q, nil
}

// Partition returns the partition of aggregateID's entries among
// partitionCount (FeedOptions.PartitionCount): FNV-1a-32 of the id's
// bytes mod partitionCount, or 0 when partitionCount < 1.
func Partition(aggregateID string, partitionCount int) int {
	if partitionCount < 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(aggregateID))
	return int(h.Sum32() % uint32(partitionCount))
}

// readFeed reads one page of entries.
func (s *Store) readFeed(ctx context.Context, q feedQuery) (FeedResult, error) {
	if s.closed.Load() {
		return FeedResult{}, fmt.Errorf("%s: %w", q.name(), ErrClosed)
	}
	// Each batch has at least one event; read a little more than limit+1
	// (to know HasMore), more when a partition keeps only some.
	pageSize := min(max(q.limit+2, 64)*max(int(q.partitions), 1), maxPageEvents)
	var srcs []*batchReader
	if len(q.types) == 0 {
		srcs = []*batchReader{newBatchReader(s, &q, q.typ, q.typ != "", pageSize)}
	} else {
		for _, t := range q.types {
			srcs = append(srcs, newBatchReader(s, &q, t, false, pageSize))
		}
	}
	res := FeedResult{Next: q.after}
	events := 0
	for {
		var best *batchReader
		bound := int64(-1) // how far every exhausted source is known
		for _, r := range srcs {
			b, err := r.peek(ctx)
			if err != nil {
				return FeedResult{}, fmt.Errorf("%s: %w", q.name(), err)
			}
			if b == nil {
				if bound < 0 || r.verified() < bound {
					bound = r.verified()
				}
				continue
			}
			if best == nil || b[0].Position < best.cur[0].Position {
				best = r
			}
		}
		if best == nil || (bound >= 0 && best.cur[0].Position > bound) {
			// Nothing more is visible (in every source, up to bound).
			res.Next = max(res.Next, bound)
			break
		}
		batch := best.cur
		best.cur = nil
		cursor := batch[len(batch)-1].Position
		if best.byFS {
			cursor = batch[0].FeedSequence
		}
		if q.partitions > 0 && uint32(Partition(batch[0].AggregateID, int(q.partitions))) != q.partition {
			res.Next = max(res.Next, cursor)
			continue
		}
		if len(res.Entries) == q.limit || (events >= maxFeedEvents && len(res.Entries) > 0) {
			res.HasMore = true
			break
		}
		res.Entries = append(res.Entries, FeedEntry{
			Cursor:        cursor,
			AggregateType: batch[0].AggregateType, AggregateID: batch[0].AggregateID,
			Version: batch[0].Version, RecordedAt: batch[0].RecordedAt,
			Events: batch,
		})
		events += len(batch)
		res.Next = max(res.Next, cursor)
	}
	// The head is read after the entries, so it is never behind them.
	head, err := s.storage.FeedHead(ctx, q.typ)
	switch {
	case err == nil && q.after > head:
		return FeedResult{}, &CursorAheadError{AggregateType: q.typ, Cursor: q.after, Head: head}
	case err == nil:
		res.Head = head
	case isNotFound(err) && len(res.Entries) == 0:
		return FeedResult{}, fmt.Errorf("%s: %w", q.name(), ErrNotFound)
	case isNotFound(err):
		// Deleted since it was read.
	default:
		return FeedResult{}, fmt.Errorf("%s: head: %w", q.name(), err)
	}
	return res, nil
}

// batchReader reads whole batches from one feed: that of one aggregate
// type by FeedSequence (byFS), or by position restricted to typ ("" for
// all types). Storage.ReadFeed may end a page in the middle of a batch;
// the reader completes such a batch before returning it.
type batchReader struct {
	s        *Store
	byFS     bool
	q        storage.FeedQuery
	pageSize int
	buf      []Event // read, not yet returned
	done     bool    // the last read was not full: buf holds all that is visible
	cur      []Event // the batch peek returned, until taken
	skipTo   int64   // position mode: the first read started one event early, to see whether the cursor is mid-batch
	start    int64   // the cursor read from
	// cutLen, position mode: the length of the batch the last page ended
	// in, read on to find the rest; 0 when the last page ended no batch.
	cutLen int
}

func newBatchReader(s *Store, fq *feedQuery, typ string, byFS bool, pageSize int) *batchReader {
	after := fq.after
	r := &batchReader{s: s, byFS: byFS, pageSize: pageSize, start: after}
	r.q = storage.FeedQuery{AggregateType: typ, From: fq.from, To: fq.to}
	switch {
	case byFS:
		r.q.AfterFeedSequence = after
	case after > 0:
		r.q.After = after - 1
		r.skipTo = after
	}
	return r
}

// verified returns the cursor up to which the reader has seen the feed.
func (r *batchReader) verified() int64 {
	if r.byFS {
		return max(r.start, r.q.AfterFeedSequence)
	}
	return max(r.start, r.q.After)
}

// read appends the next page to buf.
func (r *batchReader) read(ctx context.Context) error {
	q := r.q
	q.Limit, q.MaxBytes = r.pageSize, r.s.readBytes
	page, err := r.s.storage.ReadFeed(ctx, q)
	if err != nil {
		return err
	}
	n := len(page.Events)
	r.done = n < r.pageSize && !page.Truncated
	if r.byFS {
		if n > 0 {
			r.q.AfterFeedSequence = max(r.q.AfterFeedSequence, page.Events[n-1].FeedSequence)
		}
	} else {
		r.q.After = max(r.q.After, page.Head)
		if n > 0 {
			r.q.After = max(r.q.After, page.Events[n-1].Position)
		}
	}
	r.buf = append(r.buf, page.Events...)
	return nil
}

// peek returns the next whole batch, or nil when no more is visible now.
func (r *batchReader) peek(ctx context.Context) ([]Event, error) {
	for r.cur == nil {
		if len(r.buf) == 0 {
			if r.done {
				return nil, nil
			}
			if err := r.read(ctx); err != nil {
				return nil, err
			}
			if len(r.buf) == 0 {
				return nil, nil
			}
		}
		k := batchLen(r.buf)
		cut := k == len(r.buf) && !r.done // may go on past the page
		if cutLen := r.cutLen; cutLen > 0 {
			r.cutLen = 0
			if k == cutLen && !cut {
				// The page read on brought none of the batch: it ended
				// with the last page, or its aggregate was deleted in
				// between and the rest is gone. Load it whole, or drop
				// it: never a part of a batch as if it were whole.
				b, err := r.complete(ctx, r.buf[:k])
				if err != nil {
					return nil, err
				}
				r.buf = r.buf[k:]
				r.cur = b
				continue
			}
		}
		if r.skipTo > 0 {
			// The first read started at the event at position after-1:
			// only a batch that holds after and goes on past it is
			// delivered (whole); one that ends at after was read before.
			first := r.buf[0].Position
			r.skipTo = 0
			switch {
			case first == r.start && k == 1 && !cut:
				r.buf = r.buf[1:]
				continue
			case first == r.start:
				b, err := r.complete(ctx, r.buf[:k])
				if err != nil {
					return nil, err
				}
				r.buf = r.buf[k:]
				if b != nil && b[len(b)-1].Position > r.start {
					r.cur = b
				}
				continue
			}
		}
		if cut {
			if r.byFS {
				b, err := r.complete(ctx, r.buf[:k])
				if err != nil {
					return nil, err
				}
				r.buf = nil
				r.cur = b
				continue
			}
			// By position the rest of the batch comes next: read on.
			r.buf = slices.Clip(r.buf)
			r.cutLen = k
			if err := r.read(ctx); err != nil {
				return nil, err
			}
			continue
		}
		r.cur, r.buf = r.buf[:k:k], r.buf[k:]
	}
	return r.cur, nil
}

// complete returns the whole batch that part belongs to, loaded from the
// aggregate, or nil when it was deleted meanwhile. It moves the reader's
// cursor past it.
func (r *batchReader) complete(ctx context.Context, part []Event) ([]Event, error) {
	e := part[0]
	agg, err := r.s.storage.Load(ctx, storage.LoadQuery{AggregateType: e.AggregateType, AggregateID: e.AggregateID, AfterVersion: e.Version - 1, Limit: 1})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("complete batch %s/%s version %d: %w", e.AggregateType, e.AggregateID, e.Version, err)
	}
	b := agg.Events
	if len(b) == 0 || b[0].Version != e.Version || b[0].FeedSequence != e.FeedSequence || b[0].Position > e.Position {
		return nil, nil // deleted, and the id used again
	}
	if r.byFS {
		r.q.AfterFeedSequence = max(r.q.AfterFeedSequence, e.FeedSequence)
	} else {
		r.q.After = max(r.q.After, b[len(b)-1].Position)
	}
	return b, nil
}

// batchLen returns how many events at the start of events belong to the
// same batch.
func batchLen(events []Event) int {
	e := &events[0]
	k := 1
	for k < len(events) {
		f := &events[k]
		if f.Version != e.Version || f.FeedSequence != e.FeedSequence || f.AggregateID != e.AggregateID || f.AggregateType != e.AggregateType {
			break
		}
		k++
	}
	return k
}
