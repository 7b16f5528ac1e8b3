package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Read replicas (Options.Replicas). A Storage with replicas is a
// replicated: the primary's Storage, which does everything, with the reads
// that a standby may serve routed to one. A replica serves a read only
// when that cannot show older data than this Storage wrote or the reader
// was given:
//
//   - Every append's pipeline ends with reading where the primary's log is
//     (currentLSNSQL, after the COMMIT: no extra round trip), kept in
//     store.lsn. Other writes (deletions, snapshots, definition changes),
//     and appends whose pipeline ended early, count in store.lsnGen; the
//     next read on a replica first asks the primary where its log is.
//     A replica serves a read once it has replayed that far
//     (pg_last_wal_replay_lsn, which every read on a replica returns, so
//     that the replica's position is known without asking), waiting for it
//     at most ReplicaWait.
//   - A feed page that ends the feed (shorter than its limit) stands only
//     when the replica's head (under its watermark) reaches the reader's
//     cursor and this Storage's last append, and when the replica has
//     replayed what the primary had written when the last notification of
//     another process's append came (WatchAppends): else the replica is
//     waited for, then the primary read.
//   - A projection instance or list stands only when the replica's
//     checkpoint of the projection reaches this Storage's last append,
//     which the Projector waited for on the primary.
//   - What a replica does not find (ErrNotFound, a range of versions past
//     the aggregate's) is looked up on the primary: another process may
//     have written it.
//
// The feed's watermark on a replica is the xmin of its snapshot: the
// oldest transaction of the primary that the standby knows to be running
// (every transaction id below one it has seen in the log counts as running
// until its commit or abort is replayed). Rows of transactions below it
// are visible or never will be, and since ids and positions are given in
// one order (docs/appends-side-by-side.md), no lower position can appear
// later: the argument of the primary's watermark, with the standby's
// knowledge of running transactions in place of pg_locks, whose advisory
// locks a standby does not see.

// DefaultReplicaMaxLag is the ReplicaMaxLag used when Options.ReplicaMaxLag
// is zero: a replica that has not replayed what the primary had written
// this long ago is skipped.
const DefaultReplicaMaxLag = 5 * time.Second

// DefaultReplicaWait is the ReplicaWait used when Options.ReplicaWait is
// zero: long enough for a standby on a local network to replay a commit,
// short enough that a read that must go to the primary is not held up.
const DefaultReplicaWait = 20 * time.Millisecond

// Health checks of replicas: while reads come, each replica is asked every
// replicaCheckEvery whether it is a standby and how far it has replayed,
// within replicaCheckTimeout; one that fails is skipped and asked again
// every replicaRetry.
const (
	replicaCheckEvery   = 500 * time.Millisecond
	replicaCheckTimeout = 2 * time.Second
	replicaRetry        = 2 * time.Second
)

// currentLSNSQL is where the primary's log is: past the end of every
// commit of the session that has returned. A commit with synchronous_commit
// other than off has flushed its log, so the flush position is past it; an
// asynchronous one may not have, so then it is the insert position (which
// may be past records that are not flushed yet, WAL of other sessions that
// a standby receives only when it is: the flush position when it can be,
// or a replica would wait for the WAL writer).
const currentLSNSQL = `SELECT (CASE WHEN current_setting('synchronous_commit') = 'off' THEN pg_current_wal_insert_lsn()
	ELSE pg_current_wal_flush_lsn() END - '0/0'::pg_lsn)::int8`

// replayedSQL is how far a standby has replayed the primary's log, or -1
// when the server is not a standby (promoted, or not one at all).
const replayedSQL = `CASE WHEN pg_is_in_recovery() THEN coalesce((pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::int8, 0) ELSE -1 END`

// The first statements of the reads on a replica: setTenantSQL and the
// watermark (see above), each also returning replayedSQL.
const (
	replicaTenantSQL    = `SELECT set_config('eventstore.tenant', $1, true), ` + replayedSQL
	replicaWatermarkSQL = `SELECT set_config('eventstore.wm', pg_snapshot_xmin(pg_current_snapshot())::text, true), ` +
		`set_config('eventstore.tenant', $1, true), ` + replayedSQL
	replicaStatusSQL = `SELECT ` + replayedSQL
)

