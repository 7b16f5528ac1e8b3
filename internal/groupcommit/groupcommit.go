// Package groupcommit coalesces concurrent requests into batches that run
// one at a time, so that a storage backend can commit many small writes in
// one transaction (group commit) while each caller still gets its own result.
//
// A request that arrives while a batch is running waits and joins the next
// batch. With a single caller every batch holds one request; under
// concurrency batches grow by themselves, up to MaxBatch. By default there
// are no timers; Options.Linger lets a leader wait briefly for the callers
// of the previous batch to come back (see Options.Linger).
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// ErrClosed is returned by Do after Close. It wraps storage.ErrClosed.
var ErrClosed = fmt.Errorf("groupcommit: batcher closed: %w", storage.ErrClosed)

// errBadRun reports a run function that broke its contract.
var errBadRun = errors.New("groupcommit: batch failed")

// DefaultMaxBatch is the MaxBatch used when Options leaves it at zero.
const DefaultMaxBatch = 128

// Options configures a Batcher. The zero value selects the defaults.
type Options struct {
	// MaxBatch caps the number of requests passed to one run call. Zero or
	// a negative value means DefaultMaxBatch.
	MaxBatch int
	// Linger is how long a leader that finds fewer requests queued than
	// the previous batch completed without an error waits for more before
	// it runs its batch; it runs as soon as that many are queued. Callers
	// that write in a loop all return from one batch at once and come back
	// one by one: without it the first to come back runs alone and the
	// others form the next batch, so every other batch holds one request.
	// A lone caller never waits, nor do callers that failed (they may have
	// work to do before they come back, such as reading what they missed
	// after a conflict). Zero disables it.
	Linger time.Duration
}

// Result is the outcome of one request of a batch.
type Result[Res any] struct {
	// Value is the request's result when Err is nil.
	Value Res
	// Err is the request's error, if any.
	Err error
}

// Batcher coalesces concurrent requests into batches run one at a time.
// It is safe for concurrent use. Create it with New and release it with
// Close.
//
// There is no background goroutine: the caller that finds no batch running
// runs one itself (it leads), so a lone caller pays no hand-off between
// goroutines. Requests that arrive meanwhile queue up; when the leader's
// batch is done it promotes the oldest queued caller to lead the next
// batch, and returns.
type Batcher[Req, Res any] struct {
	run      func(ctx context.Context, reqs []Req) []Result[Res]
	maxBatch int
	linger   time.Duration
	// arrived is signalled (without blocking) when a request is queued
	// behind a running batch, for a lingering leader.
	arrived chan struct{}

	// ctx is passed to run; it is never cancelled by a caller, so one
	// caller giving up cannot fail its neighbours' writes.
	ctx context.Context

	mu      sync.Mutex
	queue   []*call[Req, Res] // waiting to be batched, in arrival order
	running bool              // a leader exists; when false, queue is empty
	closed  bool
	last    int       // the requests of the last batch that succeeded
	idle    sync.Cond // signalled when running becomes false
}

type call[Req, Res any] struct {
	req      Req
	res      Result[Res]
	done     chan struct{} // closed when res is set
	promote  chan struct{} // closed when the caller must lead the next batch
	promoted bool          // guarded by Batcher.mu
}

// New returns a Batcher that passes batches of requests to run, one batch
// at a time, from the goroutine of one of the callers. run must return
// exactly one Result per request, in request order; its ctx is not tied to
// any caller's context. If run panics or returns the wrong number of
// results, every request of that batch fails with an error. The zero
// Options selects the defaults.
func New[Req, Res any](run func(ctx context.Context, reqs []Req) []Result[Res], opts Options) *Batcher[Req, Res] {
	b := &Batcher[Req, Res]{
		run:      run,
		maxBatch: opts.MaxBatch,
		linger:   opts.Linger,
		arrived:  make(chan struct{}, 1),
		ctx:      context.Background(),
	}
	b.idle.L = &b.mu
	if b.maxBatch <= 0 {
		b.maxBatch = DefaultMaxBatch
	}
	return b
}

