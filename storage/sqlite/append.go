package sqlite

import (
	"context"
	"errors"
	"fmt"

	"github.com/eventkit-go/eventstore/internal/groupcommit"
	"github.com/eventkit-go/eventstore/storage"
)

// job is one call waiting in the group-commit batcher: the request of an
// Append, or the requests of an AppendAll, which are written all or none.
type job struct {
	one *storage.AppendRequest
	all []storage.AppendRequest
	// results are AppendAll's results, set by runBatch when it succeeds.
	results []storage.AppendResult
}

// Append implements storage.Storage. Concurrent calls are committed
// together, in one transaction, by the group-commit batcher; each keeps its
// own outcome.
func (s *store) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	defer s.span(&ctx, "Append")()
	if err := s.check(ctx, "append"); err != nil {
		return storage.AppendResult{}, err
	}
	res, err := s.batcher.Do(ctx, &job{one: &req})
	if err != nil {
		return storage.AppendResult{}, s.fail(ctx, "append", err)
	}
	return res, nil
}

// AppendAll implements storage.Storage. The requests join the group
// commit as one unit inside their own savepoint: when one of them fails its
// checks the savepoint is rolled back, so none is written, while the other
// calls of the same transaction are unaffected.
func (s *store) AppendAll(ctx context.Context, reqs []storage.AppendRequest) ([]storage.AppendResult, error) {
	defer s.span(&ctx, "AppendAll")()
	if err := s.check(ctx, "append all"); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return []storage.AppendResult{}, nil
	}
	j := &job{all: reqs}
	if _, err := s.batcher.Do(ctx, j); err != nil {
		var be *storage.BatchError
		if errors.As(err, &be) {
			return nil, be
		}
		return nil, s.fail(ctx, "append all", err)
	}
	return j.results, nil
}

// fatalError marks an error that leaves the batch's transaction unusable:
// the whole batch is rolled back and every request fails with it.
type fatalError struct{ err error }

func (e fatalError) Error() string { return e.err.Error() }
func (e fatalError) Unwrap() error { return e.err }

// runBatch commits a batch of jobs in one transaction, each request inside
// its own savepoint and each AppendAll inside one more. The batcher runs one
// batch at a time; the other writes (projections, deletions) wait for the
// write connection.
func (s *store) runBatch(ctx context.Context, jobs []*job) []groupcommit.Result[storage.AppendResult] {
	var results []groupcommit.Result[storage.AppendResult]
	err := s.onWriteConn(ctx, func(c *writeConn) error {
		results = s.runBatchOn(ctx, c, jobs)
		return nil
	})
	if err != nil {
		return failAll(make([]groupcommit.Result[storage.AppendResult], len(jobs)), s.fail(ctx, "append", err))
	}
	return results
}

// failAll sets every result to err and returns results.
func failAll(results []groupcommit.Result[storage.AppendResult], err error) []groupcommit.Result[storage.AppendResult] {
	for i := range results {
		results[i] = groupcommit.Result[storage.AppendResult]{Err: err}
	}
	return results
}

// runBatchOn is runBatch on the write connection c.
func (s *store) runBatchOn(ctx context.Context, c *writeConn, jobs []*job) []groupcommit.Result[storage.AppendResult] {
	results := make([]groupcommit.Result[storage.AppendResult], len(jobs))
	if err := c.exec(ctx, stmtBegin); err != nil {
		return failAll(results, s.fail(ctx, "append", err))
	}
	h := c.takeHead()
	w := writer{c: c, position: h.position, known: h.feeds, knownAggs: h.aggs}
	wrote := false
	for i, j := range jobs {
		var res storage.AppendResult
		var err error
		if j.one != nil {
			res, err = w.append(ctx, j.one, len(j.one.Events) > 1)
		} else {
			err = w.appendAll(ctx, j)
		}
		var fatal fatalError
		if errors.As(err, &fatal) {
			c.rollback(ctx)
			return failAll(results, s.fail(ctx, "append", fatal.err))
		}
		var be *storage.BatchError
		switch {
		case errors.As(err, &be):
			be.Err = s.fail(ctx, "append", be.Err)
		case err != nil:
			err = s.fail(ctx, "append", err)
		case j.one != nil:
			wrote = wrote || !res.Duplicate
		default:
			for _, r := range j.results {
				wrote = wrote || !r.Duplicate
			}
		}
		results[i] = groupcommit.Result[storage.AppendResult]{Value: res, Err: err}
	}
	if !wrote {
		c.rollback(ctx) // nothing to make durable
		return results
	}
	if err := w.flush(ctx); err != nil {
		c.rollback(ctx)
		return failAll(results, s.fail(ctx, "append", err))
	}
	if err := c.exec(ctx, stmtCommit); err != nil {
		// A failed COMMIT may leave the transaction open: end it, so
		// that the next one can begin.
		c.rollback(ctx)
		err = s.fail(ctx, "append: commit", err)
		for i := range results {
			if results[i].Err == nil {
				results[i] = groupcommit.Result[storage.AppendResult]{Err: err}
			}
		}
		return results
	}
	c.keepHead(w.position, w.feeds, w.aggs)
	return results
}

