package storagetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// Sizes of BenchmarkFeedDate.
const (
	feedDateStore      = 1_000_000 // events in the store
	feedDateStoreShort = 100_000   // the same with -short
	feedDateBatch      = 10        // events per batch
	feedDatePerCall    = 100       // batches per AppendAll call
	feedDateSpacing    = 36 * time.Second
	feedDateWindows    = 16 // windows the timed reads cycle over
)

// BenchmarkFeedDate measures what reading a one-hour window of a large
// feed by date (FeedQuery.From and To) costs against reading the same
// number of events by position (After). The store holds 1,000,000 events
// (100,000 with -short) in batches of 10 over 100 aggregates of one type,
// batch k recorded at k × 36 s minus (k mod 3) × 20 s, so that RecordedAt
// does not rise with the position and an hour holds about 1,000 events.
//
// Each iteration reads one of 16 one-hour windows spread over the whole
// feed (from its start to near its end) in both ways, alternating which
// goes first: by date from After 0 with Limit 2,000 (a window fits in one
// page), and by position from just before the window's first event with
// Limit the number of events in the window; on the feed of all types
// (feed=all) and on the type's feed (feed=type). It checks that both
// return that many events, and reports date-us/read, since-us/read and
// date/since (about 1 or less when reading by date costs no more).
//
// open must return a new, empty Storage; it is called once.
func BenchmarkFeedDate(b *testing.B, open func(tb testing.TB) storage.Storage) {
	total := feedDateStore
	if testing.Short() {
		total = feedDateStoreShort
	}
	ctx := context.Background()
	g := newIDGen()
	start := time.Now()
	s := open(b)
	b.Cleanup(func() { _ = s.Close() })
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	batches := total / feedDateBatch
	for k := 0; k < batches; k += feedDatePerCall {
		reqs := make([]storage.AppendRequest, 0, feedDatePerCall)
		for j := k; j < k+feedDatePerCall && j < batches; j++ {
			at := base.Add(time.Duration(j)*feedDateSpacing - time.Duration(j%3)*20*time.Second)
			req := storage.AppendRequest{AggregateType: "dated", AggregateID: fmt.Sprintf("d-%d", j%100), Events: make([]storage.Event, feedDateBatch)}
			for i := range req.Events {
				req.Events[i] = storage.Event{ID: g.next(), Type: "BenchmarkHappened", Data: g.data, RecordedAt: at}
			}
			reqs = append(reqs, req)
		}
		if _, err := s.AppendAll(ctx, reqs); err != nil {
			b.Fatalf("fill the store: %v", err)
		}
	}
	b.Logf("store of %d events built in %v", total, time.Since(start).Round(time.Millisecond))
	span := time.Duration(batches) * feedDateSpacing
	for _, typ := range []string{"", "dated"} {
		name := "feed=all"
		if typ != "" {
			name = "feed=type"
		}
		b.Run(name, func(b *testing.B) {
			// The windows, and where each starts in the feed, untimed.
			type window struct {
				date  storage.FeedQuery
				since storage.FeedQuery
			}
			var ws []window
			for w := range feedDateWindows {
				from := base.Add(span * time.Duration(w) / feedDateWindows).Truncate(time.Hour)
				dq := storage.FeedQuery{AggregateType: typ, Limit: 2000, From: from, To: from.Add(time.Hour - time.Microsecond)}
				page, err := s.ReadFeed(ctx, dq)
				if err != nil {
					b.Fatal(err)
				}
				if n := len(page.Events); n < 500 || n == dq.Limit {
					b.Fatalf("window %d (%v) holds %d events, want about 1,000 and under the limit", w, from, n)
				}
				ws = append(ws, window{dq, storage.FeedQuery{AggregateType: typ, After: page.Events[0].Position - 1, Limit: len(page.Events)}})
			}
			var dateTime, sinceTime time.Duration
			var events int
			timed := func(q storage.FeedQuery, d *time.Duration) int {
				t0 := time.Now()
				page, err := s.ReadFeed(ctx, q)
				*d += time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				return len(page.Events)
			}
			i := 0
			for b.Loop() {
				w := ws[i%len(ws)]
				var nd, ns int
				if i%2 == 0 {
					nd = timed(w.date, &dateTime)
					ns = timed(w.since, &sinceTime)
				} else {
					ns = timed(w.since, &sinceTime)
					nd = timed(w.date, &dateTime)
				}
				if nd != ns || nd != w.since.Limit {
					b.Fatalf("window %d: read %d events by date, %d by position, want %d", i%len(ws), nd, ns, w.since.Limit)
				}
				events += nd
				i++
			}
			b.ReportMetric(float64(dateTime.Microseconds())/float64(b.N), "date-us/read")
			b.ReportMetric(float64(sinceTime.Microseconds())/float64(b.N), "since-us/read")
			b.ReportMetric(dateTime.Seconds()/sinceTime.Seconds(), "date/since")
			b.ReportMetric(float64(events)/float64(b.N), "events/read")
		})
	}
}
