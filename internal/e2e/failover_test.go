package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFailoverLossyAsync is the failover that asynchronous replication
// makes lossy: the standby stops receiving (here: it is stopped), the
// primary acknowledges more saves, then dies, and the standby is promoted
// without them. Two server processes on a multi-host URL and a feed
// follower go on: the first save after the promotion must not take a
// position that was handed out before (the positions sequence went back
// with the lost tail), the follower resuming from its cursor must get
// every save made after the failover, and the projection queries of both
// processes must answer within their usual time and converge on what the
// store holds.
func TestFailoverLossyAsync(t *testing.T) {
	primary, standby := newPair(t, false)
	url := multiHost(primary, standby)
	a, b := startServer(t, url), startServer(t, url)
	a.mustDo("POST", "/projections/definitions", definition("totals", true), http.StatusOK)
	servers := []*server{a, b}
	ready := []*readyWatch{watchReady(t, a), watchReady(t, b)}
	var kept []saved
	for i := range 40 {
		r := save(context.Background(), servers[i%2])
		require.Equal(t, http.StatusOK, r.status)
		kept = append(kept, r)
	}
	waitReplayed(t, primary, standby)
	cutOff := time.Now()
	standby.stop("fast")
	var lost []saved
	for i := range 30 {
		r := save(context.Background(), servers[i%2])
		require.Equal(t, http.StatusOK, r.status)
		lost = append(lost, r)
	}
	// The follower has read everything, lost saves included.
	_, cursor := follow(t, b, 0)
	require.Equal(t, lost[len(lost)-1].position, cursor, "the follower's cursor is the last save's position")
	n, _ := totals(t, b) // b saved last: its query covers every save
	require.Equal(t, 140, n, "both phases applied before the failover")

	crashed := time.Now() // pg_ctl stop -m immediate returns once the server is gone
	primary.stop("immediate")
	standby.start()
	standby.promote()
	promoted := time.Now()
	first, took := saveUntilOK(t, a, 60*time.Second)
	t.Logf("server a: first acknowledged save %v after the promotion (position %d; the feed was at %d)", took, first.position, cursor)
	assert.Greater(t, first.position, cursor, "the first save after the failover took a position already handed out")
	firstB, _ := saveUntilOK(t, b, 60*time.Second)
	t.Logf("server b: first acknowledged save %v after the promotion (position %d)", time.Since(promoted), firstB.position)
	assert.Greater(t, firstB.position, cursor, "b's first save after the failover took a position already handed out")
	for i, w := range ready {
		t.Logf("server %c readiness: %s (the primary crashed %.2fs after the standby was cut off, promoted %.2fs after the crash)",
			'a'+i, w.report(moment{"cut-off", cutOff}, moment{"crash", crashed}, moment{"promotion", promoted}),
			crashed.Sub(cutOff).Seconds(), promoted.Sub(crashed).Seconds())
	}
	after := []saved{first, firstB}
	for i := range 20 {
		r, _ := saveUntilOK(t, servers[i%2], 30*time.Second)
		after = append(after, r)
	}
	t.Logf("22 saves acknowledged %v after the promotion", time.Since(promoted))
	// The follower goes on from its cursor: every save after the failover,
	// none skipped.
	ids, _ := follow(t, b, cursor)
	for _, r := range after {
		for _, id := range r.batch.ids {
			assert.True(t, ids[id], "the follower skipped event %s saved after the failover", id)
		}
	}
	// Both processes answer at once and converge on the store: the kept
	// phase and the saves after the failover, not the lost ones.
	want := 2 * (len(kept) + len(after))
	for _, s := range servers {
		deadline := time.Now().Add(20 * time.Second)
		for {
			n, took := totals(t, s)
			assert.Less(t, took, 2*time.Second, "a projection query after the failover")
			if n == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("totals count = %d 20 s after the failover, want %d\nserver log:\n%s", n, want, tail(s.logs.String()))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// A process that found the store behind what it had seen logged it
	// with the figures and counted it. At least one did: the first save
	// after the failover finds the positions sequence behind; a process
	// whose first contact with the new primary came after that save sees
	// numbers past what it had seen and has nothing to reset. (The
	// projection's stored checkpoint went back with the lost commits, so
	// no stored projection is rebuilt here; the counts above show that no
	// process kept what it had applied of the lost saves.)
	var rewinds float64
	for i, s := range servers {
		n := rewindsCounted(t, s)
		rewinds += n
		assert.Equal(t, n > 0, strings.Contains(s.logs.String(), "the storage went back"),
			"server %c: eventstore_rewinds_total %v, and the rewind logged or not", 'a'+i, n)
	}
	assert.GreaterOrEqual(t, rewinds, 1.0, "no process counted the rewind in eventstore_rewinds_total")
}

// rewindsCounted returns the server's eventstore_rewinds_total.
func rewindsCounted(t *testing.T, s *server) float64 {
	t.Helper()
	body := string(s.mustDo("GET", "/metrics", nil, http.StatusOK))
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "eventstore_rewinds_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			require.NoError(t, err, "eventstore_rewinds_total %q", v)
			return f
		}
	}
	t.Fatalf("no eventstore_rewinds_total in /metrics:\n%s", body)
	return 0
}

