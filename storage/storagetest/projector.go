package storagetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func projectorCases() []testCase {
	return []testCase{
		{"ProjectorAppliesEachEventOnce", "two Projectors sharing the storage while writers save apply every event exactly once: counts and sums equal what was saved", testProjector},
	}
}

// number reads a numeric field of a projection, written as a JSON number
// or as a string holding a decimal.
func number(data json.RawMessage, field string) (int64, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return 0, err
	}
	raw, ok := m[field]
	if !ok {
		return 0, fmt.Errorf("no field %q in %s", field, data)
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	return strconv.ParseInt(s, 10, 64)
}

func testProjector(t *testing.T, h *harness) {
	const writers, saves = 4, 15
	ctx := t.Context()
	defs := []eventstore.Definition{
		{Name: "totals", Feed: "account", Aggregated: true, Handlers: []eventstore.Handler{{
			EventType: "Deposited",
			Functions: []eventstore.Function{
				{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"},
				{Name: eventstore.FuncAdd, TargetSelector: "$.projection.total", EventSelector: "$.event.amount"},
			},
		}}},
		{Name: "perAccount", Feed: "account", Handlers: []eventstore.Handler{{
			EventType: "Deposited",
			Functions: []eventstore.Function{{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"}},
		}}},
	}
	// A second Store on the same storage stands for another process.
	other, err := eventstore.New(h.s, nil)
	if err != nil {
		t.Fatal(err)
	}
	projectors := []*eventstore.Projector{eventstore.NewProjector(h.store, nil), eventstore.NewProjector(other, nil)}
	for _, d := range defs {
		if err := projectors[0].Create(ctx, d); err != nil {
			t.Fatalf("Create %s: %v", d.Name, err)
		}
	}

	done := make(chan struct{})
	queryErrs := make(chan error, 2)
	var readers sync.WaitGroup
	for _, p := range projectors {
		readers.Go(func() {
			for {
				select {
				case <-done:
					queryErrs <- nil
					return
				default:
				}
				// Not found until the first deposit is applied.
				if _, err := p.Aggregated(ctx, "totals"); err != nil && !errors.Is(err, storage.ErrNotFound) {
					queryErrs <- err
					return
				}
			}
		})
	}
	type saved struct {
		id            string
		events, total int64
	}
	results := make(chan saved, writers*saves)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range saves {
				id := fmt.Sprintf("acct-%d", (w+i)%3)
				n := 1 + (w+i)%2
				batch := make([]eventstore.NewEvent, n)
				var total int64
				for j := range batch {
					amount := int64(1 + (w*saves+i+j)%5)
					total += amount
					batch[j] = ev("Deposited", fmt.Sprintf(`{"amount":%d}`, amount))
				}
				if _, err := h.store.Save(ctx, "account", id, batch, nil); err != nil {
					t.Errorf("save: %v", err)
					continue
				}
				results <- saved{id, int64(n), total}
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	close(results)
	close(queryErrs)
	for err := range queryErrs {
		if err != nil {
			t.Errorf("a projection query during concurrent saves failed: %v", err)
		}
	}
	var count, total int64
	perAccount := make(map[string]int64)
	for r := range results {
		count += r.events
		total += r.total
		perAccount[r.id] += r.events
	}
	for i, p := range projectors {
		agg, err := p.Aggregated(ctx, "totals")
		if err != nil {
			t.Fatalf("projector %d: Aggregated: %v", i, err)
		}
		gotCount, err1 := number(agg.Data, "count")
		gotTotal, err2 := number(agg.Data, "total")
		if err1 != nil || err2 != nil || gotCount != count || gotTotal != total {
			t.Errorf("projector %d: every event must be applied exactly once: totals is %s, want count %d and total %d", i, agg.Data, count, total)
		}
		for id, want := range perAccount {
			single, err := p.Single(ctx, "perAccount", id)
			if err != nil {
				t.Errorf("projector %d: Single perAccount/%s: %v", i, id, err)
				continue
			}
			if got, err := number(single.Data, "count"); err != nil || got != want {
				t.Errorf("projector %d: perAccount/%s must count each of its events once: got %s, want count %d", i, id, single.Data, want)
			}
		}
	}
}
