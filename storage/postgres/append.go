package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/eventkit-go/eventstore/internal/groupcommit"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Append implements storage.Storage. Concurrent calls are committed
// together in one transaction (see runBatch); each still gets its own
// result. A lone call runs in the caller's goroutine (the batcher lets the
// first caller lead its batch).
func (s *store) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	defer s.span(&ctx, "Append")()
	if err := s.check(ctx, "append"); err != nil {
		return storage.AppendResult{}, err
	}
	// Waiting in the queue is bounded too: behind a stuck transaction,
	// a request gives up after WriteTimeout, with nothing stored.
	qctx, cancel := context.WithTimeoutCause(ctx, s.writeTimeout, errOwnDeadline)
	defer cancel()
	res, err := s.batcher.Do(qctx, req)
	if err == nil {
		s.see(res.Position)
		if !res.Duplicate {
			s.noteAppended(len(req.Events))
		}
	}
	if err != nil {
		if errors.Is(err, storage.ErrClosed) {
			return storage.AppendResult{}, fmt.Errorf("postgres: append: %w", storage.ErrClosed)
		}
		if qctx.Err() != nil && ctx.Err() == nil {
			return storage.AppendResult{}, fmt.Errorf("postgres: append: waited %v for the writes before it: %w",
				s.writeTimeout, storage.ErrUnavailable)
		}
		return storage.AppendResult{}, err
	}
	return res, nil
}

// appendResult is one request's outcome in a batch.
type appendResult = groupcommit.Result[storage.AppendResult]

// runBatch appends a batch of requests in one transaction. The transaction
// first takes a lock per aggregate it writes (held to its end, so that a
// second writer of an aggregate reads the version the first one
// committed), then the schema's append lock, a session lock that orders
// writers across every process: inside it the transaction registers, takes
// its id and reserves its positions (see queueLock), writes its rows, and
// releases the lock before its COMMIT, so that the commits of writers in
// many processes overlap. Feed readers stay behind the oldest registered
// append (see statements.watermark), so they never skip a row that
// commits later. Every path that fails after taking the lock releases it
// (release, rollback) or closes the connection.
//
// In the common case the whole batch is one pipeline of the lock and one
// appendGroup statement per round of requests on distinct aggregates (see
// runGroup), which decides every request, conflicts included. When the
// server refuses that pipeline (an id already stored, bad input), it wrote
// nothing, and the requests run one by one in one round trip: BEGIN, the
// lock, then for each request SAVEPOINT, the append statement and RELEASE,
// and COMMIT are sent as one pipeline; a request the server rejects rolls
// back to its savepoint alone.
func (s *store) runBatch(ctx context.Context, reqs []storage.AppendRequest) (results []appendResult) {
	results = make([]appendResult, len(reqs))
	// ctx is shared by the whole batch and never cancelled by a caller;
	// errors are translated against it, so that running out of
	// WriteTimeout reads as ErrUnavailable, not as a caller's deadline.
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, s.writeTimeout)
	defer cancel()
	ctx, stop := s.withLive(ctx)
	defer stop()
	var conn *pgxpool.Conn
	var err error
	failAll := func(err error) []appendResult {
		err = s.fail(parent, "append", err)
		for i := range results {
			if results[i].Err == nil {
				results[i] = appendResult{Err: err}
			}
		}
		return results
	}
	conn, err = s.pool.Acquire(ctx)
	if err != nil {
		return failAll(err)
	}
	defer conn.Release()
	// A commit whose wait for the synchronous standbys was cancelled is
	// not an acknowledged save (ha.go).
	takeSyncWarning(conn.Conn().PgConn())
	defer s.checkReplicated(conn, results)

	args := make([]appendArgs, len(reqs))
	for i, r := range reqs {
		args[i] = newAppendArgs(r)
	}
	// A lone writer's save of one event: appendLean, unless it is refused
	// or rejected, which runGroup then decides and explains.
	if len(reqs) == 1 && len(reqs[0].Events) == 1 {
		written, err := s.runLean(ctx, conn, &reqs[0], &args[0], results)
		if err != nil {
			rollback(conn)
			return failAll(err)
		}
		if written {
			return results
		}
	}
	// The common case: every request decided by appendGroup.
	done, err := s.runGroup(ctx, conn, reqs, args, results, false)
	if err != nil {
		rollback(conn)
		return failAll(err)
	}
	if done {
		return results
	}
	// pending holds the indexes of the requests still to run. When a
	// request fails with an error of the server, the transaction is rolled
	// back to its savepoint and the requests after it run again.
	pending := make([]int, len(reqs))
	for i := range pending {
		pending[i] = i
	}
	first := true
	for {
		failed, err := s.sendBatch(ctx, conn, reqs, args, pending, results, first)
		if err != nil {
			// The transaction cannot go on: nothing of it is committed.
			rollback(conn)
			return failAll(err)
		}
		if failed < 0 {
			return results // committed
		}
		first = false
		// Request pending[failed] hit an error of the server, which
		// aborted the transaction: undo it alone and go on with the rest.
		if _, err := conn.Exec(ctx, "ROLLBACK TO SAVEPOINT r"); err != nil {
			rollback(conn)
			return failAll(err)
		}
		pending = pending[failed+1:]
		if len(pending) == 0 {
			if err := s.commit(ctx, conn); err != nil {
				rollback(conn)
				return failAll(err)
			}
			return results
		}
	}
}