// TestStandbyOnlyRefusedClearly: a server pointed at a standby alone (no
// primary in its URL) does not start, and says what to change.
func TestStandbyOnlyRefusedClearly(t *testing.T) {
	_, standby := newPair(t, false)
	cmd := exec.Command(serverBinary(t), "-addr", "127.0.0.1:0", "-storage", standby.url)
	cmd.Env = append(os.Environ(), "EVENTSTORE_ACCESS_KEY="+accessKey, "EVENTSTORE_SECRET_ACCESS_KEY="+secretKey)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the server started on a standby:\n%s", out)
	assert.Contains(t, string(out), "read-only standby")
	assert.Contains(t, string(out), "target_session_attrs=read-write")
}

// TestSynchronousCancelledWaitNotAcknowledged: with synchronous
// replication and the standby gone, saves wait (correct) and /readyz says
// not ready within a second; an operator who cancels the waiting commits
// (pg_cancel_backend) gets 503s from the savers, not 200s: those saves
// are committed on the primary alone, an unknown outcome to retry.
func TestSynchronousCancelledWaitNotAcknowledged(t *testing.T) {
	primary, standby := newPair(t, true)
	s := startServer(t, primary.url)
	waitReady(t, s)
	r := save(context.Background(), s)
	require.Equal(t, http.StatusOK, r.status, "a save with the synchronous standby up")
	ready := watchReady(t, s)
	cutOff := time.Now()
	standby.stop("fast")

	start := time.Now()
	status, _, err := s.do(context.Background(), "GET", "/readyz", nil)
	require.NoError(t, err)
	readyTook := time.Since(start)
	assert.Equal(t, http.StatusServiceUnavailable, status, "/readyz while commits wait for the standby")
	assert.Less(t, readyTook, 2*time.Second, "/readyz must answer within about a second (900 ms on the server)")
	t.Logf("/readyz answered %d in %v with the synchronous standby gone", status, readyTook)

	var wg sync.WaitGroup
	results := make([]saved, 4)
	for i := range results {
		wg.Go(func() { results[i] = save(context.Background(), s) })
	}
	// Wait until the saves' commits wait for the standby, then cancel them.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, primary.url)
	require.NoError(t, err)
	defer c.Close(ctx)
	for {
		var waiting int
		require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`).Scan(&waiting))
		if waiting > 0 {
			break
		}
		require.NoError(t, ctx.Err(), "no commit waits for the synchronous standby")
		time.Sleep(20 * time.Millisecond)
	}
	// Cancel every wait, the later groups' too, until every save answered.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for cancelled := false; !cancelled; {
		_, err = c.Exec(ctx, `SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'`)
		require.NoError(t, err)
		select {
		case <-done:
			cancelled = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	for i, r := range results {
		if r.status == http.StatusOK {
			// Only a save whose commit never waited may say so: none
			// can, with the standby gone.
			t.Errorf("save %d acknowledged (200) though its commit's wait for the standby was cancelled", i)
		}
	}
	assert.Contains(t, s.logs.String(), "synchronous standbys", "the log says why")

	// The standby back: ready again, and saves acknowledged.
	standby.start()
	back := time.Now()
	again, took := saveUntilOK(t, s, 60*time.Second)
	assert.Equal(t, http.StatusOK, again.status)
	readyAt, ok := time.Time{}, false
	for deadline := time.Now().Add(30 * time.Second); !ok && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		readyAt, ok = ready.firstAfter(back, http.StatusOK)
	}
	require.True(t, ok, "/readyz did not answer 200 within 30 s of the standby's return")
	t.Logf("synchronous standby back: first acknowledged save %v after it started, /readyz 200 %.2fs after; readiness: %s",
		took, readyAt.Sub(back).Seconds(), ready.report(moment{"cut-off", cutOff}, moment{"standby back", back}))
}

// readyStatus returns the status of GET /readyz through s, 0 when it did
// not answer within 3 s.
func readyStatus(s *server) int {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", s.base+"/readyz", nil)
	if err != nil {
		return 0
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitReady waits until /readyz answers 200: its write probe has 900 ms,
// which a commit waiting for a synchronous standby can pass on a loaded
// machine (one CI run saw the first probe answer 503 at load average 50).
func waitReady(t *testing.T, s *server) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for readyStatus(s) != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer 200 within a minute\nserver log:\n%s", s.logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// probeClient asks /readyz on connections of its own, as a load
// balancer's health check does, not behind the savers'.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// TestFailoverFrozenPrimary freezes the primary (SIGSTOP of all its
// processes: a hung VM, a partition that drops packets, so that nothing
// answers and no connection is reset) under a server on a multi-host URL,
// then promotes the standby 3 s later. /readyz must turn 503 while the
// primary is frozen, and saves must be acknowledged again within seconds of
// the promotion, with the server's defaults (no connect_timeout or
// keepalive settings in the URL). A second server process, idle through
// it, must be woken by the first one's saves afterwards (its notification
// connection moved off the frozen primary), not by the 30 s safety poll.
func TestFailoverFrozenPrimary(t *testing.T) {
	primary, standby := newPair(t, false)
	s := startServer(t, multiHost(primary, standby))
	// A second process, idle through the failover: its notification
	// connection, on the frozen primary, must find it hung and move to the
	// new one by itself.
	other := startServer(t, multiHost(primary, standby))
	s.mustDo("POST", "/projections/definitions", definition("totals", true), http.StatusOK)
	for range 20 {
		r := save(context.Background(), s)
		require.Equal(t, http.StatusOK, r.status)
	}
	waitReplayed(t, primary, standby)
	require.Equal(t, http.StatusOK, readyStatus(s))
	readyW := watchReady(t, s)

	// Savers keep saving through the failover.
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	var acked []time.Time
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				sctx, cancel := context.WithTimeout(ctx, 8*time.Second)
				r := save(sctx, s)
				cancel()
				if r.status == http.StatusOK {
					mu.Lock()
					acked = append(acked, time.Now())
					mu.Unlock()
				} else {
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	defer func() { stop(); wg.Wait() }()

	primary.freeze()
	frozen := time.Now()
	var notReady, slowest time.Duration
	for time.Since(frozen) < 3*time.Second {
		asked := time.Now()
		status := readyStatus(s)
		slowest = max(slowest, time.Since(asked))
		if status != http.StatusOK && notReady == 0 {
			notReady = time.Since(frozen)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the slowest /readyz answer with the primary frozen took %v", slowest)
	// The server bounds /readyz at 900 ms; the rest is this loaded
	// machine's scheduling of the client and the server.
	assert.Less(t, slowest, 2*time.Second, "/readyz must answer within about a second")
	standby.promote()
	promoted := time.Now()
	t.Logf("primary frozen; /readyz not ready after %v; standby promoted %v after the freeze", notReady, promoted.Sub(frozen))
	assert.NotZero(t, notReady, "/readyz stayed 200 for 3 s with the primary frozen")

	var firstSave, ready time.Duration
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && (firstSave == 0 || ready == 0); time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		for _, at := range acked {
			if at.After(promoted) && firstSave == 0 {
				firstSave = at.Sub(promoted)
			}
		}
		mu.Unlock()
		if ready == 0 && readyStatus(s) == http.StatusOK {
			ready = time.Since(promoted)
		}
	}
	t.Logf("after the promotion: first acknowledged save %v, /readyz 200 again %v; readiness (polled every 100 ms): %s",
		firstSave, ready, readyW.report(moment{"freeze", frozen}, moment{"promotion", promoted}))
	require.NotZero(t, firstSave, "no save acknowledged within 30 s of the promotion\nserver log:\n%s", tail(s.logs.String()))
	// The issue asks for 5 s; the bound leaves room for a loaded CI machine.
	assert.Less(t, firstSave, 10*time.Second, "saves came back too late after the promotion")
	assert.NotZero(t, ready, "/readyz did not come back")
	assert.Contains(t, s.logs.String(), "the server did not answer", "the notification connection noticed the frozen primary")

	// The idle process is woken by the first one's saves again: a long
	// poll on it answers within seconds of a save, not at the 30 s
	// safety poll. Its waiters trust a new notification connection once
	// it has run 2 s.
	stop()
	wg.Wait()
	require.Eventually(t, func() bool {
		return strings.Contains(other.logs.String(), "the server did not answer")
	}, 30*time.Second, 100*time.Millisecond, "the idle process's notification connection did not notice the frozen primary\nits log:\n%s", tail(other.logs.String()))
	_, cursor := follow(t, other, 0)
	time.Sleep(3 * time.Second)
	checkWokenBy(t, s, other, cursor, 3, "its notification connection still on the frozen primary?")
}
