package sqlite_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// TestFailedAppendAllLeavesItsBatchAlone runs an AppendAll whose second
// request fails its version check while Appends queue behind it, so that
// the group commit's next transaction holds the AppendAll and the Appends:
// the Appends must all be written, the AppendAll not at all, and the
// positions stay gap-free.
func TestFailedAppendAllLeavesItsBatchAlone(t *testing.T) {
	s := openTemp(t)
	if _, err := s.Append(ctx, request("acct", "x", storage.VersionCheck{}, 1)); err != nil {
		t.Fatal(err)
	}
	const rounds, longAggs, longEvents = 10, 20, 25
	for round := range rounds {
		var wg sync.WaitGroup
		// A long batch that the others queue behind.
		var long []storage.AppendRequest
		for k := range longAggs {
			long = append(long, request("acct", fmt.Sprintf("long%d-%d", round, k), storage.VersionCheck{}, longEvents))
		}
		wg.Go(func() {
			if _, err := s.AppendAll(ctx, long); err != nil {
				t.Error(err)
			}
		})
		time.Sleep(2 * time.Millisecond)
		var allErr error
		bad := []storage.AppendRequest{
			request("acct", fmt.Sprintf("bad%d", round), storage.VersionCheck{}, 3),
			request("acct", "x", storage.ExpectVersion(99), 2),
		}
		wg.Go(func() { _, allErr = s.AppendAll(ctx, bad) })
		time.Sleep(time.Millisecond)
		for k := range 10 {
			wg.Go(func() {
				id := fmt.Sprintf("one%d-%d", round, k)
				res, err := s.Append(ctx, request("acct", id, storage.ExpectVersion(0), 1+k%3))
				if err != nil || res.Version != 1 {
					t.Errorf("append %s: %+v, %v", id, res, err)
				}
			})
		}
		wg.Wait()
		var be *storage.BatchError
		if !errors.As(allErr, &be) || be.Index != 1 || !errors.Is(allErr, storage.ErrConflict) {
			t.Fatalf("round %d: AppendAll: %v, want a BatchError for request 1 wrapping ErrConflict", round, allErr)
		}
		if _, err := s.Load(ctx, storage.LoadQuery{AggregateType: "acct", AggregateID: fmt.Sprintf("bad%d", round)}); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("round %d: the failed AppendAll's first request was written: %v", round, err)
		}
		for k := range 10 {
			agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "acct", AggregateID: fmt.Sprintf("one%d-%d", round, k)})
			if err != nil || len(agg.Events) != 1+k%3 {
				t.Fatalf("round %d: append %d: %d events, %v", round, k, len(agg.Events), err)
			}
		}
	}
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 100_000})
	if err != nil {
		t.Fatal(err)
	}
	// The first event, then per round the long batch and 10 Appends of
	// 1+k%3 events.
	if want := 1 + rounds*(longAggs*longEvents+19); len(page.Events) != want {
		t.Fatalf("feed: %d events, want %d", len(page.Events), want)
	}
	for i, e := range page.Events {
		if e.Position != int64(i+1) {
			t.Fatalf("feed: event %d at position %d", i, e.Position)
		}
	}
}
