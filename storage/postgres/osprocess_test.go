package postgres_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
)

// The environment variables that make this test binary a writer process of
// TestFeedAcrossOSProcesses (see TestOSProcessWriter).
const (
	writerSchemaEnv = "EVENTSTORE_TEST_WRITER_SCHEMA"
	writerNameEnv   = "EVENTSTORE_TEST_WRITER_NAME"
	writerForEnv    = "EVENTSTORE_TEST_WRITER_FOR"
	writerTenantEnv = "EVENTSTORE_TEST_WRITER_TENANT"
)

// TestOSProcessWriter is not a test of its own: run by
// TestFeedAcrossOSProcesses in a process of its own with the variables
// above set, it appends through its own Storage from four goroutines
// (single saves of 1-3 events, and AppendAll of two batches, of two
// aggregates or of one) for the
// time given, and prints a line "ack <event id> <type> <aggregate id>
// <version>" for every event of every acknowledged append.
func TestOSProcessWriter(t *testing.T) {
	schema := os.Getenv(writerSchemaEnv)
	if schema == "" {
		t.Skip("run by TestFeedAcrossOSProcesses")
	}
	name := os.Getenv(writerNameEnv)
	d, err := time.ParseDuration(os.Getenv(writerForEnv))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := postgres.OpenURL(ctx, databaseURL(), &postgres.Options{Schema: schema, Tenant: os.Getenv(writerTenantEnv)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var outMu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	ack := func(reqs []storage.AppendRequest, res []storage.AppendResult) {
		outMu.Lock()
		defer outMu.Unlock()
		for i, r := range reqs {
			for _, e := range r.Events {
				fmt.Fprintf(out, "ack %s %s %s %d\n", e.ID, r.AggregateType, r.AggregateID, res[i].Version)
			}
		}
		out.Flush()
	}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; time.Now().Before(end); i++ {
				typ := []string{"alpha", "beta"}[i%2]
				req := func(k int) storage.AppendRequest {
					events := make([]storage.Event, 1+(i+k)%3)
					for j := range events {
						events[j] = event("Happened", fmt.Sprintf(`{"i":%d}`, i))
					}
					// Aggregates shared by the goroutines of all writers, so
					// that appends of different processes contend.
					return storage.AppendRequest{AggregateType: typ, AggregateID: fmt.Sprintf("a%d", (g+i+k)%6), Events: events}
				}
				if i%5 == 4 {
					// Every third of them names one aggregate twice: the
					// repeat is stored after the first, in one call.
					reqs := []storage.AppendRequest{req(0), req(1)}
					if i%3 == 0 {
						reqs[1].AggregateID = reqs[0].AggregateID
					}
					res, err := s.AppendAll(ctx, reqs)
					if err != nil {
						fmt.Fprintf(os.Stderr, "%s: append all: %v\n", name, err)
						continue
					}
					ack(reqs, res)
					continue
				}
				r := req(0)
				res, err := s.Append(ctx, r)
				if err != nil {
					fmt.Fprintf(os.Stderr, "%s: append: %v\n", name, err)
					continue
				}
				ack([]storage.AppendRequest{r}, []storage.AppendResult{res})
			}
		})
	}
	wg.Wait()
}

// ackedEvent is an event a writer process acknowledged.
type ackedEvent struct {
	typ, id string
	version int64
	writer  int
}

// TestFeedAcrossOSProcesses starts three writer processes (this test binary
// running TestOSProcessWriter) appending to one schema, while followers in
// this process read the feed of all types and of one type, SIGKILLs one
// writer in the middle of the load, and holds a transaction with an id open
// on another connection for three seconds. Every acknowledged event must be
// seen exactly once by each follower (of its type), at strictly increasing
// positions, with each aggregate's versions in order; and the open
// transaction must not hold the followers back (the watermark is the
// store's own, not the server's).
func TestFeedAcrossOSProcesses(t *testing.T) {
	feedAcrossOSProcesses(t, []string{""})
}

// TestFeedAcrossOSProcessesTenants is TestFeedAcrossOSProcesses with the
// writers in two tenants of the schema (writers 0 and 2 in the first, 1 in
// the second) and the followers reading the first: they must see every
// event acknowledged in it, and none of the other's.
func TestFeedAcrossOSProcessesTenants(t *testing.T) {
	feedAcrossOSProcesses(t, []string{"5b1e0c2a-7d3f-4c1e-9a2b-1f2e3d4c5b6a", "6c2f1d3b-8e4a-4d2f-8b3c-2a3b4c5d6e7f"})
}

