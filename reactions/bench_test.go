package reactions_test

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/jackc/pgx/v5"
)

// backends opens the storages the benchmarks run on: memory, SQLite and,
// when it answers, PostgreSQL at EVENTSTORE_POSTGRES_URL (default the
// local test database), each in a fresh schema dropped afterwards.
func backends(b *testing.B) map[string]func() storage.Storage {
	m := map[string]func() storage.Storage{
		"memory": memory.New,
		"sqlite": func() storage.Storage {
			s, err := sqlite.Open(filepath.Join(b.TempDir(), "b.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	url := cmp.Or(os.Getenv("EVENTSTORE_POSTGRES_URL"), "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if c, err := pgx.Connect(ctx, url); err == nil {
		_ = c.Close(ctx)
		m["postgres"] = func() storage.Storage {
			schema := fmt.Sprintf("es_bench_%d", time.Now().UnixNano())
			s, err := postgres.OpenURL(context.Background(), url, &postgres.Options{Schema: schema})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				c, err := pgx.Connect(context.Background(), url)
				if err != nil {
					return
				}
				defer c.Close(context.Background())
				_, _ = c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			})
			return s
		}
	}
	return m
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkPending100k schedules 100,000 reactions a day away and reports
// the live heap they cost per pending reaction (memory backend: all of it;
// SQLite: the Go side only) and the CPU the running Engine uses over two
// seconds while none is due.
func BenchmarkPending100k(b *testing.B) {
	for name, open := range backends(b) {
		b.Run(name, func(b *testing.B) {
			for range b.N {
				const n = 100_000
				s := open()
				st, _ := eventstore.New(s, nil)
				e, _ := reactions.New(st, s, &reactions.Options{Funcs: map[string]reactions.Func{"f": func(context.Context, reactions.Delivery) error { return nil }}})
				ctx := context.Background()
				if err := e.Create(ctx, reactions.Definition{Name: "r", FeedName: "order", ReactOnEventType: "placed", Offset: "P1D",
					Action: reactions.Action{Type: reactions.ActionFunc, Function: "f"}}); err != nil {
					b.Fatal(err)
				}
				batches := make([]eventstore.Batch, 0, 1000)
				for i := 0; i < n; i += 1000 {
					batches = batches[:0]
					for j := range 1000 {
						batches = append(batches, eventstore.Batch{AggregateID: fmt.Sprint("o-", i+j),
							Events: []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "placed", Data: json.RawMessage(`{"total":12}`)}}})
					}
					if _, err := st.SaveAll(ctx, "order", batches); err != nil {
						b.Fatal(err)
					}
				}
				before := heap()
				if err := e.ScheduleOnce(ctx); err != nil {
					b.Fatal(err)
				}
				after := heap()
				runCtx, stop := context.WithCancel(ctx)
				done := make(chan struct{})
				go func() { _ = e.Run(runCtx); close(done) }()
				time.Sleep(200 * time.Millisecond)
				c0 := cpuTime()
				time.Sleep(2 * time.Second)
				idle := cpuTime() - c0
				stop()
				<-done
				p, _ := e.Reactions(ctx, reactions.ListOptions{Status: reactions.StatusScheduled, Limit: -1})
				if p.Total != n {
					b.Fatalf("%d scheduled, want %d", p.Total, n)
				}
				b.ReportMetric(float64(int64(after)-int64(before))/n, "heapB/pending")
				b.ReportMetric(float64(idle)/float64(2*time.Second)*100, "%cpu-idle")
				_ = st.Close()
			}
		})
	}
}

// BenchmarkDeliveries delivers reactions that are all due to a local
// receiver answering 200 with the default concurrency, flat out, and
// reports deliveries per second (the capacity of one process) and the CPU
// time of the process per delivery, the receiver's included (on
// PostgreSQL the server's is not). Nothing else runs meanwhile; BenchmarkDeliveriesWhileSaving measures what
// deliveries cost a saving client.
func BenchmarkDeliveries(b *testing.B) {
	for name, open := range backends(b) {
		b.Run(name, func(b *testing.B) {
			var got atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
			defer srv.Close()
			s := open()
			st, _ := eventstore.New(s, nil)
			defer st.Close()
			e, _ := reactions.New(st, s, &reactions.Options{Outbound: &reactions.Outbound{AllowAll: true}})
			ctx := context.Background()
			_ = e.Create(ctx, reactions.Definition{Name: "r", FeedName: "order", ReactOnEventType: "placed",
				Action: reactions.Action{Type: reactions.ActionHTTPPost, TargetURI: srv.URL}})
			n := max(b.N, 5000)
			saveDue(b, st, 0, n, time.Time{})
			if err := e.ScheduleOnce(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { _ = e.Run(runCtx); close(done) }()
			start, c0 := time.Now(), cpuTime()
			for got.Load() < int64(n) {
				time.Sleep(time.Millisecond)
			}
			elapsed, cpu := time.Since(start), cpuTime()-c0
			stop()
			<-done
			b.ReportMetric(float64(n)/elapsed.Seconds(), "deliveries/s")
			b.ReportMetric(float64(cpu)/float64(time.Microsecond)/float64(n), "µs-cpu/delivery")
		})
	}
}

// saveDue saves n events of type placed on aggregates o-from... whose
// field "at" says when their reaction is due: the i-th at first plus i
// milliseconds, or no field when first is zero.
func saveDue(b *testing.B, st *eventstore.Store, from, n int, first time.Time) {
	batches := make([]eventstore.Batch, 0, 500)
	for i := 0; i < n; i += 500 {
		batches = batches[:0]
		for j := i; j < min(n, i+500); j++ {
			data := json.RawMessage(`{"total":12}`)
			if !first.IsZero() {
				data = json.RawMessage(fmt.Sprintf(`{"total":12,"at":%d}`, first.Add(time.Duration(j)*time.Millisecond).UnixMilli()))
			}
			batches = append(batches, eventstore.Batch{AggregateID: fmt.Sprint("o-", from+j),
				Events: []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "placed", Data: data}}})
		}
		if _, err := st.SaveAll(context.Background(), "order", batches); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDeliveriesWhileSaving measures the Scale target of issue 20:
// deliveries at 1,000 a second to a local receiver answering 200, with the
// default concurrency, while one client saves events one at a time as fast
// as it can, either to the feed the definition follows (followed: the
// scheduler reads every event saved, as any follower of that feed does)
// or to another feed (other: what deliveries alone cost); other-func
// delivers to a Go function instead of over HTTP (what the storage side
// of deliveries costs, without the HTTP round trip and the receiver). The
// receiver runs in a process of its own, as a user's receiver does (on
// the same machine, sharing its cores); other-inprocess runs it in the
// benchmark's process instead, where its CPU and garbage count as the
// store's.
//
// Each iteration is one pair of windows of deliveryWindow, in alternating
// order: the client saving alone (the Engine stopped), and the client
// saving while the Engine runs and reactions fall due one a millisecond.
// It reports the medians over the iterations of the client's save rate
// alone and meanwhile, of their ratio (%saverate: 100 means deliveries
// cost the client nothing), of the deliveries a second (a window's
// reactions over the time from the first falling due to the last
// delivered), of the process's CPU time beyond what the client alone
// used, per delivery (µs-cpu/delivery, the receiver's share included;
// with the client CPU-bound, as on memory, it is meaningless), of the
// CPU the process used with the client alone (cores-alone),
// and of the writes of reactions a second (rwrites/s: claims, outcome
// records, schedules); and the time from falling due to delivery over all
// windows (ms-late-p50, ms-late-p99). Run it with -benchtime 10x (ten
// pairs) or more: on a shared machine only the ratio within one run means
// much.
func BenchmarkDeliveriesWhileSaving(b *testing.B) {
	for name, open := range backends(b) {
		for _, c := range []string{"followed", "other", "other-func", "other-inprocess"} {
			b.Run(name+"/"+c, func(b *testing.B) {
				deliveriesWhileSaving(b, open, c == "followed", c == "other-func", c == "other-inprocess")
			})
		}
	}
}

// deliveriesWhileSaving is BenchmarkDeliveriesWhileSaving on one storage,
// the client saving to the feed the definition follows or to another, the
// action an HTTP POST or (goFunc) a Go function, the receiver of the POSTs
// in a process of its own or (inProcess) in the benchmark's.
func deliveriesWhileSaving(b *testing.B, open func() storage.Storage, followed, goFunc, inProcess bool) {
	const deliveryWindow = 500 * time.Millisecond
	const perWindow = int(deliveryWindow / time.Millisecond)
	saveType := "customer"
	if followed {
		saveType = "order"
	}
	var (
		mu    sync.Mutex
		times []time.Time
		late  []float64 // milliseconds from the trigger time to the delivery
	)
	record := func(now time.Time, triggerAt int64) {
		mu.Lock()
		times = append(times, now)
		late = append(late, float64(now.Sub(time.UnixMilli(triggerAt)))/float64(time.Millisecond))
		mu.Unlock()
	}
	target, collect := "", func() {}
	if inProcess {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := time.Now()
			var body struct {
				Metadata struct{ TriggerAt int64 } `json:"metadata"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			record(now, body.Metadata.TriggerAt)
		}))
		defer srv.Close()
		target = srv.URL
	} else if !goFunc {
		target, collect = startReceiver(b, record)
	}
	s := open()
	st, _ := eventstore.New(s, nil)
	defer st.Close()
	cs := &countingStorage{Storage: s, ReactionStorage: s.(storage.ReactionStorage)}
	fn := func(_ context.Context, d reactions.Delivery) error {
		mu.Lock()
		times = append(times, time.Now())
		late = append(late, float64(time.Since(d.Reaction.TriggerAt))/float64(time.Millisecond))
		mu.Unlock()
		return nil
	}
	e, _ := reactions.New(st, cs, &reactions.Options{Outbound: &reactions.Outbound{AllowAll: true}, Funcs: map[string]reactions.Func{"f": fn}})
	ctx := context.Background()
	action := reactions.Action{Type: reactions.ActionHTTPPost, TargetURI: target}
	if goFunc {
		action = reactions.Action{Type: reactions.ActionFunc, Function: "f"}
	}
	if err := e.Create(ctx, reactions.Definition{Name: "r", FeedName: "order", ReactOnEventType: "placed",
		TriggerTimeField: "at", Action: action}); err != nil {
		b.Fatal(err)
	}
	saved := 0
	saveFor := func(d time.Duration) float64 {
		n, start := 0, time.Now()
		for time.Since(start) < d {
			if _, err := st.Save(ctx, saveType, fmt.Sprint("s-", saved), []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "other"}}, nil); err != nil {
				b.Fatal(err)
			}
			n++
			saved++
		}
		return float64(n) / time.Since(start).Seconds()
	}
	scheduled := 0
	// withDeliveries runs the Engine while reactions fall due one a
	// millisecond for deliveryWindow and the client saves, and
	// returns the client's rate and the deliveries a second.
	var cpuWith, cpuAlone time.Duration
	var writes int64
	withDeliveries := func() (rate, delivered float64) {
		first := time.Now().Add(200 * time.Millisecond)
		saveDue(b, st, scheduled, perWindow, first)
		scheduled += perWindow
		if err := e.ScheduleOnce(ctx); err != nil {
			b.Fatal(err)
		}
		mu.Lock()
		times = times[:0]
		mu.Unlock()
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = e.Run(runCtx); close(done) }()
		time.Sleep(time.Until(first))
		c0, w0 := cpuTime(), cs.writes.Load()
		rate = saveFor(deliveryWindow)
		end := time.Now()
		cpuWith, writes = cpuTime()-c0, cs.writes.Load()-w0
		for {
			collect()
			mu.Lock()
			n := len(times)
			mu.Unlock()
			if n >= perWindow || time.Since(end) > 10*time.Second {
				break
			}
			time.Sleep(time.Millisecond)
		}
		stop()
		<-done
		mu.Lock()
		last := first
		for _, t := range times {
			if t.After(last) {
				last = t
			}
		}
		n := len(times)
		mu.Unlock()
		return rate, float64(n) / last.Sub(first).Seconds()
	}
	alonePaced := func() float64 {
		c0 := cpuTime()
		a := saveFor(deliveryWindow)
		cpuAlone = cpuTime() - c0
		return a
	}
	var cpu, writeRates, aloneCores []float64
	alone, during, ratio, rates := alternate(b, alonePaced, withDeliveries, func(_, _, r float64) {
		cpu = append(cpu, float64(cpuWith-cpuAlone)/float64(time.Microsecond)/(r*deliveryWindow.Seconds()))
		writeRates = append(writeRates, float64(writes)/deliveryWindow.Seconds())
		aloneCores = append(aloneCores, cpuAlone.Seconds()/deliveryWindow.Seconds())
	})
	b.ReportMetric(median(alone), "saves/s-alone")
	b.ReportMetric(median(during), "saves/s-meanwhile")
	b.ReportMetric(median(ratio), "%saverate")
	b.ReportMetric(median(rates), "deliveries/s")
	b.ReportMetric(median(cpu), "µs-cpu/delivery")
	b.ReportMetric(median(aloneCores), "cores-alone")
	mu.Lock()
	slices.Sort(late)
	if len(late) > 0 {
		b.ReportMetric(late[len(late)/2], "ms-late-p50")
		b.ReportMetric(late[len(late)*99/100], "ms-late-p99")
	}
	mu.Unlock()
	b.ReportMetric(median(writeRates), "rwrites/s")
}

// countingStorage counts the writes of an Engine's reactions storage
// that come with deliveries and scheduling.
type countingStorage struct {
	storage.Storage
	storage.ReactionStorage
	writes atomic.Int64
}

func (c *countingStorage) ClaimReactions(ctx context.Context, cl storage.ReactionClaim) ([]storage.Reaction, error) {
	c.writes.Add(1)
	return c.ReactionStorage.ClaimReactions(ctx, cl)
}

func (c *countingStorage) FinishReactions(ctx context.Context, o []storage.ReactionOutcome) ([]error, error) {
	c.writes.Add(1)
	return c.ReactionStorage.FinishReactions(ctx, o)
}

func (c *countingStorage) ScheduleReactions(ctx context.Context, sc storage.ReactionSchedule) error {
	c.writes.Add(1)
	return c.ReactionStorage.ScheduleReactions(ctx, sc)
}

// median returns the median of v, which it sorts.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// receiverEnv makes the test binary, run with -test.run
// '^TestHelperReceiver$', the receiver of BenchmarkDeliveriesWhileSaving.
const receiverEnv = "REACTIONS_BENCH_RECEIVER"

// startReceiver starts the receiver of deliveries in a process of its own
// (a receiver is the user's program, not the store's): it answers every
// POST with 200 and notes when it arrived and the reaction's trigger time.
// It returns the receiver's address and a function that passes the
// deliveries noted since its last call to record. The process ends with
// the benchmark.
func startReceiver(b *testing.B, record func(at time.Time, triggerAt int64)) (string, func()) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReceiver$", "-test.count=1")
	cmd.Env = append(os.Environ(), receiverEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("the receiver process did not start: %v", err)
	}
	base := "http://" + strings.TrimSpace(addr)
	return base + "/deliver", func() {
		resp, err := http.Get(base + "/noted")
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		var noted [][2]int64
		if err := json.NewDecoder(resp.Body).Decode(&noted); err != nil {
			b.Fatal(err)
		}
		for _, n := range noted {
			record(time.Unix(0, n[0]), n[1])
		}
	}
}

// TestHelperReceiver is the receiver process of startReceiver; it does
// nothing unless started by it. It prints its address, answers POST
// /deliver with 200 noting the arrival, GET /noted with the arrivals noted
// since the last GET, and ends when its standard input closes.
func TestHelperReceiver(t *testing.T) {
	if os.Getenv(receiverEnv) != "1" {
		return
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		noted = [][2]int64{}
	)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /deliver", func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UnixNano()
		var body struct {
			Metadata struct{ TriggerAt int64 } `json:"metadata"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		noted = append(noted, [2]int64{now, body.Metadata.TriggerAt})
		mu.Unlock()
	})
	mux.HandleFunc("GET /noted", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n := noted
		noted = [][2]int64{}
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(n)
	})
	go func() { _ = http.Serve(l, mux) }()
	fmt.Println(l.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
}
