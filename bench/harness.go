package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// The events every subject writes: one aggregate type, one event type and
// a small JSON object, as in the library's own benchmarks.
const (
	aggType   = "acct"
	eventType = "Deposited"
	amount    = 1250
)

var eventData = []byte(`{"amount":1250,"note":"benchmark event"}`)

// errConflict is what a subject returns when an append lost an optimistic
// concurrency check (the aggregate moved past the expected version).
var errConflict = errors.New("bench: version conflict")

// A subject is one implementation under test (our Store, a raw baseline or
// a peer library) on one backend. Versions are in the subject's own unit
// (ours counts saves, the peers count events); the harness only passes back
// what the subject returned.
type subject interface {
	// append stores n events in aggregate agg if it is at version expected
	// and returns the new version; it returns an error wrapping errConflict
	// when the aggregate has moved on.
	append(ctx context.Context, agg string, expected int64, n int) (int64, error)
	// refresh reads what was saved to agg after version known, as a client
	// retrying a conflicting save must, and returns the current version.
	refresh(ctx context.Context, agg string, known int64) (int64, error)
	// load reads every event of agg and returns how many there were.
	load(ctx context.Context, agg string) (int, error)
	// feed reads the whole global feed in order and returns its length.
	feed(ctx context.Context) (int, error)
	// rebuild builds a new projection (sum and count per aggregate) from
	// the whole feed and returns how many events it applied. Each call
	// builds a projection of its own from scratch.
	rebuild(ctx context.Context) (int, error)
	// close releases the subject and everything it created.
	close() error
}

// A maker creates a fresh, empty subject.
type maker struct {
	name string // column name: ours, raw, hallgren, goes
	make func(ctx context.Context) (subject, error)
}

// sizes are the workload sizes of one run.
type sizes struct {
	appendFor  time.Duration // how long one append measurement runs
	loadEvents int           // events in the aggregate loaded
	loads      int           // loads per measurement
	feedEvents int           // events in the feed read
	rebuild    int           // events the projection is rebuilt over
	reps       int           // measurements per cell; the median is reported
}

// A cell is one measured workload of one subject: the median rate of its
// repetitions and the retries counted by the contended appends.
type cell struct {
	rates   []float64 // events per second, one per repetition
	retries int64
	err     error
}

func (c *cell) median() float64 {
	if len(c.rates) == 0 {
		return 0
	}
	r := slices.Clone(c.rates)
	slices.Sort(r)
	return r[len(r)/2]
}

// newEvents returns the payload of one append.
func newIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	return ids
}

// appendDistinct runs writers goroutines for d, each appending batches of n
// events to its own new aggregate, and returns events/s.
func appendDistinct(ctx context.Context, s subject, writers, n int, d time.Duration) (float64, error) {
	var total atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for range writers {
		wg.Go(func() {
			agg := uuid.NewString()
			var v int64
			// At least one save each, however late the goroutine starts: a
			// loaded machine must not measure a rate of 0.
			for first := true; first || time.Now().Before(deadline); first = false {
				nv, err := s.append(ctx, agg, v, n)
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				v = nv
				total.Add(int64(n))
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	if firstErr != nil {
		return 0, firstErr
	}
	return float64(total.Load()) / el.Seconds(), nil
}

// appendContended runs writers goroutines for d, all appending batches of
// n events to one aggregate with optimistic concurrency: a writer whose
// save conflicts reads what it missed and retries. It returns events/s
// stored and the number of retries.
func appendContended(ctx context.Context, s subject, writers, n int, d time.Duration) (float64, int64, error) {
	var total, retries atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	agg := uuid.NewString()
	start := time.Now()
	deadline := start.Add(d)
	for range writers {
		wg.Go(func() {
			var v int64
			// At least one save each, however late the goroutine starts: a
			// loaded machine must not measure a rate of 0.
			for first := true; first || time.Now().Before(deadline); first = false {
				nv, err := s.append(ctx, agg, v, n)
				if errors.Is(err, errConflict) {
					retries.Add(1)
					if v, err = s.refresh(ctx, agg, v); err == nil {
						continue
					}
				}
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				v = nv
				total.Add(int64(n))
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	if firstErr != nil {
		return 0, 0, firstErr
	}
	return float64(total.Load()) / el.Seconds(), retries.Load(), nil
}

// populate fills s with the aggregate loaded by the load workload
// (loadEvents events in batches of 100) and then with other aggregates up
// to total events, from 8 writers in batches of 100. It returns the id of
// the loaded aggregate.
func populate(ctx context.Context, s subject, loadEvents, from, total int, loadAgg string) error {
	if from == 0 {
		var v int64
		for done := 0; done < loadEvents; {
			n := min(100, loadEvents-done)
			nv, err := s.append(ctx, loadAgg, v, n)
			if err != nil {
				return fmt.Errorf("populate: %w", err)
			}
			v = nv
			done += n
		}
		from = loadEvents
	}
	batches := (total - from + 99) / 100
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(batches) {
					return
				}
				n := min(100, total-from-int(i)*100)
				if _, err := s.append(ctx, uuid.NewString(), 0, n); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("populate: %w", err) })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// timeRate runs f and returns events/s, f returning how many events it
// handled; want, when positive, is the count f must return.
func timeRate(want int, f func() (int, error)) (float64, error) {
	start := time.Now()
	n, err := f()
	el := time.Since(start)
	if err != nil {
		return 0, err
	}
	if want > 0 && n != want {
		return 0, fmt.Errorf("handled %d events, want %d", n, want)
	}
	return float64(n) / el.Seconds(), nil
}
