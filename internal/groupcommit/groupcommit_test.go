package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// double returns each request times two, and fails odd requests divisible by 3.
func double(_ context.Context, reqs []int) []Result[int] {
	out := make([]Result[int], len(reqs))
	for i, r := range reqs {
		if r%3 == 0 && r%2 == 1 {
			out[i].Err = fmt.Errorf("request %d refused", r)
			continue
		}
		out[i].Value = 2 * r
	}
	return out
}

func TestEachCallerGetsItsOwnResult(t *testing.T) {
	b := New(double, Options{})
	defer b.Close()
	const n = 500
	type got struct {
		req, val int
		err      error
	}
	results := make(chan got, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := b.Do(context.Background(), i)
			results <- got{i, v, err}
		}()
	}
	wg.Wait()
	close(results)
	count := 0
	for g := range results {
		count++
		if g.req%3 == 0 && g.req%2 == 1 {
			if g.err == nil || g.err.Error() != fmt.Sprintf("request %d refused", g.req) {
				t.Errorf("request %d: err = %v, want its own refusal", g.req, g.err)
			}
			continue
		}
		if g.err != nil || g.val != 2*g.req {
			t.Errorf("request %d: got (%d, %v), want (%d, nil)", g.req, g.val, g.err, 2*g.req)
		}
	}
	if count != n {
		t.Fatalf("%d results, want %d", count, n)
	}
}

// gate is a run function that blocks each batch until released, and
// records the batches it saw.
type gate struct {
	mu      sync.Mutex
	batches [][]int
	started chan struct{}
	release chan struct{}
}

func newGate() *gate {
	return &gate{started: make(chan struct{}, 100), release: make(chan struct{})}
}

func (g *gate) run(_ context.Context, reqs []int) []Result[int] {
	g.mu.Lock()
	g.batches = append(g.batches, append([]int(nil), reqs...))
	g.mu.Unlock()
	g.started <- struct{}{}
	<-g.release
	out := make([]Result[int], len(reqs))
	for i, r := range reqs {
		out[i].Value = r
	}
	return out
}

func (g *gate) seen() [][]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([][]int(nil), g.batches...)
}

// waitQueued waits until n requests wait in b's queue.
func waitQueued[Req, Res any](t *testing.T, b *Batcher[Req, Res], n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		l := len(b.queue)
		b.mu.Unlock()
		if l == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue holds %d requests, want %d", l, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRequestsArrivingDuringABatchFormTheNextBatchInOrder(t *testing.T) {
	g := newGate()
	b := New(g.run, Options{MaxBatch: 4})
	defer b.Close()

	var wg sync.WaitGroup
	do := func(r int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := b.Do(context.Background(), r); err != nil || v != r {
				t.Errorf("Do(%d) = %d, %v", r, v, err)
			}
		}()
	}
	do(0)
	<-g.started // batch [0] is running
	for r := 1; r <= 6; r++ {
		do(r)
		waitQueued(t, b, r) // enqueue in a known order
	}
	g.release <- struct{}{} // finish [0]
	<-g.started
	g.release <- struct{}{} // finish [1 2 3 4]
	<-g.started
	g.release <- struct{}{} // finish [5 6]
	wg.Wait()

	want := [][]int{{0}, {1, 2, 3, 4}, {5, 6}}
	if got := g.seen(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batches = %v, want %v", got, want)
	}
}

func TestBatchingHappensUnderConcurrency(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	run := func(ctx context.Context, reqs []int) []Result[int] {
		mu.Lock()
		sizes = append(sizes, len(reqs))
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // like an fsync
		return make([]Result[int], len(reqs))
	}
	b := New(run, Options{})
	defer b.Close()
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Do(context.Background(), i); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	total, biggest := 0, 0
	for _, s := range sizes {
		total += s
		biggest = max(biggest, s)
	}
	if total != n {
		t.Fatalf("ran %d requests, want %d", total, n)
	}
	if len(sizes) >= n/4 || biggest < 4 {
		t.Fatalf("%d batches (largest %d) for %d concurrent requests: no batching", len(sizes), biggest, n)
	}
}

