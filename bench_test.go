package eventstore_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/benchfold"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/storagetest"
	"github.com/google/uuid"
)

// baseline is the trivial store the benchmarks compare against: a map of
// slices behind a mutex, with no validation, idempotency or feed.
type baseline struct {
	mu   sync.Mutex
	aggs map[string][]eventstore.Event
}

func (b *baseline) save(id string, events []eventstore.NewEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range events {
		b.aggs[id] = append(b.aggs[id], eventstore.Event{ID: e.ID, Type: e.Type, Data: append([]byte(nil), e.Data...)})
	}
}

func (b *baseline) load(id string) []eventstore.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]eventstore.Event(nil), b.aggs[id]...)
}

// batches pre-generates events so that uuid generation is not measured.
func batches(n, size int) [][]eventstore.NewEvent {
	out := make([][]eventstore.NewEvent, n)
	data := []byte(`{"total": 12.5, "sku": "A-1"}`)
	for i := range out {
		out[i] = make([]eventstore.NewEvent, size)
		for j := range out[i] {
			out[i][j] = eventstore.NewEvent{ID: uuid.NewString(), Type: "Placed", Data: data}
		}
	}
	return out
}

// BenchmarkSave measures saves of batches of 1, 10 and 100 events, rotating
// over 1,000 aggregates, against the baseline. The input is made just in
// time, in chunks outside the timer, so that it is warm in the cache as a
// request's freshly decoded body would be.
func BenchmarkSave(b *testing.B) {
	ctx := context.Background()
	for _, size := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("store/batch=%d", size), func(b *testing.B) {
			st, _ := eventstore.New(memory.New(), nil)
			defer st.Close()
			benchSaves(b, size, func(i int, batch []eventstore.NewEvent) {
				if _, err := st.Save(ctx, "order", aggIDs[i%len(aggIDs)], batch, nil); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(fmt.Sprintf("baseline/batch=%d", size), func(b *testing.B) {
			bl := &baseline{aggs: map[string][]eventstore.Event{}}
			benchSaves(b, size, func(i int, batch []eventstore.NewEvent) {
				bl.save(aggIDs[i%len(aggIDs)], batch)
			})
		})
	}
}

// BenchmarkSaveNewAggregate measures saves of one event that each create
// an aggregate, as every new order or account does.
func BenchmarkSaveNewAggregate(b *testing.B) {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	benchSaves(b, 1, func(i int, batch []eventstore.NewEvent) {
		if _, err := st.Save(ctx, "order", "o"+strconv.Itoa(i), batch, nil); err != nil {
			b.Fatal(err)
		}
	})
}

var aggIDs = func() []string {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprint(i)
	}
	return ids
}()

// benchSaves calls save b.N times with batches of size events, made in
// chunks of 256 batches outside the timer, and reports events/s.
func benchSaves(b *testing.B, size int, save func(i int, batch []eventstore.NewEvent)) {
	b.ReportAllocs()
	b.ResetTimer()
	var chunk [][]eventstore.NewEvent
	for i := range b.N {
		if i%256 == 0 {
			b.StopTimer()
			chunk = batches(256, size)
			b.StartTimer()
		}
		save(i, chunk[i%256])
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "events/s")
}

func BenchmarkLoad1000(b *testing.B) {
	ctx := context.Background()
	// 100,000 events: the loaded aggregate's 1,000 and 99,000 in others.
	// Each side builds its own store, so neither's heap burdens the other's
	// garbage collection.
	fill := func(save func(id string, batch []eventstore.NewEvent)) {
		for i, batch := range batches(1000, 100) {
			id := fmt.Sprint("other-", i)
			if i < 10 {
				id = "target"
			}
			save(id, batch)
		}
		runtime.GC()
	}
	b.Run("store", func(b *testing.B) {
		st, _ := eventstore.New(memory.New(), nil)
		defer st.Close()
		fill(func(id string, batch []eventstore.NewEvent) {
			if _, err := st.Save(ctx, "order", id, batch, nil); err != nil {
				b.Fatal(err)
			}
		})
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			agg, err := st.Load(ctx, "order", "target")
			if err != nil || len(agg.Events) != 1000 {
				b.Fatal(err, len(agg.Events))
			}
		}
	})
	b.Run("baseline", func(b *testing.B) {
		bl := &baseline{aggs: map[string][]eventstore.Event{}}
		fill(bl.save)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if len(bl.load("target")) != 1000 {
				b.Fatal("short")
			}
		}
	})
}

// BenchmarkProjection measures applying the feed to a new definition with
// set, add and inc (three function applications per event), for a single
// and an aggregated projection, over 100,000 stored events.
func BenchmarkProjection(b *testing.B) {
	ctx := context.Background()
	const events = 100_000
	for _, aggregated := range []bool{false, true} {
		name := "single"
		if aggregated {
			name = "aggregated"
		}
		b.Run(name, func(b *testing.B) {
			st, _ := eventstore.New(memory.New(), nil)
			defer st.Close()
			for i, batch := range batches(events/100, 100) {
				if _, err := st.Save(ctx, "order", fmt.Sprint(i%100), batch, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			storagetest.BenchmarkRebuild(b, st, "order", "Placed", events, aggregated)
		})
	}
}

// BenchmarkRebuildInGo rebuilds over 100,000 stored events a projection
// in Go (typed: benchfold.Typed; hook: storagetest.RebuildCode on the
// root package's hook alone) and the same fold in the function
// language, alternating in one run, and reports their ratio
// (go/functions-x), for a single and an aggregated projection.
func BenchmarkRebuildInGo(b *testing.B) {
	ctx := context.Background()
	const events = 100_000
	for _, aggregated := range []bool{false, true} {
		name := "single"
		if aggregated {
			name = "aggregated"
		}
		b.Run(name, func(b *testing.B) {
			ms := memory.New()
			st, _ := eventstore.New(ms, nil)
			defer st.Close()
			for i, batch := range batches(events/100, 100) {
				if _, err := st.Save(ctx, "order", fmt.Sprint(i%100), batch, nil); err != nil {
					b.Fatal(err)
				}
			}
			benchfold.RebuildInGo(b, ms, events, aggregated)
		})
	}
}
