// Package groupcommit coalesces concurrent requests into batches that one
// goroutine runs, so that a storage backend can commit many small writes in
// one transaction (group commit) while each caller still gets its own result.
//
// There are no timers: a request that arrives while a batch is running waits
// and joins the next batch. With a single caller every batch holds one
// request; under concurrency batches grow by themselves, up to MaxBatch.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/eventkit-go/eventstore"
)

// ErrClosed is returned by Do after Close. It wraps eventstore.ErrClosed.
var ErrClosed = fmt.Errorf("groupcommit: batcher closed: %w", eventstore.ErrClosed)

// errBadRun reports a run function that broke its contract.
var errBadRun = errors.New("groupcommit: batch failed")

// DefaultMaxBatch is the MaxBatch used when Options leaves it at zero.
const DefaultMaxBatch = 128

// Options configures a Batcher. The zero value selects the defaults.
type Options struct {
	// MaxBatch caps the number of requests passed to one run call. Zero or
	// a negative value means DefaultMaxBatch.
	MaxBatch int
}

// Result is the outcome of one request of a batch.
type Result[Res any] struct {
	// Value is the request's result when Err is nil.
	Value Res
	// Err is the request's error, if any.
	Err error
}

// Batcher coalesces concurrent requests into batches run by one goroutine.
// It is safe for concurrent use. Create it with New and release it with
// Close.
type Batcher[Req, Res any] struct {
	run      func(ctx context.Context, reqs []Req) []Result[Res]
	maxBatch int

	// ctx is passed to run; it is never cancelled by a caller, so one
	// caller giving up cannot fail its neighbours' writes.
	ctx context.Context

	mu     sync.Mutex
	queue  []*call[Req, Res] // waiting to be batched, in arrival order
	closed bool
	wake   chan struct{} // buffered(1): the queue may hold work or Close was called
	done   chan struct{} // closed when the loop goroutine has exited
}

type call[Req, Res any] struct {
	req  Req
	res  Result[Res]
	done chan struct{} // closed when res is set
}

// New returns a Batcher that passes batches of requests to run, from a
// single goroutine, one batch at a time. run must return exactly one Result
// per request, in request order; its ctx is not tied to any caller's
// context. If run panics or returns the wrong number of results, every
// request of that batch fails with an error. The zero Options selects
// the defaults.
func New[Req, Res any](run func(ctx context.Context, reqs []Req) []Result[Res], opts Options) *Batcher[Req, Res] {
	b := &Batcher[Req, Res]{
		run:      run,
		maxBatch: opts.MaxBatch,
		ctx:      context.Background(),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
	if b.maxBatch <= 0 {
		b.maxBatch = DefaultMaxBatch
	}
	go b.loop()
	return b
}

// Do queues req, waits until the batch holding it has run and returns its
// result. While req is still queued, a cancelled ctx removes it and Do
// returns ctx's error; once its batch has started, Do waits for the outcome,
// since the work may have taken effect. After Close, Do returns an error
// wrapping ErrClosed (and so eventstore.ErrClosed).
func (b *Batcher[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	var zero Res
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	c := &call[Req, Res]{req: req, done: make(chan struct{})}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return zero, ErrClosed
	}
	b.queue = append(b.queue, c)
	b.mu.Unlock()
	b.signal()

	select {
	case <-c.done:
		return c.res.Value, c.res.Err
	case <-ctx.Done():
	}
	b.mu.Lock()
	for i, q := range b.queue {
		if q == c {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			b.mu.Unlock()
			return zero, ctx.Err()
		}
	}
	b.mu.Unlock()
	// Already taken into a batch: its outcome is coming.
	<-c.done
	return c.res.Value, c.res.Err
}

func (b *Batcher[Req, Res]) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Close stops accepting requests, waits until every request already queued
// has run and stops the goroutine. It is idempotent and safe to call
// concurrently with Do.
func (b *Batcher[Req, Res]) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.signal()
	<-b.done
}

func (b *Batcher[Req, Res]) loop() {
	defer close(b.done)
	for {
		<-b.wake
		for {
			b.mu.Lock()
			n := min(len(b.queue), b.maxBatch)
			batch := make([]*call[Req, Res], n)
			copy(batch, b.queue)
			// Shift rather than reslice so the queue's array does not grow
			// without bound.
			rest := copy(b.queue, b.queue[n:])
			clear(b.queue[rest:])
			b.queue = b.queue[:rest]
			closed := b.closed
			b.mu.Unlock()
			if n == 0 {
				if closed {
					return
				}
				break
			}
			b.runBatch(batch)
		}
	}
}

func (b *Batcher[Req, Res]) runBatch(batch []*call[Req, Res]) {
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
		close(c.done)
	}
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
