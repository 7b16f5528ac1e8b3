package storagetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
)

func loadRangeCases() []testCase {
	return []testCase{
		{"LoadRange", "Load returns the events of versions (AfterVersion, AfterVersion+Limit] (all later ones when Limit is 0) with their stored fields; Aggregate.Version is always the current version; a range past it has no events; an unknown aggregate is ErrNotFound", testLoadRange},
		{"LoadRangeEveryVersion", "on aggregates saved in batches of 1 to 12 events and one event at a time, every range (AfterVersion, AfterVersion+Limit] returns exactly the events of those versions, in order", testLoadRangeEveryVersion},
	}
}

func testLoadRange(t *testing.T, h *harness) {
	ctx := t.Context()
	for _, n := range []int{2, 1, 3, 1} { // versions 1..4, 7 events
		mustSave(t, h, "ledger", "l", evs("Booked", n), nil)
		mustSave(t, h, "ledger", "other", evs("Booked", 1), nil)
	}
	full := mustLoad(t, h, "ledger", "l")
	if len(full.Events) != 7 || full.Version != 4 {
		t.Fatalf("Load of the whole aggregate must return 7 events at version 4, got %d at %d", len(full.Events), full.Version)
	}
	versions := func(lo, hi int64) []storage.Event { // events of versions in [lo, hi]
		var out []storage.Event
		for _, e := range full.Events {
			if e.Version >= lo && e.Version <= hi {
				out = append(out, e)
			}
		}
		return out
	}
	for _, c := range []struct {
		after, limit int64
		want         []storage.Event
	}{
		{0, 0, full.Events},
		{0, 1, versions(1, 1)},
		{0, 4, full.Events},
		{0, 100, full.Events},
		{1, 0, versions(2, 4)},
		{1, 1, versions(2, 2)},
		{1, 2, versions(2, 3)},
		{2, 1, versions(3, 3)},
		{3, 0, versions(4, 4)},
		{3, 5, versions(4, 4)},
		{4, 0, nil},
		{4, 1, nil},
		{9, 0, nil},
	} {
		q := storage.LoadQuery{AggregateType: "ledger", AggregateID: "l", AfterVersion: c.after, Limit: c.limit}
		agg, err := h.s.Load(ctx, q)
		if err != nil {
			t.Errorf("Load after version %d, limit %d: %v", c.after, c.limit, err)
			continue
		}
		if agg.Type != "ledger" || agg.ID != "l" || agg.Version != 4 {
			t.Errorf("Load after version %d, limit %d must return ledger/l at its current version 4, got %s/%s at %d", c.after, c.limit, agg.Type, agg.ID, agg.Version)
		}
		if msg := sameEvents(agg.Events, c.want); msg != "" {
			t.Errorf("Load after version %d, limit %d must return the events of versions (%d, %d]: %s", c.after, c.limit, c.after, c.after+c.limit, msg)
		}
	}
	for _, q := range []storage.LoadQuery{
		{AggregateType: "ledger", AggregateID: "missing"},
		{AggregateType: "ledger", AggregateID: "missing", AfterVersion: 2, Limit: 1},
		{AggregateType: "other", AggregateID: "l", Limit: 1},
	} {
		if agg, err := h.s.Load(ctx, q); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Load %+v of an aggregate without events must wrap ErrNotFound, got %v (%d events)", q, err, len(agg.Events))
		}
	}
}

func testLoadRangeEveryVersion(t *testing.T, h *harness) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(3, 4))
	for _, agg := range []struct {
		id       string
		maxBatch int
	}{{"batched", 12}, {"single", 1}} {
		for range 30 {
			mustSave(t, h, "ledger", agg.id, evs("Booked", 1+rng.IntN(agg.maxBatch)), nil)
		}
		whole, err := h.s.Load(ctx, storage.LoadQuery{AggregateType: "ledger", AggregateID: agg.id})
		if err != nil {
			t.Fatal(err)
		}
		for after := int64(0); after <= whole.Version+1; after++ {
			for _, limit := range []int64{0, 1, 3, 1000} {
				got, err := h.s.Load(ctx, storage.LoadQuery{AggregateType: "ledger", AggregateID: agg.id, AfterVersion: after, Limit: limit})
				if err != nil {
					t.Fatal(err)
				}
				var want, ids []string
				for _, e := range whole.Events {
					if e.Version > after && (limit == 0 || e.Version <= after+limit) {
						want = append(want, e.ID)
					}
				}
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
