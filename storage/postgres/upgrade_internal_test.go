package postgres

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/upgrade"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The environment of an upgrade worker (TestUpgradeWorker).
const (
	upgradeSchemaEnv = "EVENTSTORE_TEST_UPGRADE_SCHEMA"
	upgradeRoleEnv   = "EVENTSTORE_TEST_UPGRADE_ROLE"
)

// upgradeLists are the migrations of the programs of the rolling upgrade:
// "old" is this package, "new" a next version with an expand migration,
// "contract" the version after it, with a contract migration.
func upgradeLists() map[string][]migration {
	expand := withMigration(upgrade.Expand, `CREATE TABLE {{schema}}.upgrade_expand (x int);`)
	contract := append(expand[:len(expand):len(expand)], migration{upgrade.Contract, `CREATE TABLE {{schema}}.upgrade_contract (x int);`})
	return map[string][]migration{"old": migrations, "new": expand, "contract": contract}
}

// upgradeReaction is the reaction every worker runs: one per Placed event.
var upgradeReaction = reactions.Definition{Name: "record", FeedName: "order", ReactOnEventType: "Placed",
	Action: reactions.Action{Type: reactions.ActionFunc, Function: "record"}}

// TestUpgradeWorker is not a test of its own: run by TestRollingUpgrade in a
// process of its own with the variables above set, it opens the schema as
// the program of its role (a "new" one with NoMigrate, as a server started
// with -no-migrate), runs a Store and a reactions Engine on it and saves
// Placed events on aggregates of its own until its stdin closes, printing
// "ready", "ack EVENT_ID" for every acknowledged save and "delivered
// EVENT_ID" for every delivery of the reaction it runs. SIGTERM closes it
// cleanly.
func TestUpgradeWorker(t *testing.T) {
	schema := os.Getenv(upgradeSchemaEnv)
	if schema == "" {
		t.Skip("run by TestRollingUpgrade")
	}
	role := os.Getenv(upgradeRoleEnv)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	var outMu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	pool := newTestPool(t)
	s, err := open(context.Background(), pool, &Options{Schema: schema, NoMigrate: role != "old", testMigrations: upgradeLists()[role]})
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventstore.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rx, err := reactions.New(st, s, &reactions.Options{PollInterval: 50 * time.Millisecond, Funcs: map[string]reactions.Func{
		"record": func(_ context.Context, d reactions.Delivery) error {
			say("delivered %s", d.Reaction.EventID)
			return nil
		}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rx.Put(context.Background(), upgradeReaction); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = rx.Run(ctx) })
	saving, stopSaving := context.WithCancel(ctx)
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); stopSaving() }()
	say("ready")
	name := uuid.NewString()[:8]
	for i := 0; saving.Err() == nil; i++ {
		id := uuid.NewString()
		events := []eventstore.NewEvent{{ID: id, Type: "Placed", Data: []byte(`{}`)}}
		// A save that failed may have been stored: retry it with the same
		// event id until it is acknowledged.
		for attempt := 0; ; attempt++ {
			_, err := st.Save(context.Background(), "order", fmt.Sprintf("%s-%d", name, i%20), events, nil)
			if err == nil {
				break
			}
			if attempt == 20 {
				t.Fatalf("save %s: %v", id, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		say("ack %s", id)
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
}

// upgradeWorker is a worker process of TestRollingUpgrade.
type upgradeWorker struct {
	role  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	ready chan struct{}
	done  chan struct{} // its output read to the end
	logs  strings.Builder
}

// upgradeLog gathers what the workers printed.
type upgradeLog struct {
	mu        sync.Mutex
	acked     map[string]int
	delivered map[string]int
}

func startUpgradeWorker(t *testing.T, schema, role string, log *upgradeLog) *upgradeWorker {
	t.Helper()
	w := &upgradeWorker{role: role, ready: make(chan struct{}), done: make(chan struct{})}
	w.cmd = exec.Command(os.Args[0], "-test.run", "^TestUpgradeWorker$", "-test.timeout", "10m")
	w.cmd.Env = append(os.Environ(), upgradeSchemaEnv+"="+schema, upgradeRoleEnv+"="+role)
	w.cmd.Stderr = &w.logs
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if w.cmd.ProcessState == nil {
			_ = w.cmd.Process.Kill()
			_ = w.cmd.Wait()
		}
	})
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if line == "ready" {
				close(w.ready)
				continue
			}
			log.mu.Lock()
			if id, ok := strings.CutPrefix(line, "ack "); ok {
				log.acked[id]++
			} else if id, ok := strings.CutPrefix(line, "delivered "); ok {
				log.delivered[id]++
			}
			log.mu.Unlock()
		}
	}()
	select {
	case <-w.ready:
	case <-w.done:
		_ = w.cmd.Wait()
		t.Fatalf("%s worker exited before it was ready: %s", role, w.logs.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s worker not ready within 2 minutes: %s", role, w.logs.String())
	}
	return w
}

