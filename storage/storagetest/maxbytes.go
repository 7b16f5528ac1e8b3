package storagetest

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func maxBytesCases() []testCase {
	return []testCase{
		{"LoadMaxBytes", "with LoadQuery.MaxBytes, Load returns the shortest run of whole versions of the unbounded answer whose events reach MaxBytes (EventBytes: Data, EncryptedData and encoded Metadata), or all of it when they do not; never an empty answer when the range holds a version", testLoadMaxBytes},
		{"FeedMaxBytes", "with FeedQuery.MaxBytes, ReadFeed returns the shortest start of the unbounded page whose events reach MaxBytes (EventBytes: Data, EncryptedData and encoded Metadata), or all of it; Truncated is set exactly when that is shorter, with Head at its last event; paging with After = Head reads the same feed as without a budget", testFeedMaxBytes},
	}
}

// sizedEvents returns n events of type typ whose data, encrypted data and
// metadata have sizes drawn from rng, from a few bytes to a few KiB.
func sizedEvents(rng *rand.Rand, typ string, n int) []eventstore.NewEvent {
	out := make([]eventstore.NewEvent, n)
	for i := range out {
		out[i] = ev(typ, fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", rng.IntN(3000))))
		if rng.IntN(4) == 0 {
			out[i].EncryptedData = strings.Repeat("e", 1+rng.IntN(500))
		}
		if rng.IntN(3) == 0 {
			out[i].Metadata = eventstore.Metadata{CorrelationID: fmt.Sprint("c-", i),
				Values: map[string]string{"pad": strings.Repeat("m", rng.IntN(3000))}}
		}
	}
	return out
}

// budgetCut returns how many of events a reader with budget max keeps:
// units of events (whole versions when byVersion, else single events) up
// to and including the first with which the total reaches max.
func budgetCut(events []storage.Event, max int64, byVersion bool) int {
	var total int64
	for i := range events {
		total += storage.EventBytes(&events[i])
		last := i == len(events)-1 || !byVersion || events[i+1].Version != events[i].Version
		if total >= max && last {
			return i + 1
		}
	}
	return len(events)
}

func testLoadMaxBytes(t *testing.T, h *harness) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(7, 11))
	for range 12 {
		mustSave(t, h, "doc", "d", sizedEvents(rng, "Edited", 1+rng.IntN(4)), nil)
	}
	mustSave(t, h, "doc", "tiny", evs("Edited", 1), nil)
	full := mustLoad(t, h, "doc", "d")
	for _, after := range []int64{0, 1, 5, 11, 12} {
		for _, limit := range []int64{0, 1, 3, 20} {
			q := storage.LoadQuery{AggregateType: "doc", AggregateID: "d", AfterVersion: after, Limit: limit}
			want, err := h.s.Load(ctx, q)
			if err != nil {
				t.Fatalf("Load %+v: %v", q, err)
			}
			for _, budget := range []int64{1, 100, 2500, 6000, 1 << 40} {
				q.MaxBytes = budget
				got, err := h.s.Load(ctx, q)
				if err != nil {
					t.Fatalf("Load %+v: %v", q, err)
				}
				if got.Version != full.Version {
					t.Errorf("Load %+v must still report the current version %d, got %d", q, full.Version, got.Version)
				}
				n := budgetCut(want.Events, budget, true)
				if msg := sameEvents(got.Events, want.Events[:n]); msg != "" {
					t.Errorf("Load %+v must return the first %d of the %d events of the unbounded answer (whole versions up to %d bytes): %s",
						q, n, len(want.Events), budget, msg)
				}
			}
		}
	}
	// A budget smaller than one event still returns the whole version.
	agg, err := h.s.Load(ctx, storage.LoadQuery{AggregateType: "doc", AggregateID: "tiny", MaxBytes: 1})
	if err != nil || len(agg.Events) != 1 {
		t.Errorf("Load of a one-event aggregate with MaxBytes 1 must return its event, got %d events, %v", len(agg.Events), err)
	}
}

func testFeedMaxBytes(t *testing.T, h *harness) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range 30 {
		typ := []string{"doc", "note"}[i%2]
		mustSave(t, h, typ, fmt.Sprint("a", rng.IntN(5)), sizedEvents(rng, "Edited", 1+rng.IntN(3)), nil)
	}
	docs, _ := mustReadAll(t, h, storage.FeedQuery{AggregateType: "doc", Limit: 100})
	queries := []storage.FeedQuery{
		{Limit: 10},
		{Limit: 1000},
		{After: 7, Limit: 25},
		{AggregateType: "doc", Limit: 8},
		{AggregateType: "note", After: 12, Limit: 100},
		{AggregateType: "doc", AfterFeedSequence: nthFeedSeq(t, docs, "doc", 3), Limit: 6}, // after the type's 4th batch
	}
	for _, q := range queries {
		want, err := h.s.ReadFeed(ctx, q)
		if err != nil {
			t.Fatalf("ReadFeed %+v: %v", q, err)
		}
		for _, budget := range []int64{1, 700, 4000, 20000, 1 << 40} {
			bq := q
			bq.MaxBytes = budget
			got, err := h.s.ReadFeed(ctx, bq)
			if err != nil {
				t.Fatalf("ReadFeed %+v: %v", bq, err)
			}
			if err := checkPage(bq, got); err != nil {
				t.Error(err)
				continue
			}
			n := budgetCut(want.Events, budget, false)
			if msg := sameEvents(got.Events, want.Events[:n]); msg != "" {
				t.Errorf("ReadFeed %+v must return the first %d of the %d events of the unbounded page: %s", bq, n, len(want.Events), msg)
				continue
			}
			switch cut := n < len(want.Events); {
			case got.Truncated != cut:
				t.Errorf("ReadFeed %+v returned %d of the unbounded page's %d events with Truncated %v, want %v", bq, n, len(want.Events), got.Truncated, cut)
			case cut && got.Head != got.Events[n-1].Position:
				t.Errorf("ReadFeed %+v was truncated: Head must be its last event's position %d, got %d", bq, got.Events[n-1].Position, got.Head)
			case !cut && got.Head != want.Head:
				t.Errorf("ReadFeed %+v was not truncated: Head must be that of the unbounded page, %d, got %d", bq, want.Head, got.Head)
			}
		}
	}
	for _, q := range []storage.FeedQuery{{Limit: 50}, {AggregateType: "note", Limit: 50}} {
		all, head := mustReadAll(t, h, q)
		q.MaxBytes = 3000
		bounded, boundedHead := mustReadAll(t, h, q)
		if msg := sameEvents(bounded, all); msg != "" || boundedHead != head {
			t.Errorf("paging through the feed %+v must read what it reads without a budget (%d events up to %d), got %d events up to %d: %s",
				q, len(all), head, len(bounded), boundedHead, msg)
		}
	}
}
