package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pgNode is one server of a throwaway primary and standby pair on loopback
// (newPair): its own data directory, port and log, never the cluster on
// 5432.
type pgNode struct {
	t     testing.TB
	pgCtl string
	dir   string // holds data/, log and the socket
	port  int
	url   string
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newPair makes a primary and a streaming standby of it (async unless
// sync), started: initdb for the primary, pg_basebackup of the running
// primary for the standby.
// Both are stopped and removed when the test ends, also when it fails.
func newPair(t testing.TB, sync bool) (primary, standby *pgNode) {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	_, err := user.Lookup("postgres")
	if len(bins) == 0 || err != nil || os.Geteuid() != 0 {
		unavailable(t, "a throwaway PostgreSQL pair needs root, the postgres user and pg_ctl (Debian's postgresql package)")
	}
	pgUser, _ := user.Lookup("postgres")
	uid, _ := strconv.Atoi(pgUser.Uid)
	gid, _ := strconv.Atoi(pgUser.Gid)
	base, err := os.MkdirTemp("", "eventstore-ha")
	require.NoError(t, err)
	require.NoError(t, os.Chown(base, uid, gid))
	pgCtl := bins[len(bins)-1]
	mk := func(name string) *pgNode {
		n := &pgNode{t: t, pgCtl: pgCtl, dir: filepath.Join(base, name), port: freePort(t)}
		n.url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", n.port)
		runAsPostgres(t, "mkdir", "-p", n.dir)
		return n
	}
	primary, standby = mk("p"), mk("s")
	t.Cleanup(func() {
		for _, n := range []*pgNode{primary, standby} {
			n.thaw()
			_ = exec.Command("runuser", "-u", "postgres", "--", pgCtl, "-D", n.data(), "-m", "immediate", "-w", "stop").Run()
		}
		if t.Failed() {
			for _, n := range []*pgNode{primary, standby} {
				if b, err := os.ReadFile(filepath.Join(n.dir, "log")); err == nil {
					t.Logf("log of %s:\n%s", filepath.Base(n.dir), tail(string(b)))
				}
			}
		}
		os.RemoveAll(base)
	})
	runAsPostgres(t, filepath.Join(filepath.Dir(pgCtl), "initdb"), "-D", primary.data(), "-A", "trust", "-U", "postgres", "--no-sync")
	conf := "\nwal_level = replica\nhot_standby = on\nwal_keep_size = '64MB'\nfsync = off\n" +
		"listen_addresses = '127.0.0.1'\n"
	if sync {
		conf += "synchronous_standby_names = 's'\n"
	}
	appendFile(t, filepath.Join(primary.data(), "postgresql.conf"), conf)
	primary.start()
	// The standby from a base backup of the running primary, as an
	// operator makes one (initdb's trust lines admit replication from
	// 127.0.0.1); the configuration written here rather than by -R, for
	// its application_name.
	runAsPostgres(t, filepath.Join(filepath.Dir(pgCtl), "pg_basebackup"), "-D", standby.data(),
		"-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres", "-X", "stream", "--no-sync")
	appendFile(t, filepath.Join(standby.data(), "postgresql.conf"),
		// The standby, once promoted, has no standby of its own to wait for.
		fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=s'\n", primary.port)+
			"synchronous_standby_names = ''\n")
	runAsPostgres(t, "touch", filepath.Join(standby.data(), "standby.signal"))
	standby.start()
	return primary, standby
}

func runAsPostgres(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...).CombinedOutput()
	require.NoError(t, err, "%v: %s", args, out)
}

func appendFile(t testing.TB, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func (n *pgNode) data() string { return filepath.Join(n.dir, "data") }

func (n *pgNode) start() {
	n.t.Helper()
	runAsPostgres(n.t, n.pgCtl, "-D", n.data(), "-l", filepath.Join(n.dir, "log"), "-w", "-t", "120",
		"-o", fmt.Sprintf("-p %d -k %s", n.port, n.dir), "start")
}

func (n *pgNode) stop(mode string) {
	n.t.Helper()
	runAsPostgres(n.t, n.pgCtl, "-D", n.data(), "-m", mode, "-w", "-t", "120", "stop")
}

func (n *pgNode) promote() {
	n.t.Helper()
	runAsPostgres(n.t, n.pgCtl, "-D", n.data(), "-w", "-t", "120", "promote")
}

// pids returns the postmaster's process id and its children's.
func (n *pgNode) pids() []int {
	b, err := os.ReadFile(filepath.Join(n.data(), "postmaster.pid"))
	if err != nil {
		return nil
	}
	pm, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return nil
	}
	pids := []int{pm}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, st := range stats {
		b, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so split after ")".
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pm) {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(st))); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// freeze stops every process of the server (SIGSTOP), as a hung VM or a
// partition that drops packets looks to its clients: connections stay
// open and nothing answers.
func (n *pgNode) freeze() {
	for _, pid := range n.pids() {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
}

func (n *pgNode) thaw() {
	for _, pid := range n.pids() {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

func (n *pgNode) exec(sql string, args ...any) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, n.url)
	require.NoError(n.t, err)
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql, args...)
	require.NoError(n.t, err, sql)
}

// waitReplayed waits until standby has replayed everything primary wrote
// (its WAL write position).
func waitReplayed(t testing.TB, primary, standby *pgNode) {
	t.Helper()
	waitReplayedTo(t, primary, standby, "pg_current_wal_lsn()")
}

// waitReplayedTo waits until standby has replayed primary's WAL up to
// the position that lsnFunc, a function of primary's, gives now.
func waitReplayedTo(t testing.TB, primary, standby *pgNode, lsnFunc string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pc, err := pgx.Connect(ctx, primary.url)
	require.NoError(t, err)
	defer pc.Close(ctx)
	var lsn string
	require.NoError(t, pc.QueryRow(ctx, "SELECT "+lsnFunc+"::text").Scan(&lsn))
	sc, err := pgx.Connect(ctx, standby.url)
	require.NoError(t, err)
	defer sc.Close(ctx)
	for {
		var done bool
		require.NoError(t, sc.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done))
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the standby did not replay up to %s", lsn)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// multiHost is the connection string an operator gives every server
// process: both hosts, and the one that accepts writes is used.
func multiHost(nodes ...*pgNode) string {
	hosts := make([]string, len(nodes))
	for i, n := range nodes {
		hosts[i] = fmt.Sprintf("127.0.0.1:%d", n.port)
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}

// saved is one save the clients of a failover test made.
type saved struct {
	batch    *batch
	status   int
	position int64 // of the batch's last event, when acknowledged
}

// save saves one batch of two deposits to a fresh account through s.
func save(ctx context.Context, s *server) saved {
	b := &batch{agg: "acct-" + uuid.NewString()[:8], ids: []string{uuid.NewString(), uuid.NewString()}, cents: []int64{100, 5}}
	status, body, err := s.do(ctx, "POST", "/aggregates/account/"+b.agg+"/events", saveBody(b))
	if err != nil {
		return saved{batch: b}
	}
	_ = body
	out := saved{batch: b, status: status}
	if status == http.StatusOK {
		// A save answers 200 without a body: its position is in the load.
		b.acked = true
		status, body, err := s.do(ctx, "GET", "/aggregates/account/"+b.agg, nil)
		var a struct {
			Events []struct {
				Position int64 `json:"position"`
			} `json:"events"`
		}
		if err == nil && status == http.StatusOK && json.Unmarshal(body, &a) == nil && len(a.Events) > 0 {
			out.position = a.Events[len(a.Events)-1].Position
		}
	}
	return out
}

// saveUntilOK saves through s until one is acknowledged and returns it
// with the time it took.
func saveUntilOK(t *testing.T, s *server, within time.Duration) (saved, time.Duration) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < within {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r := save(ctx, s)
		cancel()
		if r.status == http.StatusOK {
			return r, time.Since(start)
		}
		if r.status != 0 && r.status != http.StatusServiceUnavailable {
			t.Fatalf("a save answered %d during the failover, want 200 or 503", r.status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no save was acknowledged within %v\nserver log:\n%s", within, tail(s.logs.String()))
	return saved{}, 0
}

type feedPage struct {
	Entries []struct {
		SequenceNumber int64 `json:"sequenceNumber"`
		Events         []struct {
			EventID string `json:"eventId"`
		} `json:"events"`
	} `json:"entries"`
	HasMore bool  `json:"hasMore"`
	Current int64 `json:"currentSequenceNumber"`
}

// follow reads the feed of all types through s after cursor up to its end
// and returns the event ids read and the cursor to go on from.
func follow(t *testing.T, s *server, cursor int64) (ids map[string]bool, next int64) {
	t.Helper()
	ids = map[string]bool{}
	for {
		body := s.mustDo("GET", fmt.Sprintf("/feeds/_all?since=%d&limit=500", cursor), nil, http.StatusOK)
		var p feedPage
		require.NoError(t, json.Unmarshal(body, &p))
		for _, e := range p.Entries {
			require.Greater(t, e.SequenceNumber, cursor, "the feed went back")
			cursor = e.SequenceNumber
			for _, ev := range e.Events {
				ids[ev.EventID] = true
			}
		}
		if !p.HasMore || len(p.Entries) == 0 {
			return ids, cursor
		}
	}
}

// checkWokenBy checks, rounds times, that a long poll on b's feed of all
// types after cursor (b's head) answers within 5 s of a save through a:
// b is woken by a's saves through its notification connection, not by the
// 30 s safety poll. why says what to suspect when it is not.
func checkWokenBy(t *testing.T, a, b *server, cursor int64, rounds int, why string) {
	t.Helper()
	for round := range rounds {
		type answer struct {
			page feedPage
			err  error
			at   time.Time
		}
		got := make(chan answer, 1)
		go func() {
			status, body, err := b.do(context.Background(), "GET", fmt.Sprintf("/feeds/_all?since=%d&waitTime=20000", cursor), nil)
			ans := answer{err: err, at: time.Now()}
			if err == nil && status != http.StatusOK {
				ans.err = fmt.Errorf("status %d: %s", status, body)
			}
			if ans.err == nil {
				ans.err = json.Unmarshal(body, &ans.page)
			}
			got <- ans
		}()
		time.Sleep(100 * time.Millisecond) // b's long poll waits
		r := save(context.Background(), a)
		require.Equal(t, http.StatusOK, r.status)
		acked := time.Now()
		ans := <-got
		require.NoError(t, ans.err)
		require.NotEmpty(t, ans.page.Entries, "round %d: b's long poll returned nothing", round)
		took := max(0, ans.at.Sub(acked))
		t.Logf("round %d: b's long poll answered %v after a's save", round, took)
		assert.Less(t, took, 5*time.Second, "round %d: b was not woken by a's save (%s)", round, why)
		cursor = ans.page.Entries[len(ans.page.Entries)-1].SequenceNumber
	}
}

// totals queries the aggregated projection "totals" through s and returns
// its count and how long the answer took.
func totals(t *testing.T, s *server) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	body := s.mustDo("GET", "/projections/aggregated/totals", nil, http.StatusOK)
	took := time.Since(start)
	var r projectionResult
	require.NoError(t, json.Unmarshal(body, &r))
	n, _ := strconv.Atoi(r.Data["count"])
	return n, took
}
