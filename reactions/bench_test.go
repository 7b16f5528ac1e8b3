package reactions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/sqlite"
)

func backends(b *testing.B) map[string]func() storage.Storage {
	return map[string]func() storage.Storage{
		"memory": memory.New,
		"sqlite": func() storage.Storage {
			s, err := sqlite.Open(filepath.Join(b.TempDir(), "b.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
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

// BenchmarkDeliveries delivers reactions to a local receiver answering
// 200 with the default concurrency and reports deliveries per second,
// and the rate of a saving client while deliveries run against its rate
// alone, measured in the same run.
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
			saveFor := func(d time.Duration, typ string) float64 {
				n, start := 0, time.Now()
				for time.Since(start) < d {
					if _, err := st.Save(ctx, "order", fmt.Sprint("s-", n), []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: typ}}, nil); err != nil {
						b.Fatal(err)
					}
					n++
				}
				return float64(n) / time.Since(start).Seconds()
			}
			alone := saveFor(time.Second, "other")
			n := max(b.N, 5000)
			batches := make([]eventstore.Batch, 0, 500)
			for i := 0; i < n; i += 500 {
				batches = batches[:0]
				for j := i; j < min(n, i+500); j++ {
					batches = append(batches, eventstore.Batch{AggregateID: fmt.Sprint("o-", j),
						Events: []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "placed", Data: json.RawMessage(`{"total":12}`)}}})
				}
				if _, err := st.SaveAll(ctx, "order", batches); err != nil {
					b.Fatal(err)
				}
			}
			if err := e.ScheduleOnce(ctx); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { _ = e.Run(runCtx); close(done) }()
			start := time.Now()
			during := saveFor(time.Second, "other")
			for got.Load() < int64(n) {
				time.Sleep(time.Millisecond)
			}
			elapsed := time.Since(start)
			stop()
			<-done
			b.ReportMetric(float64(n)/elapsed.Seconds(), "deliveries/s")
			b.ReportMetric(during/alone*100, "%saverate")
		})
	}
}