func TestCloseRunsQueuedRequestsThenRefuses(t *testing.T) {
	g := newGate()
	b := New(g.run, Options{})
	results := make(chan error, 2)
	go func() { _, err := b.Do(context.Background(), 1); results <- err }()
	<-g.started
	go func() { _, err := b.Do(context.Background(), 2); results <- err }()
	waitQueued(t, b, 1)

	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	// Close waits for the queued request; new ones are refused meanwhile.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.mu.Lock()
		c := b.closed
		b.mu.Unlock()
		if c {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Close did not start")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := b.Do(context.Background(), 3); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do while closing: %v, want ErrClosed", err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a batch was running")
	default:
	}
	g.release <- struct{}{}
	<-g.started
	g.release <- struct{}{}
	<-closed
	for range 2 {
		if err := <-results; err != nil {
			t.Errorf("request accepted before Close: %v", err)
		}
	}
	_, err := b.Do(context.Background(), 4)
	if !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Do after Close: %v, want ErrClosed", err)
	}
	b.Close() // idempotent
	if got := g.seen(); fmt.Sprint(got) != "[[1] [2]]" {
		t.Fatalf("batches = %v", got)
	}
}

func TestCancelWhileQueuedRemovesTheRequest(t *testing.T) {
	g := newGate()
	b := New(g.run, Options{})
	defer b.Close()
	go b.Do(context.Background(), 1)
	<-g.started

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := b.Do(ctx, 2); errc <- err }()
	waitQueued(t, b, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Do: %v, want context.Canceled", err)
	}
	waitQueued(t, b, 0)
	g.release <- struct{}{}

	// The next batch does not contain the cancelled request.
	done := make(chan struct{})
	go func() { b.Do(context.Background(), 3); close(done) }()
	<-g.started
	g.release <- struct{}{}
	<-done
	if got := g.seen(); fmt.Sprint(got) != "[[1] [3]]" {
		t.Fatalf("batches = %v, want [[1] [3]]", got)
	}
}

func TestCancelAfterBatchStartedWaitsForOutcome(t *testing.T) {
	g := newGate()
	b := New(g.run, Options{})
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	type out struct {
		v   int
		err error
	}
	res := make(chan out, 1)
	go func() { v, err := b.Do(ctx, 7); res <- out{v, err} }()
	<-g.started
	cancel()
	select {
	case r := <-res:
		t.Fatalf("Do returned %v before its running batch finished", r)
	case <-time.After(20 * time.Millisecond):
	}
	g.release <- struct{}{}
	if r := <-res; r.err != nil || r.v != 7 {
		t.Fatalf("Do = %d, %v; want 7, nil", r.v, r.err)
	}
}

func TestBrokenRunFailsItsBatchOnly(t *testing.T) {
	run := func(_ context.Context, reqs []int) []Result[int] {
		switch reqs[0] {
		case 1:
			panic("boom")
		case 2:
			return nil
		}
		return make([]Result[int], len(reqs))
	}
	b := New(run, Options{})
	defer b.Close()
	for _, r := range []int{1, 2} {
		if _, err := b.Do(context.Background(), r); !errors.Is(err, errBadRun) {
			t.Errorf("Do(%d) = %v, want a batch failure", r, err)
		}
	}
	if _, err := b.Do(context.Background(), 3); err != nil {
		t.Fatalf("batcher unusable after a broken batch: %v", err)
	}
}

