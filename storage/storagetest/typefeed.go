package storagetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// Sizes of BenchmarkTypeFeed.
const (
	typeFeedStore      = 1_000_000 // events in the mixed store
	typeFeedStoreShort = 100_000   // the same with -short
	typeFeedShare      = 100       // one event in typeFeedShare is of the read type
	typeFeedPerCall    = 10        // target events per AppendAll call to the mixed store
	typeFeedRead       = 1_000     // Limit of each timed read
)

// BenchmarkTypeFeed measures what reading a type's feed costs in a large
// store where that type holds 1 % of the events, against a store holding
// that type alone. Both stores get the same saves of the read type
// ("target", one event each, over 100 aggregates); the mixed one also gets
// 99 events of type "other" after each, so that every target event lies
// alone among others: 1,000,000 events in all (100,000 with -short). The
// stores are built with AppendAll, in calls of 1,000 events to the mixed
// store and of 100 saves to the other.
//
// Each iteration reads the same page of 1,000 target events from both
// stores, alternating which goes first, and checks that both return the
// same events. Pages cycle over the whole target feed. Sub-benchmark
// by=position pages with After, by=feedsequence with AfterFeedSequence. Both
// report alone-us/read, mixed-us/read and mixed/alone (1.0 when the other
// events cost nothing).
//
// open must return a new, empty Storage on each call; it is called twice.
func BenchmarkTypeFeed(b *testing.B, open func(tb testing.TB) storage.Storage) {
	total := typeFeedStore
	if testing.Short() {
		total = typeFeedStoreShort
	}
	ctx := context.Background()
	g := newIDGen()
	start := time.Now()
	alone, mixed := open(b), open(b)
	b.Cleanup(func() { _ = alone.Close(); _ = mixed.Close() })
	if err := fillTypeFeed(ctx, g, alone, mixed, total); err != nil {
		b.Fatal(err)
	}
	b.Logf("stores of %d and %d events built in %v", total/typeFeedShare, total, time.Since(start).Round(time.Millisecond))
	for _, byFS := range []bool{false, true} {
		name := "by=position"
		if byFS {
			name = "by=feedsequence"
		}
		b.Run(name, func(b *testing.B) {
			qa, err := typeFeedPages(ctx, alone, byFS)
			if err != nil {
				b.Fatal(err)
			}
			qm, err := typeFeedPages(ctx, mixed, byFS)
			if err != nil {
				b.Fatal(err)
			}
			if len(qa) != len(qm) || len(qa) == 0 {
				b.Fatalf("the target feed has %d pages alone and %d mixed", len(qa), len(qm))
			}
			var aloneTime, mixedTime time.Duration
			timed := func(s storage.Storage, q storage.FeedQuery, d *time.Duration) []storage.Event {
				t0 := time.Now()
				page, err := s.ReadFeed(ctx, q)
				*d += time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				return page.Events
			}
			i := 0
			for b.Loop() {
				k := i % len(qa)
				var ea, em []storage.Event
				if i%2 == 0 {
					ea = timed(alone, qa[k], &aloneTime)
					em = timed(mixed, qm[k], &mixedTime)
				} else {
					em = timed(mixed, qm[k], &mixedTime)
					ea = timed(alone, qa[k], &aloneTime)
				}
				if err := sameTargetPage(ea, em); err != nil {
					b.Fatalf("page %d: %v", k, err)
				}
				i++
			}
			b.ReportMetric(float64(aloneTime.Microseconds())/float64(b.N), "alone-us/read")
			b.ReportMetric(float64(mixedTime.Microseconds())/float64(b.N), "mixed-us/read")
			b.ReportMetric(mixedTime.Seconds()/aloneTime.Seconds(), "mixed/alone")
		})
	}
}

// fillTypeFeed saves total/typeFeedShare target events to alone and the
// same ones, each followed by typeFeedShare-1 other events, to mixed.
func fillTypeFeed(ctx context.Context, g *idGen, alone, mixed storage.Storage, total int) error {
	now := time.Now().UTC().Truncate(time.Microsecond)
	batch := func(typ, id string, n int) storage.AppendRequest {
		req := storage.AppendRequest{AggregateType: typ, AggregateID: id, Events: make([]storage.Event, n)}
		for i := range req.Events {
			req.Events[i] = storage.Event{ID: g.next(), Type: "BenchmarkHappened", Data: g.data, RecordedAt: now}
		}
		return req
	}
	var aloneReqs []storage.AppendRequest
	targets := total / typeFeedShare
	for t := 0; t < targets; t += typeFeedPerCall {
		reqs := make([]storage.AppendRequest, 0, 2*typeFeedPerCall)
		for k := t; k < t+typeFeedPerCall; k++ {
			target := batch("target", fmt.Sprintf("t-%d", k%100), 1)
			reqs = append(reqs, target, batch("other", fmt.Sprintf("o-%d", k%10_000), typeFeedShare-1))
			aloneReqs = append(aloneReqs, target)
		}
		if _, err := mixed.AppendAll(ctx, reqs); err != nil {
			return fmt.Errorf("fill the mixed store: %w", err)
		}
		if len(aloneReqs) == 100 {
			if _, err := alone.AppendAll(ctx, aloneReqs); err != nil {
				return fmt.Errorf("fill the target store: %w", err)
			}
			aloneReqs = nil
		}
	}
	if len(aloneReqs) > 0 {
		if _, err := alone.AppendAll(ctx, aloneReqs); err != nil {
			return fmt.Errorf("fill the target store: %w", err)
		}
	}
	return nil
}

// typeFeedPages reads the whole target feed of s in pages of
// typeFeedRead and returns the query of each page.
func typeFeedPages(ctx context.Context, s storage.Storage, byFS bool) ([]storage.FeedQuery, error) {
	var pages []storage.FeedQuery
	q := storage.FeedQuery{AggregateType: "target", Limit: typeFeedRead}
	for {
		page, err := s.ReadFeed(ctx, q)
		if err != nil {
			return nil, err
		}
		n := len(page.Events)
		if n == 0 {
			return pages, nil
		}
		pages = append(pages, q)
		if byFS {
			q.AfterFeedSequence = page.Events[n-1].FeedSequence
		} else {
			q.After = page.Events[n-1].Position
		}
	}
}

// sameTargetPage checks that two reads of the target feed returned the
// same full page of events.
func sameTargetPage(alone, mixed []storage.Event) error {
	if len(alone) != typeFeedRead || len(mixed) != typeFeedRead {
		return fmt.Errorf("read %d events alone and %d mixed, want %d each", len(alone), len(mixed), typeFeedRead)
	}
	// FeedSequences are compared by order only: a backend may number
	// with gaps (PostgreSQL numbers a batch by its first position), so
	// the same batch has different numbers in the two stores.
	for i := range alone {
		a, m := alone[i], mixed[i]
		sameBatch := i == 0 || (a.FeedSequence == alone[i-1].FeedSequence) == (m.FeedSequence == mixed[i-1].FeedSequence)
		if a.ID != m.ID || a.AggregateType != "target" || m.AggregateType != "target" ||
			a.AggregateID != m.AggregateID || a.Version != m.Version || !sameBatch {
			return fmt.Errorf("event %d: %s %s/%s v%d fs%d alone, %s %s/%s v%d fs%d mixed", i,
				a.ID, a.AggregateType, a.AggregateID, a.Version, a.FeedSequence,
				m.ID, m.AggregateType, m.AggregateID, m.Version, m.FeedSequence)
		}
	}
	return nil
}