// runLean appends req, of one event, with reserve and appendLean in one
// pipeline, which ends with COMMIT and the notification. It reports
// whether it wrote req, setting its result; when it did not (req's
// version check failed, or the server refused it: an event id stored
// already, bad input), nothing was written and the caller decides req with
// the statements that tell why. An error means the outcome is unknown.
func (s *store) runLean(ctx context.Context, conn *pgxpool.Conn, req *storage.AppendRequest, a *appendArgs,
	results []appendResult) (written bool, err error) {
	var enc *string
	if a.enc != nil {
		enc = &a.enc[0]
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	n := 1 + s.queueLock(b, []storage.AppendRequest{*req})
	b.Queue(s.sql.appendLean, req.AggregateType, req.AggregateID, a.ids[0], a.types[0], a.data[0], a.times[0], a.expected, enc,
		a.meta0())
	s.queueCommit(b)
	br := conn.SendBatch(ctx, b)
	var position, version int64
	err = s.readReserve(br, n)
	if err == nil {
		err = br.QueryRow().Scan(&position, &version)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil // refused: nothing written
		} else if err == nil {
			written = true
		}
	}
	if err == nil {
		err = s.readCommit(br)
	} else {
		br.Close()
	}
	if err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || classify(err) == storage.ErrUnavailable {
			return false, err
		}
		// Rolled back, the append lock still held: release it.
		return false, release(ctx, conn)
	}
	if written {
		results[0] = appendResult{Value: storage.AppendResult{Version: version, Position: position}}
	}
	return written, nil
}

// sendBatch sends the requests listed in pending as one pipeline, ending
// with COMMIT, and stores their results. When first is set, it begins the
// transaction and takes the append lock. It returns the index in pending of
// a request that failed with an error of the server (its result is set, the
// transaction is aborted and waits for ROLLBACK TO SAVEPOINT), or -1 when
// the transaction committed. An error means the transaction as a whole
// failed.
func (s *store) sendBatch(ctx context.Context, conn *pgxpool.Conn, reqs []storage.AppendRequest,
	args []appendArgs, pending []int, results []appendResult, first bool) (failed int, err error) {
	b := &pgx.Batch{}
	n := 0
	if first {
		b.Queue("BEGIN")
		n = 1 + s.queueLock(b, reqs)
	}
	offsets := eventOffsets(reqs)
	for _, i := range pending {
		a := &args[i]
		b.Queue("SAVEPOINT r")
		b.Queue(s.sql.append, reqs[i].AggregateType, reqs[i].AggregateID, a.ids, a.expected, a.types, a.data, a.times, a.enc,
			offsets[i], a.meta)
		b.Queue("RELEASE SAVEPOINT r")
	}
	s.queueCommit(b)

	br := conn.SendBatch(ctx, b)
	defer br.Close()
	if n > 0 {
		if err := s.readReserve(br, n); err != nil {
			return 0, err
		}
	}
	for k, i := range pending {
		if _, err := br.Exec(); err != nil { // SAVEPOINT
			return 0, err
		}
		res, err := s.readAppend(br, reqs[i])
		if err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || classify(err) == storage.ErrUnavailable {
				return 0, err // not this request's fault
			}
			if cerr := br.Close(); cerr != nil && !errors.As(cerr, &pgErr) {
				return 0, cerr
			}
			results[i] = appendResult{Err: s.fail(context.Background(), "append", err)}
			return k, nil
		}
		results[i] = res
		if _, err := br.Exec(); err != nil { // RELEASE
			return 0, err
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return 0, err
	}
	if tag.String() != "COMMIT" {
		return 0, fmt.Errorf("%w: commit answered %q", errBug, tag.String())
	}
	s.readLSN(br)
	return -1, nil
}