func TestDoWithCancelledContext(t *testing.T) {
	b := New(double, Options{})
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Do(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
}

// TestStressWithCancellations mixes callers that give up at random moments
// with callers that wait: every waiting caller gets its own result, nothing
// deadlocks, and Close returns.
func TestStressWithCancellations(t *testing.T) {
	var ran sync.Map
	run := func(_ context.Context, reqs []int) []Result[int] {
		time.Sleep(50 * time.Microsecond)
		out := make([]Result[int], len(reqs))
		for i, r := range reqs {
			if _, dup := ran.LoadOrStore(r, true); dup {
				out[i].Err = fmt.Errorf("request %d ran twice", r)
			}
			out[i].Value = r
		}
		return out
	}
	b := New(run, Options{MaxBatch: 8})
	var wg sync.WaitGroup
	for i := range 2000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if i%3 == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(i%50)*time.Microsecond)
				defer cancel()
			}
			v, err := b.Do(ctx, i)
			switch {
			case err == nil && v != i:
				t.Errorf("Do(%d) = %d", i, v)
			case err != nil && (i%3 != 0 || !errors.Is(err, context.DeadlineExceeded)):
				t.Errorf("Do(%d): %v", i, err)
			}
		}()
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { b.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
}

// TestLingerWaitsForThePreviousBatchsCallers checks that with Linger a
// leader that finds fewer requests queued than the previous batch held
// waits for that many (the linger is an hour: the test hangs if it is not
// cut short by the arrivals), and that a lone caller never waits.
func TestLingerWaitsForThePreviousBatchsCallers(t *testing.T) {
	g := newGate()
	b := New(g.run, Options{Linger: time.Hour})
	defer b.Close()
	go func() { // a lone caller: batches of one, no wait
		for range 3 {
			<-g.started
			g.release <- struct{}{}
		}
	}()
	for r := range 3 {
		if v, err := b.Do(context.Background(), r); err != nil || v != r {
			t.Fatalf("Do(%d) = %d, %v", r, v, err)
		}
	}

	var wg sync.WaitGroup
	do := func(r int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if v, err := b.Do(context.Background(), r); err != nil || v != r {
				t.Errorf("Do(%d) = %d, %v", r, v, err)
			}
		}()
	}
	do(10)
	<-g.started // batch [10] is running
	for r := 11; r <= 13; r++ {
		do(r)
		waitQueued(t, b, r-10)
	}
	g.release <- struct{}{} // finish [10]
	<-g.started             // [11 12 13]: the previous batch held 1
	g.release <- struct{}{}
	wg.Wait()
	// The previous batch held 3: the leader of 20 waits for 21 and 22.
	do(20)
	waitQueued(t, b, 1)
	do(21)
	waitQueued(t, b, 2)
	do(22)
	<-g.started
	g.release <- struct{}{}
	wg.Wait()

	want := [][]int{{0}, {1}, {2}, {10}, {11, 12, 13}, {20, 21, 22}}
	if got := g.seen(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batches = %v, want %v", got, want)
	}
}

// TestLingerCountsOnlySuccesses checks that callers whose requests failed
// are not waited for: after a batch of three of which two failed, a lone
// caller runs at once (the linger is an hour).
func TestLingerCountsOnlySuccesses(t *testing.T) {
	g := newGate()
	run := func(ctx context.Context, reqs []int) []Result[int] {
		out := g.run(ctx, reqs)
		for i, r := range reqs {
			if r < 0 {
				out[i] = Result[int]{Err: fmt.Errorf("request %d refused", r)}
			}
		}
		return out
	}
	b := New(run, Options{Linger: time.Hour})
	defer b.Close()
	var wg sync.WaitGroup
	do := func(r int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := b.Do(context.Background(), r)
			if (err != nil) != (r < 0) || err == nil && v != r {
				t.Errorf("Do(%d) = %d, %v", r, v, err)
			}
		}()
	}
	do(0)
	<-g.started // batch [0] is running
	for i, r := range []int{-1, -2, 3} {
		do(r)
		waitQueued(t, b, i+1)
	}
	g.release <- struct{}{} // finish [0]
	<-g.started             // [-1 -2 3]: the previous batch held 1 success
	g.release <- struct{}{}
	wg.Wait()
	do(4) // one success before: no wait
	<-g.started
	g.release <- struct{}{}
	wg.Wait()

	want := [][]int{{0}, {-1, -2, 3}, {4}}
	if got := g.seen(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batches = %v, want %v", got, want)
	}
}
