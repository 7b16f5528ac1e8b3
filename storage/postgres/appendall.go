package postgres

import (
	"context"
	"errors"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// AppendAll implements storage.Storage. The batches are written in one
// transaction, under the append lock until its commit (see runBatch): in the common case (every batch
// passes its checks) by one appendGroup statement per run of batches on
// distinct aggregates (orderedRounds), sent with the lock as one pipeline; otherwise each request is decided by the append statement
// in a transaction that commits only when none is refused. AppendAll does
// not go through the group commit of Append: its batches already share one
// transaction.
func (s *store) AppendAll(ctx context.Context, reqs []storage.AppendRequest) ([]storage.AppendResult, error) {
	defer s.span(&ctx, "AppendAll")()
	if err := s.check(ctx, "append all"); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return []storage.AppendResult{}, nil
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, s.writeTimeout)
	defer cancel()
	ctx, stop := s.withLive(ctx)
	defer stop()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.fail(parent, "append all", err)
	}
	defer conn.Release()
	takeSyncWarning(conn.Conn().PgConn()) // see runBatch

	args := make([]appendArgs, len(reqs))
	for i, r := range reqs {
		args[i] = newAppendArgs(r)
	}
	results := make([]appendResult, len(reqs))
	done, err := s.runGroup(ctx, conn, reqs, args, results, true)
	if err != nil {
		rollback(conn)
		return nil, s.fail(parent, "append all", err)
	}
	if !done {
		if err := s.appendAllChecked(ctx, conn, reqs, args, results); err != nil {
			rollback(conn)
			var be *storage.BatchError
			if errors.As(err, &be) {
				return nil, err
			}
			return nil, s.fail(parent, "append all", err)
		}
	}
	s.checkReplicated(conn, results)
	for _, r := range results {
		if r.Err != nil {
			return nil, r.Err
		}
	}
	out := make([]storage.AppendResult, len(reqs))
	for i, r := range results {
		out[i] = r.Value
		s.see(r.Value.Position)
		if !r.Value.Duplicate {
			s.noteAppended(len(reqs[i].Events))
		}
	}
	return out, nil
}

// appendAllChecked appends reqs in one transaction, each decided by the
// append statement, and commits when none is refused. When one is, it
// returns a *storage.BatchError naming it, leaving the transaction for
// the caller to roll back.
func (s *store) appendAllChecked(ctx context.Context, conn *pgxpool.Conn, reqs []storage.AppendRequest,
	args []appendArgs, results []appendResult) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	n := 1 + s.queueLock(b, reqs)
	offsets := eventOffsets(reqs)
	for i, r := range reqs {
		a := &args[i]
		b.Queue(s.sql.append, r.AggregateType, r.AggregateID, a.ids, a.expected, a.types, a.data, a.times, a.enc, offsets[i], a.meta)
	}
	br := conn.SendBatch(ctx, b)
	refused := func(i int, err error) error {
		br.Close()
		return &storage.BatchError{Index: i, AggregateType: reqs[i].AggregateType, AggregateID: reqs[i].AggregateID, Err: err}
	}
	if err := s.readReserve(br, n); err != nil {
		br.Close()
		return err
	}
	for i, r := range reqs {
		res, err := s.readAppend(br, r)
		if err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || classify(err) == storage.ErrUnavailable {
				br.Close()
				return err // not this request's fault
			}
			return refused(i, s.fail(context.Background(), "append all", err))
		}
		if res.Err != nil {
			return refused(i, res.Err)
		}
		results[i] = res
	}
	if err := br.Close(); err != nil {
		return err
	}
	return s.commit(ctx, conn)
}