// errNotStandby is the error of a read on a replica that is no standby.
var errNotStandby = fmt.Errorf("the replica is not a standby (promoted?): %w", storage.ErrUnavailable)

// replica is one of Options.Replicas.
type replica struct {
	primary *store // the primary's Storage
	st      *store // the Storage reading on the replica's pool
	host    string // host:port, for ReplicaStatus
	// replayed is the highest replay position the replica reported.
	replayed atomic.Int64
	// healthy is false until a check found the replica a standby that
	// answers, and after a read on it failed; lagging when the last check
	// found it more than ReplicaMaxLag behind.
	healthy, lagging atomic.Bool
	checking         atomic.Bool
	nextCheck        atomic.Int64 // Unix nanoseconds
	reads            atomic.Int64
	declined         atomic.Int64
	errMu            sync.Mutex
	lastErr          string
}

// replicated is a Storage with read replicas.
type replicated struct {
	*store
	replicas []*replica
	next     atomic.Uint32
	maxLag   time.Duration
	wait     time.Duration
	// ownPos is the highest position this Storage appended, or was
	// answered for an append (a duplicate's).
	ownPos atomic.Int64
	// covered is the value of store.lsnGen that store.lsn accounts for;
	// notes counts the notifications of appends (WatchAppends), and
	// notesCovered those that store.lsn accounts for. lsnMu orders the
	// look-ups of the primary's position.
	covered, notes, notesCovered atomic.Int64
	notedLSN                     atomic.Int64
	lsnMu                        sync.Mutex
	// samples are positions of the primary's log over the last
	// ReplicaMaxLag, for the lag of replicas.
	samplesMu    sync.Mutex
	samples      []lsnSample
	primaryReads atomic.Int64
	// checks are the health checks running; none starts once closing.
	checkMu sync.Mutex
	closing bool
	checks  sync.WaitGroup
}

type lsnSample struct {
	at  time.Time
	lsn int64
}

var (
	_ storage.Storage       = (*replicated)(nil)
	_ storage.AppendWatcher = (*replicated)(nil)
	_ storage.Rewinder      = (*replicated)(nil)
)

// asStore returns the primary's Storage of s, a Storage of this package.
func asStore(s storage.Storage) (*store, bool) {
	switch s := s.(type) {
	case *store:
		return s, true
	case *replicated:
		return s.store, true
	}
	return nil, false
}

// withReplicas returns s, or s with the replicas of opts; on an error it
// closes s.
func withReplicas(ctx context.Context, s *store, opts *Options) (storage.Storage, error) {
	if opts == nil || len(opts.Replicas) == 0 {
		return s, nil
	}
	w := &replicated{store: s, maxLag: opts.ReplicaMaxLag, wait: opts.ReplicaWait}
	if w.maxLag <= 0 {
		w.maxLag = DefaultReplicaMaxLag
	}
	switch {
	case w.wait == 0:
		w.wait = DefaultReplicaWait
	case w.wait < 0:
		w.wait = 0
	}
	for _, u := range opts.Replicas {
		r, err := s.openReplica(ctx, u, opts)
		if err != nil {
			w.closeReplicas()
			s.Close()
			return nil, err
		}
		w.replicas = append(w.replicas, r)
	}
	s.trackLSN = true
	s.lsnGen.Add(1) // the migrations: the first read asks the primary
	for _, r := range w.replicas {
		r.checking.Store(true)
		w.checks.Add(1)
		r.check(w) // a replica down at the start is skipped, not refused
	}
	return w, nil
}

