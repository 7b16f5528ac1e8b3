package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// feedFollower follows the feed of all types through a server in the
// background, as a client would through a failover: it retries what fails
// (no answer, 503) and records every event id it reads and whether the
// sequence numbers ever went back.
type feedFollower struct {
	s      *server
	mu     sync.Mutex
	cursor int64
	ids    map[string]int // event id → times read
	back   []string       // sequence numbers that went back
	stop   chan struct{}
	done   chan struct{}
}

func startFollower(s *server) *feedFollower {
	f := &feedFollower{s: s, ids: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		for {
			select {
			case <-f.stop:
				return
			default:
			}
			if !f.page() {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return f
}

// page reads one page after the cursor; it reports whether it read one
// with entries.
func (f *feedFollower) page() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f.mu.Lock()
	cursor := f.cursor
	f.mu.Unlock()
	status, body, err := f.s.do(ctx, "GET", fmt.Sprintf("/feeds/_all?since=%d&limit=500", cursor), nil)
	var p feedPage
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &p) != nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range p.Entries {
		if e.SequenceNumber <= f.cursor {
			f.back = append(f.back, fmt.Sprintf("%d after %d", e.SequenceNumber, f.cursor))
		}
		f.cursor = e.SequenceNumber
		for _, ev := range e.Events {
			f.ids[ev.EventID]++
		}
	}
	return len(p.Entries) > 0
}

// finish stops the background reads, then reads up to the feed's end.
func (f *feedFollower) finish(t *testing.T) {
	close(f.stop)
	<-f.done
	deadline := time.Now().Add(60 * time.Second)
	for f.page() || time.Now().Before(deadline) && !f.atEnd() {
		if time.Now().After(deadline) {
			t.Fatal("the follower did not reach the feed's end within 60 s")
		}
	}
}

// atEnd reports whether a page after the cursor is empty.
func (f *feedFollower) atEnd() bool {
	f.mu.Lock()
	cursor := f.cursor
	f.mu.Unlock()
	status, body, err := f.s.do(context.Background(), "GET", fmt.Sprintf("/feeds/_all?since=%d&limit=1", cursor), nil)
	var p feedPage
	return err == nil && status == http.StatusOK && json.Unmarshal(body, &p) == nil && len(p.Entries) == 0
}

// TestFailoverCleanCrash: the primary crashes under load (immediate
// shutdown) with its synchronous standby caught up, and the standby is
// promoted. Two server processes on a multi-host URL must reconnect by
// themselves; every acknowledged save is stored once (none lost, none
// duplicated), an unacknowledged one wholly or not at all; the
// projection counts exactly what is stored on both processes; a feed
// follower that read through the failover has every stored event once,
// its sequence numbers never going back. The test logs the time to each
// process's first acknowledged save after the promotion and the
// readiness transitions.
func TestFailoverCleanCrash(t *testing.T) {
	primary, standby := newPair(t, true)
	crashUnderLoad(t, multiHost(primary, standby), func() (crashed, promoted time.Time) {
		crashed = time.Now() // pg_ctl stop -m immediate returns once the server is gone
		primary.stop("immediate")
		standby.promote()
		return crashed, time.Now()
	})
}

// crashUnderLoad runs two servers on url under load with a feed follower,
// calls failover, which crashes the primary and returns when and when a
// standby was promoted, and checks what TestFailoverCleanCrash says.
func crashUnderLoad(t *testing.T, url string, failover func() (crashed, promoted time.Time)) {
	a, b := startServer(t, url), startServer(t, url)
	servers := []*server{a, b}
	a.mustDo("POST", "/projections/definitions", definition("totals", true), http.StatusOK)
	ready := []*readyWatch{watchReady(t, a), watchReady(t, b)}
	follower := startFollower(b)

	var (
		mu       sync.Mutex
		all      []saved
		statuses = map[int]int{}
		ackedAt  = map[*server][]time.Time{}
	)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 4 {
		s := servers[i%2]
		wg.Go(func() {
			for ctx.Err() == nil {
				sctx, cancel := context.WithTimeout(ctx, 8*time.Second)
				r := save(sctx, s)
				cancel()
				mu.Lock()
				all = append(all, r)
				statuses[r.status]++
				if r.status == http.StatusOK {
					ackedAt[s] = append(ackedAt[s], time.Now())
				}
				mu.Unlock()
				if r.status != http.StatusOK {
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	stopped := false
	stopSavers := func() {
		if !stopped {
			stopped = true
			stop()
			wg.Wait()
		}
	}
	defer stopSavers()
	acks := func(s *server, after time.Time) (n int, first time.Time) {
		mu.Lock()
		defer mu.Unlock()
		for _, at := range ackedAt[s] {
			if at.After(after) {
				if n == 0 {
					first = at
				}
				n++
			}
		}
		return n, first
	}
	require.Eventually(t, func() bool { n1, _ := acks(a, time.Time{}); n2, _ := acks(b, time.Time{}); return n1 >= 30 && n2 >= 30 },
		60*time.Second, 20*time.Millisecond, "saves before the crash")

	crashed, promoted := failover()
	// Both processes find the new primary by themselves.
	for _, s := range servers {
		require.Eventually(t, func() bool { n, _ := acks(s, promoted); return n >= 20 }, 60*time.Second, 20*time.Millisecond,
			"saves through %s after the promotion\nserver log:\n%s", s.base, tail(s.logs.String()))
	}
	for i, s := range servers {
		_, first := acks(s, promoted)
		readyAgain, ok := time.Time{}, false
		for deadline := time.Now().Add(30 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			readyAgain, ok = ready[i].firstAfter(promoted, http.StatusOK)
		}
		t.Logf("server %c: first acknowledged save %.2fs after the promotion (%.2fs after the crash; promoted %.2fs after it); /readyz 200 again %.2fs after the promotion (%v); readiness: %s",
			'a'+i, first.Sub(promoted).Seconds(), first.Sub(crashed).Seconds(), promoted.Sub(crashed).Seconds(),
			readyAgain.Sub(promoted).Seconds(), ok, ready[i].report(moment{"crash", crashed}, moment{"promotion", promoted}))
		assert.True(t, ok, "server %c: /readyz did not answer 200 after the promotion", 'a'+i)
	}
	stopSavers()
	mu.Lock()
	t.Logf("statuses: %v (0: no answer within 8 s)", statuses)
	for code := range statuses {
		assert.Contains(t, []int{0, http.StatusOK, http.StatusServiceUnavailable}, code, "a save answered %d", code)
	}
	mu.Unlock()

	// Saves whose clients gave up may still complete: wait until the
	// feed's head stood still for a second.
	var head int64 = -1
	for still, quiet := 0, time.Now().Add(40*time.Second); still < 5 && time.Now().Before(quiet); time.Sleep(200 * time.Millisecond) {
		var p feedPage
		status, body, err := a.do(context.Background(), "GET", "/feeds/_all?limit=1", nil)
		if err != nil || status != http.StatusOK || json.Unmarshal(body, &p) != nil {
			still = 0
			continue
		}
		if p.Current == head {
			still++
		} else {
			head, still = p.Current, 0
		}
	}
	// What the store holds, read through a from the start.
	stored := map[string]int{}
	for cursor := int64(0); ; {
		var p feedPage
		require.NoError(t, json.Unmarshal(a.mustDo("GET", fmt.Sprintf("/feeds/_all?since=%d&limit=500", cursor), nil, http.StatusOK), &p))
		for _, e := range p.Entries {
			require.Greater(t, e.SequenceNumber, cursor)
			cursor = e.SequenceNumber
			for _, ev := range e.Events {
				stored[ev.EventID]++
			}
		}
		if len(p.Entries) == 0 {
			break
		}
	}
	lost, partial, dup := 0, 0, 0
	for _, r := range all {
		n := 0
		for _, id := range r.batch.ids {
			if stored[id] > 0 {
				n++
			}
		}
		switch {
		case r.status == http.StatusOK && n != len(r.batch.ids):
			lost++
		case n != 0 && n != len(r.batch.ids):
			partial++
		}
	}
	for _, n := range stored {
		if n > 1 {
			dup++
		}
	}
	t.Logf("%d saves, %d events stored; %d acknowledged saves lost, %d partly stored, %d events stored twice", len(all), len(stored), lost, partial, dup)
	assert.Zero(t, lost, "acknowledged saves lost")
	assert.Zero(t, partial, "saves partly stored")
	assert.Zero(t, dup, "events stored twice")
	// The projection counts every stored event once, on both processes.
	for _, s := range servers {
		deadline := time.Now().Add(30 * time.Second)
		for {
			n, _ := totals(t, s)
			if n == len(stored) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("totals count on %s = %d, the store holds %d events\nserver log:\n%s", s.base, n, len(stored), tail(s.logs.String()))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// The follower read every stored event once, and nothing else.
	follower.finish(t)
	assert.Empty(t, follower.back, "the follower's sequence numbers went back")
	missed, extra, twice := 0, 0, 0
	for id := range stored {
		if follower.ids[id] == 0 {
			missed++
		}
	}
	for id, n := range follower.ids {
		if stored[id] == 0 {
			extra++
		}
		if n > 1 {
			twice++
		}
	}
	assert.Zero(t, missed, "stored events the follower never read")
	assert.Zero(t, extra, "events the follower read that the store does not hold")
	assert.Zero(t, twice, "events the follower read twice")
}
