package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/groupcommit"
)

// Append implements eventstore.Storage. Concurrent calls are committed
// together, in one transaction, by the group-commit batcher; each keeps its
// own outcome.
func (s *Storage) Append(ctx context.Context, req eventstore.AppendRequest) (eventstore.AppendResult, error) {
	if err := s.check(ctx, "append"); err != nil {
		return eventstore.AppendResult{}, err
	}
	res, err := s.batcher.Do(ctx, &req)
	if err != nil {
		return eventstore.AppendResult{}, s.fail(ctx, "append", err)
	}
	return res, nil
}

// fatalError marks an error that leaves the batch's transaction unusable:
// the whole batch is rolled back and every request fails with it.
type fatalError struct{ err error }

func (e fatalError) Error() string { return e.err.Error() }
func (e fatalError) Unwrap() error { return e.err }

// runBatch commits a batch of append requests in one transaction, each
// request inside its own savepoint. The batcher runs one batch at a time;
// CreateDefinition and CommitProjection wait for the write connection.
func (s *Storage) runBatch(ctx context.Context, reqs []*eventstore.AppendRequest) []groupcommit.Result[eventstore.AppendResult] {
	results := make([]groupcommit.Result[eventstore.AppendResult], len(reqs))
	failAll := func(err error) []groupcommit.Result[eventstore.AppendResult] {
		err = s.fail(ctx, "append", err)
		for i := range results {
			results[i] = groupcommit.Result[eventstore.AppendResult]{Err: err}
		}
		return results
	}
	tx, err := s.writeDB.BeginTx(ctx, nil)
	if err != nil {
		return failAll(err)
	}
	w := writer{
		tx:         tx,
		savepoint:  tx.StmtContext(ctx, s.stmts.savepoint),
		release:    tx.StmtContext(ctx, s.stmts.release),
		rollbackTo: tx.StmtContext(ctx, s.stmts.rollbackTo),
		head:       tx.StmtContext(ctx, s.stmts.head),
		insert:     tx.StmtContext(ctx, s.stmts.insert),
		stored:     tx.StmtContext(ctx, s.stmts.stored),
	}
	wrote := false
	for i, req := range reqs {
		res, err := w.append(ctx, req)
		var fatal fatalError
		if errors.As(err, &fatal) {
			_ = tx.Rollback()
			return failAll(fatal.err)
		}
		if err != nil {
			err = s.fail(ctx, "append", err)
		}
		results[i] = groupcommit.Result[eventstore.AppendResult]{Value: res, Err: err}
		wrote = wrote || (err == nil && !res.Duplicate)
	}
	if !wrote {
		_ = tx.Rollback() // nothing to make durable
		return results
	}
	if err := tx.Commit(); err != nil {
		s.abandon(ctx)
		err = s.fail(ctx, "append: commit", err)
		for i := range results {
			if results[i].Err == nil {
				results[i] = groupcommit.Result[eventstore.AppendResult]{Err: err}
			}
		}
	}
	return results
}

// writer holds the transaction of one batch and its statements.
type writer struct {
	tx                             *sql.Tx
	savepoint, release, rollbackTo *sql.Stmt
	head, insert, stored           *sql.Stmt
}

// append applies one request inside a savepoint of w's transaction, so
// that a failure undoes this request's writes only. A single-event request
// needs no savepoint: its one INSERT is atomic on its own. An error that
// only concerns this request is returned as is, after its writes were
// undone; an error that breaks the transaction is a fatalError.
func (w *writer) append(ctx context.Context, req *eventstore.AppendRequest) (eventstore.AppendResult, error) {
	savepoint := len(req.Events) > 1
	if savepoint {
		if _, err := w.savepoint.ExecContext(ctx); err != nil {
			return eventstore.AppendResult{}, fatalError{err}
		}
	}
	res, err := w.write(ctx, req)
	if err != nil {
		var fatal fatalError
		if errors.As(err, &fatal) {
			return res, err
		}
		if savepoint {
			if _, rerr := w.rollbackTo.ExecContext(ctx); rerr != nil {
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
		if _, rerr := w.release.ExecContext(ctx); rerr != nil {
			return res, fatalError{rerr}
		}
	}
	return res, err
}

// write does the common case: version check, then insert every event. A
// stored event id surfaces as a constraint violation of the insert.
func (w *writer) write(ctx context.Context, req *eventstore.AppendRequest) (eventstore.AppendResult, error) {
	var version, sequence int64
	err := w.head.QueryRowContext(ctx, req.AggregateType, req.AggregateID).Scan(&version, &sequence)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return eventstore.AppendResult{}, fatalError{err}
	}
	if !req.ExpectedVersion.Allows(version) {
		// The version check fails, unless the whole batch is stored
		// already (a retried save): PlanAppend decides.
		return w.plan(ctx, req, version)
	}
	version++
	var position int64
	for _, e := range req.Events {
		sequence++
		var data any
		if e.Data != nil {
			data = []byte(e.Data)
		}
		r, err := w.insert.ExecContext(ctx, req.AggregateType, req.AggregateID, e.ID, e.Type, data,
			version, sequence, e.RecordedAt.UnixMicro())
		if err != nil {
			if isConstraint(err) {
				return eventstore.AppendResult{}, err
			}
			return eventstore.AppendResult{}, fatalError{err}
		}
		if position, err = r.LastInsertId(); err != nil {
			return eventstore.AppendResult{}, fatalError{err}
		}
	}
	return eventstore.AppendResult{Version: version, Position: position}, nil
}

// replan decides a request whose insert hit a stored event id.
func (w *writer) replan(ctx context.Context, req *eventstore.AppendRequest) (eventstore.AppendResult, error) {
	var version int64
	err := w.head.QueryRowContext(ctx, req.AggregateType, req.AggregateID).Scan(&version, new(int64))
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return eventstore.AppendResult{}, fatalError{err}
	}
	res, err := w.plan(ctx, req, version)
	if err == nil && !res.Duplicate {
		// Cannot happen: the insert saw a stored id, so PlanAppend must
		// see one too.
		return eventstore.AppendResult{}, fmt.Errorf("event id of %s/%s stored concurrently: %w",
			req.AggregateType, req.AggregateID, eventstore.ErrConflict)
	}
	return res, err
}

// plan looks up which of req's event ids are stored and applies the shared
// rules of eventstore.PlanAppend. It writes nothing.
func (w *writer) plan(ctx context.Context, req *eventstore.AppendRequest, current int64) (eventstore.AppendResult, error) {
	var stored []eventstore.Event
	if current > 0 {
		for _, e := range req.Events {
			var se eventstore.Event
			err := w.stored.QueryRowContext(ctx, req.AggregateType, req.AggregateID, e.ID).Scan(&se.Version, &se.Position)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				continue
			case err != nil:
				return eventstore.AppendResult{}, fatalError{err}
			}
			se.ID = e.ID
			stored = append(stored, se)
		}
	}
	res, done, err := eventstore.PlanAppend(*req, current, stored)
	if err != nil || done {
		return res, err
	}
	// PlanAppend allows the write: only reachable from replan, which
	// reports it.
	return eventstore.AppendResult{}, nil
}

// abandon rolls back a transaction that a failed COMMIT may have left open
// on the write connection (database/sql forgets it either way), so that the
// next transaction can begin. The write pool has exactly one connection.
func (s *Storage) abandon(ctx context.Context) {
	_, _ = s.writeDB.ExecContext(ctx, "ROLLBACK") // fails harmlessly when none is open
}
