package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
)

// startPgBouncer runs Debian's pgbouncer in front of the cluster at
// port, in pool mode mode, with the given ignore_startup_parameters, and
// returns the port it listens on. It is stopped when the test ends.
func startPgBouncer(t *testing.T, port int, mode, ignore string) int {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		unavailable(t, "pgbouncer is not installed (Debian's pgbouncer package; .ci/run installs it)")
	}
	dir, err := os.MkdirTemp("", "eventstore-pgbouncer") // t.TempDir's parent is closed to the postgres user
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777))
	listen := freePort(t)
	// Session mode gives each client connection a server session of its
	// own (a server's pool and its LISTEN connection need a dozen);
	// transaction mode shares a few, so that round trips of one client
	// land on different ones.
	poolSize := 20
	if mode == "transaction" {
		poolSize = 3
	}
	users := filepath.Join(dir, "userlist.txt")
	require.NoError(t, os.WriteFile(users, []byte(`"postgres" ""`+"\n"), 0o644))
	conf := fmt.Sprintf(`[databases]
* = host=127.0.0.1 port=%d
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
max_client_conn = 200
default_pool_size = %d
logfile = %s
`, port, listen, users, mode, poolSize, filepath.Join(dir, "pgbouncer.log"))
	if ignore != "" {
		conf += "ignore_startup_parameters = " + ignore + "\n"
	}
	ini := filepath.Join(dir, "pgbouncer.ini")
	require.NoError(t, os.WriteFile(ini, []byte(conf), 0o644))
	args := []string{ini}
	if os.Geteuid() == 0 {
		args = []string{"-u", "postgres", ini} // it refuses to run as root
	}
	cmd := exec.Command(bin, args...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Logf("pgbouncer:\n%s%s", out, tail(string(b)))
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", listen))
		if err == nil {
			c.Close()
			return listen
		}
		select {
		case <-exited:
			t.Fatalf("pgbouncer exited: %s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer did not listen: %s", out)
		}
	}
}