// readAppend reads the result of one append statement and applies
// storage.PlanAppend to it. An error of the server is returned as it is;
// a refused request (conflict) is a result, not an error.
func (s *store) readAppend(br pgx.BatchResults, req storage.AppendRequest) (appendResult, error) {
	rows, err := br.Query()
	if err != nil {
		return appendResult{}, err
	}
	var (
		current, written int64
		stored           []storage.Event
	)
	for rows.Next() {
		var kind int
		var e storage.Event
		var meta string
		var data []byte
		if err := rows.Scan(&kind, &e.ID, &e.Version, &e.Position, &e.Type, &data, &e.EncryptedData, &meta); err != nil {
			rows.Close()
			return appendResult{}, err
		}
		e.Data = data
		if e.Metadata, err = storage.ParseMetadataString(meta); err != nil {
			rows.Close()
			return appendResult{}, err
		}
		if kind == 0 {
			current, written = e.Version, e.Position
		} else {
			stored = append(stored, e)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return appendResult{}, err
	}
	res, done, err := storage.PlanAppend(req, current, stored)
	switch {
	case err != nil || done:
		if written != 0 {
			return appendResult{Err: fmt.Errorf("%w: stored a batch for %s/%s that PlanAppend refused (%v)",
				errBug, req.AggregateType, req.AggregateID, err)}, nil
		}
		return appendResult{Value: res, Err: err}, nil
	case written == 0:
		return appendResult{Err: fmt.Errorf("%w: batch for %s/%s not written", errBug, req.AggregateType, req.AggregateID)}, nil
	}
	return appendResult{Value: storage.AppendResult{Version: current + 1, Position: written}}, nil
}

// appendArgs are the array arguments of the append statement for one
// request.
type appendArgs struct {
	ids, types []string
	data       [][]byte
	times      []time.Time
	// enc holds the events' EncryptedData, or is nil (NULL for the
	// server, which stores NULL for "") when no event has any.
	enc []string
	// meta holds the events' metadata as storage.AppendMetadata encodes
	// it ("" for none), or is nil when no event has any.
	meta     []string
	expected *int64
}

// meta0 is the metadata of the first event, nil (NULL) for none.
func (a *appendArgs) meta0() *string {
	if a.meta == nil || a.meta[0] == "" {
		return nil
	}
	return &a.meta[0]
}

func newAppendArgs(r storage.AppendRequest) appendArgs {
	a := appendArgs{
		ids:   make([]string, len(r.Events)),
		types: make([]string, len(r.Events)),
		data:  make([][]byte, len(r.Events)),
		times: make([]time.Time, len(r.Events)),
	}
	for i, e := range r.Events {
		a.ids[i], a.types[i], a.data[i], a.times[i] = e.ID, e.Type, e.Data, e.RecordedAt
		if e.EncryptedData != "" {
			if a.enc == nil {
				a.enc = make([]string, len(r.Events))
			}
			a.enc[i] = e.EncryptedData
		}
		if !e.Metadata.IsZero() {
			if a.meta == nil {
				a.meta = make([]string, len(r.Events))
			}
			a.meta[i] = string(storage.AppendMetadata(nil, e.Metadata))
		}
	}
	if v, ok := r.ExpectedVersion.Version(); ok {
		a.expected = &v
	}
	return a
}

// rollback ends a failed transaction on conn and releases the append
// lock if the session holds it. If that fails too, the connection is in an
// unknown state, maybe still holding the lock: it is closed, which ends
// the session and its locks (the pool drops closed connections).
func rollback(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := release(ctx, conn); err != nil {
		_ = conn.Conn().Close(ctx)
	}
}

// release ends the transaction a failed pipeline left (aborted, or none:
// ROLLBACK then only warns) and releases the append lock if the session of
// conn holds it, in one round trip: behind a pooler in transaction mode
// (PgBouncer) two round trips may reach two server sessions, and the
// unlock would miss the session that holds the lock, stopping every
// writer. An error means the lock may still be held: the caller must roll
// back (which closes the connection when it cannot release).
func release(ctx context.Context, conn *pgxpool.Conn) error {
	// One query string without arguments: pgx sends it with the simple
	// protocol, one message (a pipeline would prepare the SELECT first,
	// which an aborted transaction refuses).
	_, err := conn.Exec(ctx, "ROLLBACK; SELECT pg_advisory_unlock_all()")
	return err
}

// queueLock queues reserve, the start of an append of reqs, which also
// sets the tenant: the locks of their aggregates (in key order, so
// that writers of several aggregates cannot deadlock), then, inside the
// append lock, the registration of the transaction and a position for each
// event of reqs. It returns the number of statements it queued.
func (s *store) queueLock(b *pgx.Batch, reqs []storage.AppendRequest) int {
	keys := make([]int64, 0, len(reqs))
	total := int64(0)
	for _, r := range reqs {
		keys = append(keys, s.aggregateKey(r.AggregateType, r.AggregateID))
		total += int64(len(r.Events))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	b.Queue(s.sql.reserve, keys, s.appendKey, max(total, 1), s.drainKey, s.tenant, s.seen.Load(), RewindMargin)
	return 1
}

// aggregateKey is the key of the advisory lock of an aggregate.
func (s *store) aggregateKey(aggregateType, aggregateID string) int64 {
	h := fnv.New64a()
	h.Write([]byte(s.schema))
	h.Write([]byte{0})
	if s.tenant != DefaultTenant {
		h.Write([]byte(s.tenant))
		h.Write([]byte{0})
	}
	h.Write([]byte(aggregateType))
	h.Write([]byte{0})
	h.Write([]byte(aggregateID))
	return int64(h.Sum64())
}

// execN reads the results of the next n statements of br.
func execN(br pgx.BatchResults, n int) error {
	for range n {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return nil
}

// eventOffsets returns, per request, the number of events of the requests
// before it: its first position is the reserved base + offset + 1.
func eventOffsets(reqs []storage.AppendRequest) []int64 {
	offsets := make([]int64, len(reqs))
	var sum int64
	for i, r := range reqs {
		offsets[i] = sum
		sum += int64(len(r.Events))
	}
	return offsets
}

// queueCommit queues the end of an append's pipeline: COMMIT, then the
// notification of listeners (statements.notify), in a transaction of its
// own.
func (s *store) queueCommit(b *pgx.Batch) {
	b.Queue("COMMIT")
	if s.trackLSN {
		b.Queue(currentLSNSQL) // read replicas: where the primary's log is (replica.go)
	}
	b.Queue(s.sql.notify)
}

// readCommit reads the results of queueCommit's statements and closes br.
// Only an error of the COMMIT is returned: once it has succeeded the
// append is stored, and a failed notification only delays listeners (they
// poll as a fallback).
func (s *store) readCommit(br pgx.BatchResults) error {
	tag, err := br.Exec()
	if err != nil {
		br.Close()
		return err
	}
	if tag.String() != "COMMIT" {
		br.Close()
		return fmt.Errorf("%w: commit answered %q", errBug, tag.String())
	}
	s.readLSN(br)
	_ = br.Close() // the notification's outcome
	return nil
}

// commit commits the transaction on conn and notifies, in one round trip.
func (s *store) commit(ctx context.Context, conn *pgxpool.Conn) error {
	b := &pgx.Batch{}
	s.queueCommit(b)
	return s.readCommit(conn.SendBatch(ctx, b))
}
