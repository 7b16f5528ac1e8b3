package sqlite_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
)

// TestTypeFeedFromEveryPosition reads each type's feed from every position
// (with a feed sequence bound and a limit drawn at random) of a store
// whose types interleave, with batches of 1 to 4 events and deleted aggregates leaving holes in the
// positions and feed sequences, and compares every page with the global
// feed filtered by type: the type feed finds where to start in its feed
// sequence index, by the event at After or by searching.
func TestTypeFeedFromEveryPosition(t *testing.T) {
	s := openTemp(t)
	rng := rand.New(rand.NewPCG(1, 2))
	types := []string{"a", "b", "c"}
	for i := range 120 {
		typ := types[rng.IntN(len(types))]
		if i%7 == 0 {
			typ = "a" // a frequent type next to rarer ones
		}
		req := request(typ, fmt.Sprint(rng.IntN(12)), storage.VersionCheck{}, 1+rng.IntN(4))
		if _, err := s.Append(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	for _, agg := range [][2]string{{"a", "3"}, {"b", "5"}, {"c", "0"}, {"a", "11"}} {
		if err := s.DeleteAggregate(ctx, agg[0], agg[1]); err != nil {
			t.Fatalf("delete %s/%s: %v", agg[0], agg[1], err)
		}
	}
	all, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	last := all.Head
	for _, typ := range append(types, "none") {
		var want []storage.Event
		for _, e := range all.Events {
			if e.AggregateType == typ {
				want = append(want, e)
			}
		}
		for after := int64(0); after <= last+1; after++ {
			// One feed sequence bound and limit per position keeps the
			// test quick under -race; the random choice covers them all.
			afterFS := []int64{0, 0, 1, 5, 20}[rng.IntN(5)]
			limit := []int{1, 3, 1000}[rng.IntN(3)]
			var exp []storage.Event
			for _, e := range want {
				if e.Position > after && e.FeedSequence > afterFS && len(exp) < limit {
					exp = append(exp, e)
				}
			}
			q := storage.FeedQuery{AggregateType: typ, After: after, AfterFeedSequence: afterFS, Limit: limit}
			page, err := s.ReadFeed(ctx, q)
			if err != nil {
				t.Fatalf("%+v: %v", q, err)
			}
			if len(page.Events) != len(exp) {
				t.Fatalf("%+v: %d events, want %d", q, len(page.Events), len(exp))
			}
			for i := range exp {
				if page.Events[i].ID != exp[i].ID {
					t.Fatalf("%+v: event %d at position %d, want %d", q, i, page.Events[i].Position, exp[i].Position)
				}
			}
			if len(exp) < limit && page.Head != max(after, last) {
				t.Fatalf("%+v: head %d of a short page, want %d", q, page.Head, max(after, last))
			}
		}
	}
}
