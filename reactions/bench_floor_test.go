package reactions_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
)

// BenchmarkDeliveriesAgainstFloor reads the Scale target of issue 20
// against the floor in one alternation: each iteration runs three windows
// of 500 ms, in rotating order, of one client saving one event at a time
// to a feed no definition follows: alone, while the Engine delivers 500
// reactions falling due one a millisecond (the other case of
// BenchmarkDeliveriesWhileSaving), and while the floor's sql deliverer of
// BenchmarkRawDeliveriesWhileSaving delivers as many (POSTs, one claim
// UPDATE and one record UPDATE per batch, in a table of its own). It
// reports the medians of the client's rate with the Engine and with the
// floor over its rate alone (%saverate-engine, %saverate-floor), and of
// the ratio of the two within each iteration (engine/floor), which
// BenchmarkDeliveriesWhileSaving and BenchmarkRawDeliveriesWhileSaving
// can only give across runs seconds apart:
//
//	go test ./reactions -run X -bench DeliveriesAgainstFloor -benchtime 12x
func BenchmarkDeliveriesAgainstFloor(b *testing.B) {
	for name, open := range backends(b) {
		if name == "memory" {
			continue // the client is CPU-bound there: any other work shows
		}
		b.Run(name, func(b *testing.B) {
			const window = 500 * time.Millisecond
			const perWindow = int(window / time.Millisecond)
			target, delivered := countingReceiver(b)
			s := open()
			st, _ := eventstore.New(s, nil)
			defer st.Close()
			e, _ := reactions.New(st, s, &reactions.Options{Outbound: &reactions.Outbound{AllowAll: true}})
			if err := e.Create(b.Context(), reactions.Definition{Name: "r", FeedName: "order", ReactOnEventType: "placed",
				TriggerTimeField: "at", Action: reactions.Action{Type: reactions.ActionHTTPPost, TargetURI: target}}); err != nil {
				b.Fatal(err)
			}
			d := &rawDeliverer{target: target, db: rawDB(b, name), pg: name == "postgres",
				client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
			if err := d.init(b.Context()); err != nil {
				b.Fatal(err)
			}
			saved := 0
			saveFor := func() float64 {
				n, start := 0, time.Now()
				for time.Since(start) < window {
					if _, err := st.Save(b.Context(), "customer", fmt.Sprint("s-", saved), []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "other"}}, nil); err != nil {
						b.Fatal(err)
					}
					n, saved = n+1, saved+1
				}
				return float64(n) / time.Since(start).Seconds()
			}
			total := 0 // deliveries expected so far
			// while runs run from first, saves for the window meanwhile,
			// waits for the window's deliveries and returns the rate.
			while := func(first time.Time, run func(ctx context.Context)) float64 {
				ctx, stop := context.WithCancel(b.Context())
				done := make(chan struct{})
				go func() { run(ctx); close(done) }()
				time.Sleep(time.Until(first))
				rate := saveFor()
				total += perWindow
				n, ok := awaitDelivered(delivered, total)
				stop()
				<-done
				if !ok {
					b.Fatalf("%d deliveries of %d within 10 s", n, total)
				}
				return rate
			}
			scheduled := 0
			windows := []func() float64{
				saveFor,
				func() float64 {
					first := time.Now().Add(200 * time.Millisecond)
					saveDue(b, st, scheduled, perWindow, first)
					scheduled += perWindow
					if err := e.ScheduleOnce(b.Context()); err != nil {
						b.Fatal(err)
					}
					return while(first, func(ctx context.Context) { _ = e.Run(ctx) })
				},
				func() float64 {
					first := time.Now().Add(200 * time.Millisecond)
					if err := d.schedule(b.Context(), first, perWindow); err != nil {
						b.Fatal(err)
					}
					return while(first, d.run)
				},
			}
			var engine, floor, ratio []float64
			for i := 0; b.Loop(); i++ {
				var rates [3]float64
				for k := range 3 {
					w := (i + k) % 3
					rates[w] = windows[w]()
				}
				engine = append(engine, rates[1]/rates[0]*100)
				floor = append(floor, rates[2]/rates[0]*100)
				ratio = append(ratio, rates[1]/rates[2])
			}
			b.ReportMetric(median(engine), "%saverate-engine")
			b.ReportMetric(median(floor), "%saverate-floor")
			b.ReportMetric(median(ratio), "engine/floor")
		})
	}
}