// writer holds the transaction of one batch, on the write connection c,
// and the counters it advances.
type writer struct {
	c *writeConn
	// args is the inserts' reused argument buffer.
	args []any

	// position is the last position assigned, or -1 until the
	// transaction's first write looks it up.
	position int64
	// known and knownAggs are the feeds and aggregate heads of the write
	// connection's head, which spare their look-ups.
	known     map[string]feedHead
	knownAggs map[aggKey]aggHead
	// aggs are the heads of the aggregates this transaction wrote, in
	// order: the last of an aggregate is its current one.
	aggs []aggWrite
	// feeds are the aggregate types this transaction appended to or looked
	// up; flush creates or settles their rows of the feeds table.
	feeds []feedCounts
}

// feedCounts is the state of one aggregate type in a transaction.
type feedCounts struct {
	aggregateType string
	feedHead
	// batches counts the batches this transaction appended.
	batches int64
}

// feedHead is what the writer knows of a type's feed: the feed sequence
// of its latest batch, and that up to which the type's row in the feeds
// table counts (see settleFeedQuery); settled is -1 when the type has no
// row yet. When exact, the counts of the batches after settled are known
// too, so settling the row needs no look at the events.
type feedHead struct {
	sequence, settled int64
	exact             bool
	unsettled         struct{ aggregates, batches, events int64 }
}

// settleEvery is how many batches of a type may be left out of the counts
// of its row in the feeds table before the writer settles it (see
// settleFeedQuery): a bound on what Feeds and FeedHead count from the
// events themselves.
const settleEvery = 64

// feed returns the index in w.feeds of aggregateType, looking up its
// feed on first use.
func (w *writer) feed(ctx context.Context, aggregateType string) (int, error) {
	for i := range w.feeds {
		if w.feeds[i].aggregateType == aggregateType {
			return i, nil
		}
	}
	h, ok := w.known[aggregateType]
	if !ok {
		found, err := w.c.queryRow(ctx, stmtLastFeed, []*int64{&h.settled, &h.sequence}, aggregateType)
		if err != nil {
			return 0, err
		}
		if !found {
			h.settled = -1 // no row, so no events either
		}
		h.sequence = max(h.sequence, h.settled)
		h.exact = h.sequence == max(h.settled, 0)
	}
	w.feeds = append(w.feeds, feedCounts{aggregateType: aggregateType, feedHead: h})
	return len(w.feeds) - 1, nil
}

// flush creates the rows of the feeds table of the types appended to for
// the first time, and settles those left unsettled long enough. The other
// appends write nothing there: the events hold their feed sequences and
// counts (see settleFeedQuery), and positions.
func (w *writer) flush(ctx context.Context) error {
	for i := range w.feeds {
		f := &w.feeds[i]
		if f.batches == 0 || f.settled >= 0 && f.sequence-f.settled < settleEvery {
			continue
		}
		if f.settled < 0 {
			if err := w.c.exec(ctx, stmtCreateFeed, f.aggregateType); err != nil {
				return fmt.Errorf("create feed %q: %w", f.aggregateType, err)
			}
		}
		var err error
		if u := f.unsettled; f.exact {
			err = w.c.exec(ctx, stmtAddFeed, f.aggregateType, f.sequence, u.aggregates, u.batches, u.events)
		} else {
			err = w.c.exec(ctx, stmtSettleFeed, f.aggregateType)
		}
		if err != nil {
			return fmt.Errorf("settle feed %q: %w", f.aggregateType, err)
		}
		f.settled, f.exact = f.sequence, true
		f.unsettled = feedHead{}.unsettled
	}
	return nil
}

