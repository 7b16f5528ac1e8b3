package sqlite_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/google/uuid"
)

// TestLoadRangeFromEveryVersion loads every range (after, after+limit] of
// an aggregate saved in batches of 1 to 12 events, and of one saved an
// event at a time, and compares each with the whole history filtered by
// version: Load finds the first event after a version by probing the
// sequence index instead of scanning from the start.
func TestLoadRangeFromEveryVersion(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, agg := range []struct {
		id       string
		maxBatch int
	}{{"batched", 12}, {"single", 1}} {
		for range 40 {
			n := 1 + rng.IntN(agg.maxBatch)
			events := make([]eventstore.Event, n)
			for k := range events {
				events[k] = eventstore.Event{ID: uuid.NewString(), Type: "E", Data: []byte(`{}`)}
			}
			if _, err := s.Append(ctx, eventstore.AppendRequest{AggregateType: "t", AggregateID: agg.id, Events: events}); err != nil {
				t.Fatal(err)
			}
		}
		whole, err := s.Load(ctx, eventstore.LoadQuery{AggregateType: "t", AggregateID: agg.id})
		if err != nil {
			t.Fatal(err)
		}
		for after := int64(0); after <= whole.Version+1; after++ {
			for _, limit := range []int64{0, 1, 3, 1000} {
				got, err := s.Load(ctx, eventstore.LoadQuery{AggregateType: "t", AggregateID: agg.id, AfterVersion: after, Limit: limit})
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				for _, e := range whole.Events {
					if e.Version > after && (limit == 0 || e.Version <= after+limit) {
						want = append(want, e.ID)
					}
				}
				var ids []string
				for _, e := range got.Events {
					ids = append(ids, e.ID)
				}
				if fmt.Sprint(ids) != fmt.Sprint(want) || got.Version != whole.Version {
					t.Fatalf("%s after %d limit %d: got %d events %v at version %d, want %d events %v at %d",
						agg.id, after, limit, len(ids), ids, got.Version, len(want), want, whole.Version)
				}
			}
		}
	}
}