// stop ends w with SIGTERM, as a rolling restart does, and waits for it.
func (w *upgradeWorker) stop(t *testing.T) {
	t.Helper()
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	<-w.done
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("%s worker pid %d: %v\n%s", w.role, w.cmd.Process.Pid, err, w.logs.String())
	}
}

// TestRollingUpgrade runs a rolling restart with real OS processes on one
// schema: two processes of this package's version ("old") save and deliver
// reactions; the deploy step migrates the schema to the next version (an
// expand migration) beside them, while the version after it (a contract
// migration) refuses, naming both; then each old process is replaced by
// one of the new version (started with NoMigrate), one at a time, under
// load. Every acknowledged event must be in the feed exactly once, nothing
// unacknowledged in it, and every one's reaction delivered.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	base, _ := openBatchTestSchema(t)
	schema := "es_upgrade_" + uuid.NewString()[:8]
	quoted := pgx.Identifier{schema}.Sanitize()
	t.Cleanup(func() { _, _ = base.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+quoted+" CASCADE") })
	ctx := context.Background()
	lists := upgradeLists()
	if _, _, err := Migrate(ctx, base.pool, &Options{Schema: schema}); err != nil {
		t.Fatal(err)
	}
	log := &upgradeLog{acked: map[string]int{}, delivered: map[string]int{}}
	began := time.Now()
	phase := func(what string) { t.Logf("%5.1fs %s", time.Since(began).Seconds(), what) }
	acked := func() int {
		log.mu.Lock()
		defer log.mu.Unlock()
		return len(log.acked)
	}
	// load waits until the workers have acknowledged n more saves.
	load := func(n int) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for start := acked(); acked() < start+n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d saves acknowledged in 2 minutes", n)
			}
		}
	}
	old := []*upgradeWorker{startUpgradeWorker(t, schema, "old", log), startUpgradeWorker(t, schema, "old", log)}
	phase("two old processes ready")
	load(50)
	phase("50 saves")

	// The deploy step: the expand migration runs beside the old processes.
	from, to, err := Migrate(ctx, base.pool, &Options{Schema: schema, testMigrations: lists["new"]})
	if err != nil || from != len(migrations) || to != len(migrations)+1 {
		t.Fatalf("expand migration beside the old processes = %d→%d, %v", from, to, err)
	}
	// A contract migration refuses while they live, naming them.
	_, _, err = Migrate(ctx, base.pool, &Options{Schema: schema, testMigrations: lists["contract"]})
	if !errors.Is(err, storage.ErrSchemaVersion) {
		t.Fatalf("contract migration beside the old processes = %v, want ErrSchemaVersion", err)
	}
	for _, w := range old {
		if want := fmt.Sprintf("pid %d (schema version %d", w.cmd.Process.Pid, len(migrations)); !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %q", err, want)
		}
	}
	t.Logf("refused: %v", err)
	load(50)

	// The rolling restart, under load.
	var running []*upgradeWorker
	for _, w := range old {
		running = append(running, startUpgradeWorker(t, schema, "new", log))
		phase("a new process ready")
		load(30)
		w.stop(t)
		phase("an old process stopped")
		load(30)
	}
	phase("rolled")
	// The load ends; every reaction must then be delivered.
	for _, w := range running {
		_ = w.stdin.Close()
	}
	time.Sleep(200 * time.Millisecond) // a save in flight is acknowledged
	deadline := time.Now().Add(2 * time.Minute)
	for {
		log.mu.Lock()
		var missing []string
		for id := range log.acked {
			if log.delivered[id] == 0 {
				missing = append(missing, id)
			}
		}
		log.mu.Unlock()
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged events have no delivered reaction after 2 minutes, e.g. %s", len(missing), acked(), missing[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	phase("every reaction delivered")
	for _, w := range running {
		w.stop(t)
	}
	phase("stopped")

	s, err := open(ctx, base.pool, &Options{Schema: schema, testMigrations: lists["new"], NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seen := map[string]int{}
	for after := int64(0); ; {
		page, err := s.ReadFeed(ctx, storage.FeedQuery{After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Events {
			seen[e.ID]++
		}
		if len(page.Events) == 0 {
			break
		}
		after = page.Events[len(page.Events)-1].Position
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for id, n := range log.acked {
		if n != 1 || seen[id] != 1 {
			t.Errorf("event %s: acknowledged %d times, in the feed %d times; want 1 and 1", id, n, seen[id])
		}
	}
	for id := range seen {
		if log.acked[id] == 0 {
			t.Errorf("event %s is in the feed but was never acknowledged", id)
		}
	}
	duplicates := 0
	for _, n := range log.delivered {
		duplicates += n - 1
	}
	t.Logf("%d events saved by 4 processes across the restart, every reaction delivered (%d deliveries repeated)", len(log.acked), duplicates)
}