// openReplica makes the pool of the replica at connString, as OpenURL
// makes the primary's, and the Storage that reads on it.
func (s *store) openReplica(ctx context.Context, connString string, opts *Options) (*replica, error) {
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: replica: %v: %w", err, storage.ErrInvalid)
	}
	if !strings.Contains(connString, "pool_max_conns") {
		cfg.MaxConns = DefaultPoolConns
	}
	Configure(cfg)
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
	if cfg.ConnConfig.Tracer == nil {
		cfg.ConnConfig.Tracer = NewTracer(opts.TracerProvider)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: replica: %v: %w", err, storage.ErrUnavailable)
	}
	st := &store{
		pool: pool, ownPool: true, sql: s.sql, schema: s.schema, tenant: s.tenant,
		appendKey: s.appendKey, drainKey: s.drainKey, channel: s.channel,
		writeTimeout: s.writeTimeout, readTimeout: s.readTimeout, done: make(chan struct{}),
	}
	st.tracer = registerTracer(pool.Config().ConnConfig, &st.sql)
	r := &replica{primary: s, st: st, host: hostOf(connString)}
	st.replica = r
	return r, nil
}

// hostOf returns the hosts of a connection string, without credentials.
func hostOf(connString string) string {
	if u, err := url.Parse(connString); err == nil && u.Host != "" {
		return u.Host
	}
	if cfg, err := pgx.ParseConfig(connString); err == nil {
		return fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
	}
	return "replica"
}

// Close implements storage.Storage: the primary's Storage, then the
// replicas' pools.
func (w *replicated) Close() error {
	w.checkMu.Lock()
	w.closing = true
	w.checkMu.Unlock()
	err := w.store.Close()
	w.checks.Wait()
	w.closeReplicas()
	return err
}

func (w *replicated) closeReplicas() {
	for _, r := range w.replicas {
		r.st.closed.Store(true)
		r.st.closeOnce.Do(func() {
			close(r.st.done)
			r.st.pool.Close()
		})
	}
}

// WatchAppends implements storage.AppendWatcher, counting notifications
// (see replicated.ReadFeed).
func (w *replicated) WatchAppends(ctx context.Context, notify func()) error {
	return w.store.WatchAppends(ctx, func() {
		w.notes.Add(1)
		notify()
	})
}

// OnRewind implements storage.Rewinder. After a rewind the primary's log
// may be behind what this Storage had recorded (a standby promoted without
// the last commits): what it had is forgotten, and the next read on a
// replica asks the new primary.
func (w *replicated) OnRewind(f func(storage.Rewind)) {
	if f == nil {
		w.store.OnRewind(nil)
		return
	}
	w.store.OnRewind(func(r storage.Rewind) {
		w.ownPos.Store(0)
		w.store.lsn.Store(0)
		w.notedLSN.Store(0)
		w.store.lsnGen.Add(1)
		f(r)
	})
}

// noteLSN records that the primary's log reached lsn.
func (s *store) noteLSN(lsn int64) {
	for {
		cur := s.lsn.Load()
		if lsn <= cur || s.lsn.CompareAndSwap(cur, lsn) {
			return
		}
	}
}

// readLSN reads the result of currentLSNSQL, which queueCommit queues
// after the COMMIT (before the notification, which sets synchronous_commit
// off) when the Storage tracks the primary's log.
func (s *store) readLSN(br pgx.BatchResults) {
	if !s.trackLSN {
		return
	}
	var lsn int64
	if err := br.QueryRow().Scan(&lsn); err != nil {
		s.lsnGen.Add(1) // the next read on a replica asks
		return
	}
	s.noteLSN(lsn)
}

// wrote records a write whose position in the primary's log is not known.
func (w *replicated) wrote() { w.store.lsnGen.Add(1) }

// primaryLSN asks the primary where its log is.
func (w *replicated) primaryLSN(ctx context.Context) (int64, error) {
	ctx, cancel := w.store.readCtx(ctx)
	defer cancel()
	var lsn int64
	err := w.store.pool.QueryRow(ctx, currentLSNSQL).Scan(&lsn)
	return lsn, err
}