// Do queues req, waits until the batch holding it has run and returns its
// result. While req is still queued, a cancelled ctx removes it and Do
// returns ctx's error; once its batch has started, Do waits for the outcome,
// since the work may have taken effect. After Close, Do returns an error
// wrapping ErrClosed (and so storage.ErrClosed).
func (b *Batcher[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	var zero Res
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	c := &call[Req, Res]{req: req, done: make(chan struct{}), promote: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return zero, ErrClosed
	}
	b.queue = append(b.queue, c)
	if !b.running {
		b.running = true
		b.mu.Unlock()
		b.lead()
		return c.res.Value, c.res.Err
	}
	b.mu.Unlock()
	if b.linger > 0 {
		select {
		case b.arrived <- struct{}{}:
		default:
		}
	}

	select {
	case <-c.done:
		return c.res.Value, c.res.Err
	case <-c.promote:
		b.lead()
		return c.res.Value, c.res.Err
	case <-ctx.Done():
	}
	b.mu.Lock()
	for i, q := range b.queue {
		if q == c {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			if c.promoted {
				b.handOff() // lead no batch; pass leadership on
			}
			b.mu.Unlock()
			return zero, ctx.Err()
		}
	}
	b.mu.Unlock()
	// Already taken into a batch: its outcome is coming.
	<-c.done
	return c.res.Value, c.res.Err
}

// lead runs one batch from the head of the queue, which holds the
// leader's own request, then hands leadership on.
func (b *Batcher[Req, Res]) lead() {
	b.mu.Lock()
	if b.linger > 0 && len(b.queue) < min(b.last, b.maxBatch) {
		b.mu.Unlock()
		b.wait()
		b.mu.Lock()
	}
	n := min(len(b.queue), b.maxBatch)
	batch := make([]*call[Req, Res], n)
	copy(batch, b.queue)
	// Shift rather than reslice so the queue's array does not grow without
	// bound.
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	b.mu.Unlock()

	ok := b.runBatch(batch)

	b.mu.Lock()
	b.last = ok
	b.handOff()
	b.mu.Unlock()
}

// wait waits up to b.linger until as many requests are queued as the last
// batch completed without an error.
func (b *Batcher[Req, Res]) wait() {
	timer := time.NewTimer(b.linger)
	defer timer.Stop()
	for {
		select {
		case <-b.arrived:
		case <-timer.C:
			return
		}
		b.mu.Lock()
		enough := len(b.queue) >= min(b.last, b.maxBatch)
		b.mu.Unlock()
		if enough {
			return
		}
	}
}

// handOff promotes the oldest queued caller to lead, or records that no
// batch is running. b.mu must be held.
func (b *Batcher[Req, Res]) handOff() {
	if len(b.queue) > 0 {
		next := b.queue[0]
		next.promoted = true
		close(next.promote)
		return
	}
	b.running = false
	b.idle.Broadcast()
}

// Close stops accepting requests and waits until every request already
// queued has run. It is idempotent and safe to call concurrently with Do.
func (b *Batcher[Req, Res]) Close() {
	b.mu.Lock()
	b.closed = true
	for b.running {
		b.idle.Wait()
	}
	b.mu.Unlock()
}

// runBatch runs batch, hands each caller its result and returns how many
// succeeded.
func (b *Batcher[Req, Res]) runBatch(batch []*call[Req, Res]) (ok int) {
	reqs := make([]Req, len(batch))
	for i, c := range batch {
		reqs[i] = c.req
	}
	results, err := b.safeRun(reqs)
	for i, c := range batch {
		if err != nil {
			c.res = Result[Res]{Err: err}
		} else {
			c.res = results[i]
		}
		if c.res.Err == nil {
			ok++
		}
		close(c.done)
	}
	return ok
}

func (b *Batcher[Req, Res]) safeRun(reqs []Req) (results []Result[Res], err error) {
	defer func() {
		if p := recover(); p != nil {
			results, err = nil, fmt.Errorf("%w: panic: %v", errBadRun, p)
		}
	}()
	results = b.run(b.ctx, reqs)
	if len(results) != len(reqs) {
		return nil, fmt.Errorf("%w: run returned %d results for %d requests", errBadRun, len(results), len(reqs))
	}
	return results, nil
}
