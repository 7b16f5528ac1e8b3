package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// The reads on a replica's pool and the replica's health (replica.go).

// probe carries what a read on a replica learns besides its answer
// (replica.queryOn, replica.queryWM).
type probe struct {
	lsn int64 // how far the replica had replayed
	// head, with wantHead, is the replica's head under its watermark.
	wantHead bool
	head     int64
	// checkpoint, with def, is the replica's checkpoint of projection def
	// (hasDef false when it has no such definition).
	def        string
	checkpoint int64
	hasDef     bool
}

type probeKey struct{}

func withProbe(ctx context.Context, p *probe) context.Context {
	return context.WithValue(ctx, probeKey{}, p)
}

// readFirst reads the first statement of a read on the replica, whose
// last column is replayedSQL.
func (r *replica) readFirst(br pgx.BatchResults, p *probe, skip int) error {
	var lsn int64
	dest := make([]any, skip+1)
	dest[skip] = &lsn
	if err := br.QueryRow().Scan(dest...); err != nil {
		return err
	}
	if lsn < 0 {
		return errNotStandby
	}
	r.sawReplay(lsn)
	if p != nil {
		p.lsn = lsn
	}
	return nil
}

// queryOn is store.queryOn on the replica: the tenant, how far the
// replica has replayed, and the checkpoint a probe asks for, in the same
// round trip.
func (r *replica) queryOn(ctx context.Context, db sender, sql string, args ...any) (pgx.Rows, error) {
	p, _ := ctx.Value(probeKey{}).(*probe)
	b := &pgx.Batch{}
	b.Queue(replicaTenantSQL, r.st.tenant)
	if p != nil && p.def != "" {
		b.Queue(r.st.sql.checkpoint, p.def)
	}
	b.Queue(sql, args...)
	br := db.SendBatch(ctx, b)
	if err := r.readFirst(br, p, 1); err != nil {
		br.Close()
		return nil, err
	}
	if p != nil && p.def != "" {
		err := br.QueryRow().Scan(&p.checkpoint)
		switch {
		case err == nil:
			p.hasDef = true
		case !errors.Is(err, pgx.ErrNoRows):
			br.Close()
			return nil, err
		}
	}
	rows, err := br.Query()
	if err != nil {
		br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// queryWM is store.queryWM on the replica, with the replica's watermark,
// how far it has replayed, and its head when a probe asks, in the same
// round trip.
func (r *replica) queryWM(ctx context.Context, sql string, args ...any) (rows pgx.Rows, br pgx.BatchResults, err error) {
	p, _ := ctx.Value(probeKey{}).(*probe)
	b := &pgx.Batch{}
	b.Queue(replicaWatermarkSQL, r.st.tenant)
	if p != nil && p.wantHead {
		b.Queue(r.st.sql.head)
	}
	b.Queue(sql, args...)
	br = r.st.pool.SendBatch(ctx, b)
	if err := r.readFirst(br, p, 2); err != nil {
		br.Close()
		return nil, nil, err
	}
	if p != nil && p.wantHead {
		if err := br.QueryRow().Scan(&p.head); err != nil {
			br.Close()
			return nil, nil, err
		}
	}
	if rows, err = br.Query(); err != nil {
		br.Close()
		return nil, nil, err
	}
	return rows, br, nil
}

func (r *replica) sawReplay(lsn int64) {
	for {
		cur := r.replayed.Load()
		if lsn <= cur || r.replayed.CompareAndSwap(cur, lsn) {
			return
		}
	}
}

// status asks the replica how far it has replayed.
func (r *replica) status(ctx context.Context) (int64, error) {
	var lsn int64
	if err := r.st.pool.QueryRow(ctx, replicaStatusSQL).Scan(&lsn); err != nil {
		return 0, err
	}
	if lsn < 0 {
		return 0, errNotStandby
	}
	r.sawReplay(lsn)
	return lsn, nil
}

// replicaAsk bounds a question of waitFor to a replica: enough for a round
// trip on a loaded machine, or to make a connection.
const replicaAsk = 500 * time.Millisecond

// waitFor waits at most wait for the replica to replay up to lsn, and
// reports whether it did.
func (r *replica) waitFor(ctx context.Context, lsn int64, wait time.Duration) bool {
	if wait <= 0 {
		return false
	}
	// wait bounds how long the replica may take to replay, not a round
	// trip: a question asked before the deadline may take replicaAsk.
	deadline := time.Now().Add(wait)
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(replicaAsk))
	defer cancel()
	for pause := 200 * time.Microsecond; ; pause = min(2*pause, 2*time.Millisecond) {
		got, err := r.status(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.failed(err)
			}
			return false
		}
		if got >= lsn {
			return true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// failed takes the replica out of service until a check finds it well;
// the next read asks for one at once, so that a passing error (a query
// cancelled by a conflict with recovery) costs one read.
func (r *replica) failed(err error) {
	r.healthy.Store(false)
	r.nextCheck.Store(0)
	r.errMu.Lock()
	r.lastErr = err.Error()
	r.errMu.Unlock()
}

// maybeCheck starts a check of the replica when one is due.
func (r *replica) maybeCheck(w *replicated, now time.Time) {
	if now.UnixNano() < r.nextCheck.Load() || !r.checking.CompareAndSwap(false, true) {
		return
	}
	w.checkMu.Lock()
	defer w.checkMu.Unlock()
	if w.closing {
		r.checking.Store(false)
		return
	}
	w.checks.Add(1)
	go r.check(w)
}

// check asks the replica whether it is a standby and how far it has
// replayed, and the primary where its log is, and judges the replica's
// health and lag. The caller has set r.checking and added to w.checks.
func (r *replica) check(w *replicated) {
	defer w.checks.Done()
	defer r.checking.Store(false)
	ctx, cancel := w.store.untilClosed(context.Background())
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, replicaCheckTimeout)
	defer cancelT()
	start := time.Now()
	if lsn, err := w.primaryLSN(ctx); err == nil {
		w.sample(start, lsn)
	}
	lsn, err := r.status(ctx)
	if err != nil {
		r.failed(err)
		r.nextCheck.Store(start.Add(replicaRetry).UnixNano())
		return
	}
	r.lagging.Store(lsn < w.lsnAt(start.Add(-w.maxLag)))
	r.healthy.Store(true)
	r.nextCheck.Store(start.Add(replicaCheckEvery).UnixNano())
}

// sample records where the primary's log was at a time.
func (w *replicated) sample(at time.Time, lsn int64) {
	w.samplesMu.Lock()
	defer w.samplesMu.Unlock()
	w.samples = append(w.samples, lsnSample{at: at, lsn: lsn})
	// Keep the newest sample at least maxLag old, and those after it.
	keep := 0
	for i, s := range w.samples {
		if at.Sub(s.at) >= w.maxLag {
			keep = i
		}
	}
	w.samples = append(w.samples[:0], w.samples[keep:]...)
}

// lsnAt returns where the primary's log was at time t, as far as the
// samples tell (the newest sample not after t), or 0.
func (w *replicated) lsnAt(t time.Time) int64 {
	w.samplesMu.Lock()
	defer w.samplesMu.Unlock()
	var lsn int64
	for _, s := range w.samples {
		if s.at.After(t) {
			break
		}
		lsn = s.lsn
	}
	return lsn
}