// feedAcrossOSProcesses runs TestFeedAcrossOSProcesses with writer w in
// tenants[w % len(tenants)] and the followers in tenants[0].
func feedAcrossOSProcesses(t *testing.T, tenants []string) {
	if testing.Short() {
		t.Skip("starts processes; -short")
	}
	schema := newSchema(t)
	testPool(t)
	s, err := postgres.OpenURL(context.Background(), databaseURL(), &postgres.Options{Schema: schema, Tenant: tenants[0]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() }) // opened before the writers start: creates the schema
	tenantOf := func(w int) string { return tenants[w%len(tenants)] }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	const writers = 3
	load := 6 * time.Second
	var ackMu sync.Mutex
	acked := make(map[string]ackedEvent)
	cmds := make([]*exec.Cmd, writers)
	var readersWG sync.WaitGroup
	for w := range writers {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestOSProcessWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), writerSchemaEnv+"="+schema, writerNameEnv+"="+fmt.Sprint("writer", w),
			writerForEnv+"="+load.String(), writerTenantEnv+"="+tenantOf(w))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[w] = cmd
		readersWG.Go(func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				f := strings.Fields(sc.Text())
				if len(f) != 5 || f[0] != "ack" {
					continue // a line cut by SIGKILL, or the test runner's
				}
				v, err := strconv.ParseInt(f[4], 10, 64)
				if err != nil {
					continue
				}
				ackMu.Lock()
				acked[f[1]] = ackedEvent{typ: f[2], id: f[3], version: v, writer: w}
				ackMu.Unlock()
			}
		})
	}

	// Followers: the feed of all types, and of type alpha.
	type follower struct {
		typ    string
		events []storage.Event
		err    error
		// during counts the events read while the transaction was open.
		during atomic.Int64
	}
	var openTx atomic.Bool
	followers := []*follower{{typ: ""}, {typ: "alpha"}}
	var writing atomic.Bool
	writing.Store(true)
	var fwg sync.WaitGroup
	for _, f := range followers {
		fwg.Go(func() {
			var after int64
			quiet := 0
			for {
				done := !writing.Load()
				page, err := s.ReadFeed(ctx, storage.FeedQuery{After: after, Limit: 50, AggregateType: f.typ})
				if err != nil {
					f.err = err
					return
				}
				for _, e := range page.Events {
					if e.Position <= after {
						f.err = fmt.Errorf("feed %q: position %d after %d", f.typ, e.Position, after)
						return
					}
					after = e.Position
				}
				if openTx.Load() {
					f.during.Add(int64(len(page.Events)))
				}
				f.events = append(f.events, page.Events...)
				if page.Head < after {
					f.err = fmt.Errorf("feed %q: head %d below the last event %d", f.typ, page.Head, after)
					return
				}
				after = page.Head
				if len(page.Events) == 0 {
					if done {
						// The writers are gone; a killed one's transaction
						// may still be ending: read until quiet for a while.
						if quiet++; quiet > 50 {
							return
						}
					}
					time.Sleep(2 * time.Millisecond)
				} else {
					quiet = 0
				}
			}
		})
	}

	// A transaction with an id, open for 3 s on another connection, in the
	// middle of the load; one writer SIGKILLed at 2 s.
	var txErr error
	var twg sync.WaitGroup
	twg.Go(func() {
		time.Sleep(time.Second)
		tx, err := testPool(t).Begin(ctx)
		if err != nil {
			txErr = err
			return
		}
		defer tx.Rollback(context.Background())
		if _, err := tx.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
			txErr = err
			return
		}
		openTx.Store(true)
		time.Sleep(3 * time.Second)
		openTx.Store(false)
	})
	time.Sleep(2 * time.Second)
	if err := cmds[0].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for w, cmd := range cmds {
		err := cmd.Wait()
		var exit *exec.ExitError
		switch {
		case w == 0 && errors.As(err, &exit):
		case err != nil:
			t.Errorf("writer %d: %v", w, err)
		}
	}
	readersWG.Wait()
	twg.Wait()
	writing.Store(false)
	fwg.Wait()
	if txErr != nil {
		t.Fatal(txErr)
	}

	if len(acked) < 100 {
		t.Errorf("only %d events acknowledged by the writers", len(acked))
	}
	for _, f := range followers {
		if f.err != nil {
			t.Fatal(f.err)
		}
		if f.during.Load() == 0 {
			t.Errorf("feed %q: no event read while another connection's transaction was open: readers must not wait for transactions other than the store's appends", f.typ)
		}
		seen := make(map[string]int, len(f.events))
		versions := make(map[string]int64) // type/id -> last version seen
		seqs := make(map[string]int64)     // type -> last FeedSequence seen
		for _, e := range f.events {
			seen[e.ID]++
			if seen[e.ID] == 2 {
				t.Errorf("feed %q: event %s seen twice", f.typ, e.ID)
			}
			if f.typ != "" && e.AggregateType != f.typ {
				t.Errorf("feed %q: event of type %s", f.typ, e.AggregateType)
			}
			key := e.AggregateType + "/" + e.AggregateID
			if e.Version < versions[key] {
				t.Errorf("feed %q: %s version %d after version %d", f.typ, key, e.Version, versions[key])
			}
			versions[key] = e.Version
			if e.FeedSequence < seqs[e.AggregateType] {
				t.Errorf("feed %q: FeedSequence %d of %s after %d", f.typ, e.FeedSequence, e.AggregateType, seqs[e.AggregateType])
			}
			seqs[e.AggregateType] = e.FeedSequence
			if a, ok := acked[e.ID]; !ok {
				// Only the killed writer may have committed an append it
				// never acknowledged.
				continue
			} else if tenantOf(a.writer) != tenants[0] {
				t.Errorf("feed %q: event %s of writer %d, of another tenant", f.typ, e.ID, a.writer)
			} else if a.typ != e.AggregateType || a.id != e.AggregateID || a.version != e.Version {
				t.Errorf("feed %q: event %s is %s/%s version %d, acknowledged as %s/%s version %d",
					f.typ, e.ID, e.AggregateType, e.AggregateID, e.Version, a.typ, a.id, a.version)
			}
		}
		missing := 0
		for id, a := range acked {
			if (f.typ == "" || a.typ == f.typ) && tenantOf(a.writer) == tenants[0] && seen[id] == 0 {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("feed %q: %d acknowledged events never seen", f.typ, missing)
		}
		t.Logf("feed %q: %d events read, %d while the other transaction was open", f.typ, len(f.events), f.during.Load())
	}
	t.Logf("%d events acknowledged by %d writer processes (writer 0 SIGKILLed at 2 s)", len(acked), writers)
}
