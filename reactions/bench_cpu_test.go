package reactions_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// BenchmarkDeliveryCPU measures the CPU time the delivering process spends
// per delivery at 1,000 reactions a second falling due, POSTed to a
// receiver in a process of its own: the Engine (on the memory storage, so
// that only the Engine's own work counts) against the floor's http case
// of BenchmarkRawDeliveriesWhileSaving (POSTs only, same pacing and
// concurrency). Nothing else runs. Each iteration is a pair of windows of
// 500 reactions in alternating order; it reports the medians of each's
// µs of CPU per delivery and of their ratio. CPU time varies far less than
// a save rate between runs on a shared machine, which makes this the
// benchmark to try the Engine's in-process cost on:
//
//	go test ./reactions -run X -bench DeliveryCPU -benchtime 10x
func BenchmarkDeliveryCPU(b *testing.B) {
	const perWindow = 500
	target, delivered := countingReceiver(b)
	total := 0 // deliveries expected so far
	// measure runs run from first until the receiver has seen want
	// deliveries (or 10 s) and returns the CPU per delivery.
	measure := func(first time.Time, want int, run func(ctx context.Context)) float64 {
		ctx, stop := context.WithCancel(b.Context())
		done := make(chan struct{})
		go func() { run(ctx); close(done) }()
		time.Sleep(time.Until(first))
		c0 := cpuTime()
		total += want
		n, ok := awaitDelivered(delivered, total)
		cpu := cpuTime() - c0
		stop()
		<-done
		if !ok {
			b.Fatalf("%d deliveries of %d within 10 s", n, total)
		}
		return float64(cpu) / float64(time.Microsecond) / float64(want)
	}

	s := memory.New()
	st, _ := eventstore.New(s, nil)
	defer st.Close()
	e, _ := reactions.New(st, s, &reactions.Options{Outbound: &reactions.Outbound{AllowAll: true}})
	if err := e.Create(b.Context(), reactions.Definition{Name: "r", FeedName: "order", ReactOnEventType: "placed",
		TriggerTimeField: "at", Action: reactions.Action{Type: reactions.ActionHTTPPost, TargetURI: target}}); err != nil {
		b.Fatal(err)
	}
	scheduled := 0
	engine := func() float64 {
		first := time.Now().Add(200 * time.Millisecond)
		saveDue(b, st, scheduled, perWindow, first)
		scheduled += perWindow
		if err := e.ScheduleOnce(b.Context()); err != nil {
			b.Fatal(err)
		}
		return measure(first, perWindow, func(ctx context.Context) { _ = e.Run(ctx) })
	}
	d := &rawDeliverer{target: target,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	if err := d.init(b.Context()); err != nil {
		b.Fatal(err)
	}
	floor := func() float64 {
		first := time.Now().Add(200 * time.Millisecond)
		if err := d.schedule(b.Context(), first, perWindow); err != nil {
			b.Fatal(err)
		}
		return measure(first, perWindow, d.run)
	}
	var es, fs, ratio []float64
	for i := 0; b.Loop(); i++ {
		var x, y float64
		if i%2 == 0 {
			x, y = engine(), floor()
		} else {
			y, x = floor(), engine()
		}
		es, fs, ratio = append(es, x), append(fs, y), append(ratio, x/y)
	}
	b.ReportMetric(median(es), "engine-µs-cpu/delivery")
	b.ReportMetric(median(fs), "floor-µs-cpu/delivery")
	b.ReportMetric(median(ratio), "engine/floor")
}

// countingReceiver starts the receiver process of startReceiver and
// returns its address and a function that returns how many deliveries it
// has seen so far.
func countingReceiver(b *testing.B) (string, func() int) {
	var (
		mu   sync.Mutex
		seen int
	)
	target, collect := startReceiver(b, func(time.Time, int64) {
		mu.Lock()
		seen++
		mu.Unlock()
	})
	return target, func() int {
		collect()
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// awaitDelivered waits, for at most 10 s, until delivered reports at
// least total deliveries; it returns the last count and whether it got
// there.
func awaitDelivered(delivered func() int, total int) (int, bool) {
	n, end := delivered(), time.Now().Add(10*time.Second)
	for n < total && time.Now().Before(end) {
		time.Sleep(time.Millisecond)
		n = delivered()
	}
	return n, n >= total
}