// appendAll applies the requests of an AppendAll inside a savepoint: all
// of them, or, when one fails, none, with a *storage.BatchError naming
// it. A fatalError is returned as is.
func (w *writer) appendAll(ctx context.Context, j *job) error {
	if err := w.c.exec(ctx, stmtGroupSavepoint); err != nil {
		return fatalError{err}
	}
	position, feeds, aggs := w.position, append([]feedCounts(nil), w.feeds...), len(w.aggs)
	results := make([]storage.AppendResult, len(j.all))
	for i := range j.all {
		req := &j.all[i]
		// No savepoint per request: a request that fails rolls back the
		// whole group, and one whose events are all stored already fails
		// on its first insert, before writing anything.
		res, err := w.append(ctx, req, false)
		var fatal fatalError
		if errors.As(err, &fatal) {
			return err
		}
		if err != nil {
			if rerr := w.c.exec(ctx, stmtGroupRollbackTo); rerr != nil {
				return fatalError{rerr}
			}
			if rerr := w.c.exec(ctx, stmtGroupRelease); rerr != nil {
				return fatalError{rerr}
			}
			w.position, w.feeds, w.aggs = position, feeds, w.aggs[:aggs]
			return &storage.BatchError{Index: i, AggregateType: req.AggregateType, AggregateID: req.AggregateID, Err: err}
		}
		results[i] = res
	}
	if err := w.c.exec(ctx, stmtGroupRelease); err != nil {
		return fatalError{err}
	}
	j.results = results
	return nil
}

// append applies one request, inside a savepoint of w's transaction when
// savepoint is set, so that a failure undoes this request's writes only. A
// single-event request needs no savepoint: its one INSERT is atomic on its
// own. An error that only concerns this request is returned as is, after
// its writes were undone (when in a savepoint); an error that breaks the
// transaction is a fatalError.
func (w *writer) append(ctx context.Context, req *storage.AppendRequest, savepoint bool) (storage.AppendResult, error) {
	if savepoint {
		if err := w.c.exec(ctx, stmtSavepoint); err != nil {
			return storage.AppendResult{}, fatalError{err}
		}
	}
	res, err := w.write(ctx, req)
	if err != nil {
		var fatal fatalError
		if errors.As(err, &fatal) {
			return res, err
		}
		if savepoint {
			if rerr := w.c.exec(ctx, stmtRollbackTo); rerr != nil {
				return res, fatalError{rerr}
			}
		}
		if isConstraint(err) {
			// An event id is stored already. Decide with the shared rules,
			// now that this request's partial writes are undone.
			res, err = w.replan(ctx, req)
		}
	}
	if savepoint {
		if rerr := w.c.exec(ctx, stmtRelease); rerr != nil {
			return res, fatalError{rerr}
		}
	}
	return res, err
}