// TestPgBouncerSessionMode: the server works through PgBouncer in session
// mode with the documented ignore_startup_parameters, and without them it
// stops at start with a message naming the setting.
func TestPgBouncerSessionMode(t *testing.T) {
	db := newCluster(t)
	port := startPgBouncer(t, db.port, "session", "extra_float_digits,default_transaction_isolation")
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	s := startServer(t, url)
	s.mustDo("POST", "/projections/definitions", definition("totals", true), http.StatusOK)
	for range 10 {
		r := save(context.Background(), s)
		require.Equal(t, http.StatusOK, r.status)
	}
	n, _ := totals(t, s)
	assert.Equal(t, 20, n)
	s.mustDo("GET", "/readyz", nil, http.StatusOK)

	bare := startPgBouncer(t, db.port, "session", "")
	cmd := exec.Command(serverBinary(t), "-addr", "127.0.0.1:0", "-storage",
		fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", bare))
	cmd.Env = append(os.Environ(), "EVENTSTORE_ACCESS_KEY="+accessKey, "EVENTSTORE_SECRET_ACCESS_KEY="+secretKey)
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the server started through PgBouncer without ignore_startup_parameters:\n%s", out)
	assert.Contains(t, string(out), "ignore_startup_parameters")
}

// transactionPooled starts a cluster and PgBouncer in transaction mode
// before it, and returns the cluster, the URL through PgBouncer and a
// function that opens a Storage of schema through it (notifications
// through the direct ListenURL), closed when the test ends.
func transactionPooled(ctx context.Context, t *testing.T, schema string, writeTimeout time.Duration) (*cluster, string, func() storage.Storage) {
	db := newCluster(t)
	port := startPgBouncer(t, db.port, "transaction", "extra_float_digits,default_transaction_isolation")
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&default_query_exec_mode=exec", port)
	return db, url, func() storage.Storage {
		s, err := postgres.OpenURL(ctx, url, &postgres.Options{Schema: schema, ListenURL: db.url, WriteTimeout: writeTimeout})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
}

// TestPgBouncerTransactionMode: two Storages through PgBouncer in
// transaction mode (default_query_exec_mode=exec, notifications through a
// direct ListenURL; without it the pooler is refused). Groups of appends
// some of which the server refuses (a NUL byte) keep the others' results
// and both Storages go on appending; the watcher hears the other's
// appends. (The lock leak is TestPgBouncerTransactionModeLockLeak's.)
func TestPgBouncerTransactionMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, url, open := transactionPooled(ctx, t, "bouncer", 10*time.Second)
	// Without ListenURL the transaction pooler is detected and refused.
	_, err := postgres.OpenURL(ctx, url, &postgres.Options{Schema: "bouncer"})
	require.ErrorIs(t, err, storage.ErrInvalid)
	assert.Contains(t, err.Error(), "ListenURL")
	a, b := open(), open()
	notes := make(chan struct{}, 1)
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		_ = b.(storage.AppendWatcher).WatchAppends(wctx, func() {
			select {
			case notes <- struct{}{}:
			default:
			}
		})
	}()
	select {
	case <-notes: // listening
	case <-time.After(20 * time.Second):
		t.Fatal("WatchAppends did not start")
	}
	ev := func(typ string) storage.Event {
		return storage.Event{ID: uuid.NewString(), Type: typ, Data: []byte(`{}`), RecordedAt: time.Now().UTC()}
	}
	// Readers keep the pooler's few server sessions busy, so that a's
	// round trips land on different ones.
	var readers sync.WaitGroup
	rctx, stopReaders := context.WithCancel(ctx)
	for range 4 {
		readers.Go(func() {
			for rctx.Err() == nil {
				_, _ = b.FeedHead(rctx, "")
			}
		})
	}
	// Rounds of concurrent appends through a, some refused by the server
	// (a NUL byte): each refused group rolls back after the lock.
	for round := range 20 {
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				typ := "Good"
				if i%4 == 0 {
					typ = "Bad\x00"
				}
				_, errs[i] = a.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: uuid.NewString(), Events: []storage.Event{ev(typ)}})
			})
		}
		wg.Wait()
		for i, err := range errs {
			if i%4 == 0 {
				assert.True(t, errors.Is(err, storage.ErrInvalid), "round %d, bad request %d: %v", round, i, err)
			} else {
				require.NoError(t, err, "round %d, request %d", round, i)
			}
		}
		// The other "process" still appends: no lock left behind.
		_, err := b.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: uuid.NewString(), Events: []storage.Event{ev("Good")}})
		require.NoError(t, err, "round %d: b's append after a's refused group", round)
	}
	stopReaders()
	readers.Wait()
	// Notifications come through the direct connection.
	for len(notes) > 0 {
		<-notes
	}
	time.Sleep(100 * time.Millisecond)
	for len(notes) > 0 {
		<-notes
	}
	_, err = a.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: uuid.NewString(), Events: []storage.Event{ev("Good")}})
	require.NoError(t, err)
	select {
	case <-notes:
	case <-time.After(5 * time.Second):
		t.Fatal("no notification of a's append through the ListenURL connection")
	}
	page, err := b.ReadFeed(ctx, storage.FeedQuery{Limit: 1000})
	require.NoError(t, err)
	assert.Equal(t, 20*6+20+1, len(page.Events), "every acknowledged append is in the feed once")
}