// need returns the position of the primary's log that a replica must
// have replayed to serve a read: past every write of this Storage and,
// with notes, past every append another process notified (that position
// is kept apart, in notedLSN, so that the other reads do not wait for
// other processes' appends). ok is false when the primary could not be
// asked.
func (w *replicated) need(ctx context.Context, notes bool) (lsn int64, ok bool) {
	known := func() bool {
		return w.covered.Load() >= w.store.lsnGen.Load() && (!notes || w.notesCovered.Load() >= w.notes.Load())
	}
	result := func() int64 {
		if notes {
			return max(w.store.lsn.Load(), w.notedLSN.Load())
		}
		return w.store.lsn.Load()
	}
	if known() {
		return result(), true
	}
	w.lsnMu.Lock()
	defer w.lsnMu.Unlock()
	if known() {
		return result(), true
	}
	gen, n := w.store.lsnGen.Load(), w.notes.Load()
	cur, err := w.primaryLSN(ctx)
	if err != nil {
		return 0, false
	}
	if w.covered.Load() < gen {
		w.store.noteLSN(cur)
		w.covered.Store(gen)
	}
	if cur > w.notedLSN.Load() {
		w.notedLSN.Store(cur) // under lsnMu: no other writer
	}
	w.notesCovered.Store(n)
	return result(), true
}

// pick returns a replica that has replayed what this Storage wrote
// (waiting for one at most ReplicaWait), or nil for the primary.
func (w *replicated) pick(ctx context.Context) *replica {
	now := time.Now()
	need, ok := w.need(ctx, false)
	if !ok {
		return nil
	}
	n := uint32(len(w.replicas))
	start := w.next.Add(1)
	var behind *replica
	for i := range n {
		r := w.replicas[(start+i)%n]
		r.maybeCheck(w, now)
		if !r.healthy.Load() || r.lagging.Load() {
			continue
		}
		if r.replayed.Load() >= need {
			return r
		}
		if behind == nil {
			behind = r
		}
	}
	if behind != nil && behind.waitFor(ctx, need, w.wait) {
		return behind
	}
	return nil
}

// served reports whether the answer of a read on r stands; it counts it
// and takes note of a failure. Only an answer, or an error the primary
// would give as well (the caller's context, bad input), stands: what the
// replica does not find, another process may have written, and an error
// of the replica (it lags behind a new schema, it fails) is the primary's
// to answer.
func (w *replicated) served(r *replica, err error) bool {
	switch {
	case err == nil:
		r.reads.Add(1)
		return true
	case errors.Is(err, storage.ErrUnavailable):
		r.failed(err)
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, storage.ErrInvalid), errors.Is(err, storage.ErrClosed):
		return true
	}
	r.declined.Add(1)
	return false
}

// onPrimary counts a read the primary serves.
func (w *replicated) onPrimary() *store {
	w.primaryReads.Add(1)
	return w.store
}

// ReplicaState describes one of a Storage's read replicas
// (ReplicaStatus).
type ReplicaState struct {
	// Host is the replica's host and port, as its connection string names
	// them.
	Host string
	// Healthy reports that the last check found it a standby that
	// answers, and no read failed on it since; Lagging that it was more
	// than ReplicaMaxLag behind the primary.
	Healthy, Lagging bool
	// Reads counts the reads it served; Declined the reads it answered
	// whose answer was not used, the primary asked instead (the replica
	// had not replayed far enough for the reader, or did not find what
	// another process may have written).
	Reads, Declined int64
	// Replayed is how far it had replayed the primary's log when last
	// asked (pg_last_wal_replay_lsn, in bytes).
	Replayed int64
	// LastError is the last error a read or check on it met, or "".
	LastError string
}

// ReplicaStatus returns the state of the read replicas of s, a Storage of
// this package (Options.Replicas), and how many reads that a replica may
// serve went to the primary instead; nothing when s has no replicas.
func ReplicaStatus(s storage.Storage) (replicas []ReplicaState, primaryReads int64) {
	w, ok := s.(*replicated)
	if !ok {
		return nil, 0
	}
	for _, r := range w.replicas {
		r.errMu.Lock()
		last := r.lastErr
		r.errMu.Unlock()
		replicas = append(replicas, ReplicaState{
			Host: r.host, Healthy: r.healthy.Load(), Lagging: r.lagging.Load(),
			Reads: r.reads.Load(), Declined: r.declined.Load(), Replayed: r.replayed.Load(), LastError: last,
		})
	}
	return replicas, w.primaryReads.Load()
}