// write does the common case: version check, then insert every event at
// the next positions and the type's next feed sequence. A stored event id
// surfaces as a constraint violation of the insert. w's counters advance
// only when every insert succeeded.
func (w *writer) write(ctx context.Context, req *storage.AppendRequest) (storage.AppendResult, error) {
	key := aggKey{req.AggregateType, req.AggregateID}
	version, sequence, err := w.aggHead(ctx, key)
	if err != nil {
		return storage.AppendResult{}, fatalError{err}
	}
	if !req.ExpectedVersion.Allows(version) {
		// The version check fails, unless the whole batch is stored
		// already (a retried save): PlanAppend decides.
		return w.plan(ctx, req, version)
	}
	if w.position < 0 {
		if _, err := w.c.queryRow(ctx, stmtLastPosition, []*int64{&w.position}); err != nil {
			return storage.AppendResult{}, fatalError{fmt.Errorf("last position: %w", err)}
		}
	}
	f, err := w.feed(ctx, req.AggregateType)
	if err != nil {
		return storage.AppendResult{}, fatalError{fmt.Errorf("feed %q: %w", req.AggregateType, err)}
	}
	feedSequence := w.feeds[f].sequence + 1
	version++
	position := w.position
	for start := 0; start < len(req.Events); start += insertRows {
		chunk := req.Events[start:min(start+insertRows, len(req.Events))]
		args := w.args[:0]
		for _, e := range chunk {
			sequence++
			position++
			var data, encrypted any
			if e.Data != nil {
				data = []byte(e.Data)
			}
			if e.EncryptedData != "" {
				encrypted = e.EncryptedData
			}
			var meta any
			if !e.Metadata.IsZero() {
				meta = string(storage.AppendMetadata(nil, e.Metadata))
			}
			args = append(args, position, req.AggregateType, req.AggregateID, eventIDValue(e.ID), e.Type, data,
				version, sequence, e.RecordedAt.UnixMicro(), feedSequence, encrypted, meta)
		}
		w.args = args
		err := w.c.exec(ctx, stmtInsert+stmtID(len(chunk)-1), args...)
		clear(args) // keep no caller data past the request
		if err != nil {
			if isConstraint(err) {
				return storage.AppendResult{}, err
			}
			return storage.AppendResult{}, fatalError{err}
		}
	}
	w.position = position
	w.aggs = append(w.aggs, aggWrite{key, aggHead{version, sequence}})
	fc := &w.feeds[f]
	fc.sequence = feedSequence
	fc.batches++
	fc.unsettled.batches++
	fc.unsettled.events += int64(len(req.Events))
	if version == 1 {
		fc.unsettled.aggregates++
	}
	return storage.AppendResult{Version: version, Position: position}, nil
}

// aggHead returns the version and last sequence of an aggregate: as this
// transaction left it, as the write connection's head knows it, or as
// stored.
func (w *writer) aggHead(ctx context.Context, key aggKey) (version, sequence int64, err error) {
	for i := len(w.aggs) - 1; i >= 0; i-- {
		if w.aggs[i].key == key {
			return w.aggs[i].head.version, w.aggs[i].head.sequence, nil
		}
	}
	if h, ok := w.knownAggs[key]; ok {
		return h.version, h.sequence, nil
	}
	_, err = w.c.queryRow(ctx, stmtHead, []*int64{&version, &sequence}, key.typ, key.id)
	return version, sequence, err
}

// replan decides a request whose insert hit a stored event id.
func (w *writer) replan(ctx context.Context, req *storage.AppendRequest) (storage.AppendResult, error) {
	var version int64
	if _, err := w.c.queryRow(ctx, stmtHead, []*int64{&version, new(int64)}, req.AggregateType, req.AggregateID); err != nil {
		return storage.AppendResult{}, fatalError{err}
	}
	res, err := w.plan(ctx, req, version)
	if err == nil && !res.Duplicate {
		// Cannot happen: the insert saw a stored id, so PlanAppend must
		// see one too.
		return storage.AppendResult{}, fmt.Errorf("event id of %s/%s stored concurrently: %w",
			req.AggregateType, req.AggregateID, storage.ErrConflict)
	}
	return res, err
}

// plan looks up which of req's event ids are stored and applies the shared
// rules of storage.PlanAppend. It writes nothing.
func (w *writer) plan(ctx context.Context, req *storage.AppendRequest, current int64) (storage.AppendResult, error) {
	var stored []storage.Event
	if current > 0 {
		for _, e := range req.Events {
			var se storage.Event
			found, err := w.c.queryEvent(ctx, stmtStored, &se, req.AggregateType, req.AggregateID, eventIDValue(e.ID))
			switch {
			case err != nil:
				return storage.AppendResult{}, fatalError{err}
			case !found:
				continue
			}
			se.ID = e.ID
			stored = append(stored, se)
		}
	}
	res, done, err := storage.PlanAppend(*req, current, stored)
	if err != nil || done {
		return res, err
	}
	// PlanAppend allows the write: only reachable from replan, which
	// reports it.
	return storage.AppendResult{}, nil
}