// TestPgBouncerTransactionModeServer: the server through PgBouncer in
// transaction mode stops at start with a message saying what to change
// (the flag for a direct notification URL; the exec mode when the URL
// leaves pgx's prepared statements on), and with -postgres-listen-url two
// servers work: saves, projections, and a long poll on one server woken
// by the other's saves through the direct connection (through the pooler
// LISTEN is dead and the wake-up would wait for the 30 s safety poll).
func TestPgBouncerTransactionModeServer(t *testing.T) {
	db := newCluster(t)
	port := startPgBouncer(t, db.port, "transaction", "extra_float_digits,default_transaction_isolation")
	bare := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	url := bare + "&default_query_exec_mode=exec"
	refused := func(storageURL string) string {
		cmd := exec.Command(serverBinary(t), "-addr", "127.0.0.1:0", "-storage", storageURL)
		cmd.Env = append(os.Environ(), "EVENTSTORE_ACCESS_KEY="+accessKey, "EVENTSTORE_SECRET_ACCESS_KEY="+secretKey)
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "the server started through PgBouncer in transaction mode without -postgres-listen-url:\n%s", out)
		return string(out)
	}
	out := refused(url)
	assert.Contains(t, out, "transaction mode")
	assert.Contains(t, out, "-postgres-listen-url")
	assert.NotContains(t, out, "default_query_exec_mode", "the URL sets it already")
	assert.Contains(t, refused(bare), "default_query_exec_mode=exec", "the URL leaves named prepared statements on")

	a := startServer(t, url, "-postgres-listen-url", db.url)
	b := startServer(t, url, "-postgres-listen-url", db.url)
	a.mustDo("POST", "/projections/definitions", definition("totals", true), http.StatusOK)
	for i := range 10 {
		r := save(context.Background(), []*server{a, b}[i%2])
		require.Equal(t, http.StatusOK, r.status)
	}
	for _, s := range []*server{a, b} {
		require.Eventually(t, func() bool { n, _ := totals(t, s); return n == 20 }, 30*time.Second, 100*time.Millisecond,
			"totals on %s", s.base)
	}
	_, cursor := follow(t, b, 0)
	time.Sleep(3 * time.Second) // b's waiters trust its watcher once it ran 2 s (watcherSettle)
	checkWokenBy(t, a, b, cursor, 3, "LISTEN through the pooler?")
	a.mustDo("GET", "/readyz", nil, http.StatusOK)
}

// TestPgBouncerTransactionModeLockLeak reproduces the lock leak of issue
// 32: through PgBouncer in transaction mode, an append that fails inside
// the statement that holds the session append lock (reserve; here the
// positions sequence is exhausted, so that nextval fails after
// pg_advisory_lock) must release the lock on the server session that
// holds it. Released in a round trip after the ROLLBACK's (the code
// before af57150), the pooler could hand that session to another client
// in between and run the unlock on another: the lock stayed held, and
// every append of every process reaching another server session waited
// for it until WriteTimeout, for good. (A refusal of a later statement of
// the append, as TestPgBouncerTransactionMode's NUL bytes, comes after
// reserve released the lock and never showed the leak.)
func TestPgBouncerTransactionModeLockLeak(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	db, _, open := transactionPooled(ctx, t, "leak", 5*time.Second)
	a, b := open(), open()
	admin, err := pgx.Connect(ctx, db.url)
	require.NoError(t, err)
	defer admin.Close(context.Background())
	appendOne := func(s storage.Storage) error {
		_, err := s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: uuid.NewString(),
			Events: []storage.Event{{ID: uuid.NewString(), Type: "Good", Data: []byte(`{}`), RecordedAt: time.Now().UTC()}}})
		return err
	}
	require.NoError(t, appendOne(a))
	// Readers keep the pooler's three server sessions busy, so that a
	// session freed by a ROLLBACK goes to a waiting client at once.
	var readers sync.WaitGroup
	rctx, stopReaders := context.WithCancel(ctx)
	defer func() { stopReaders(); readers.Wait() }()
	for range 4 {
		readers.Go(func() {
			for rctx.Err() == nil {
				_, _ = b.FeedHead(rctx, "")
			}
		})
	}
	acked := 1
	for cycle := range 5 {
		var last int64
		require.NoError(t, admin.QueryRow(ctx, `SELECT last_value FROM leak.positions`).Scan(&last))
		_, err := admin.Exec(ctx, `SELECT setval('leak.positions', 9223372036854775807)`)
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { errs[i] = appendOne([]storage.Storage{a, b}[i%2]) })
		}
		wg.Wait()
		for i, err := range errs {
			require.Error(t, err, "cycle %d: append %d with the sequence exhausted", cycle, i)
		}
		_, err = admin.Exec(ctx, `SELECT setval('leak.positions', $1)`, last)
		require.NoError(t, err)
		// Every append of both processes goes through, whatever server
		// session it reaches: no failed append left the lock behind.
		for i := range 6 {
			start := time.Now()
			err := appendOne([]storage.Storage{a, b}[i%2])
			require.NoError(t, err, "cycle %d, append %d after the sequence was restored (%v): the append lock was left held",
				cycle, i, time.Since(start).Round(time.Millisecond))
			acked++
		}
	}
	page, err := a.ReadFeed(ctx, storage.FeedQuery{Limit: 1000})
	require.NoError(t, err)
	assert.Equal(t, acked, len(page.Events), "every acknowledged append is in the feed once")
}
