package storagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

// Sizes of the benchmark workloads.
const (
	benchAggregates = 100     // aggregates the Save benchmarks rotate over
	loadStoreSize   = 100_000 // events in the store of Load1000
	loadAggSize     = 1_000   // events of the aggregate Load1000 loads
	scanSize        = 10_000  // events FeedScan reads per iteration
	scanPage        = 500     // Limit of FeedScan's reads
)

// benchData is the payload of every benchmark event.
const benchData = `{"amount":"12.50","currency":"EUR","note":"benchmark event"}`

// RunBenchmarks runs the same workloads on any backend, through
// eventstore.Store where users would:
//
//   - Save/1, Save/10, Save/100: saves of batches of 1, 10 and 100 events,
//     rotating over 100 aggregates; reports events/s.
//   - Load1000: loads a 1,000-event aggregate from a store holding 100,000
//     events; reports ns/load.
//   - FeedScan: reads a 10,000-event feed from the start in pages of 500;
//     reports events/s.
//   - Search: ListProjections with Search finding 100 of 100,000
//     instances (one word, a rare and a common word, sorted by reference,
//     the count); reports ms/search.
//   - RebuildIndexed: rebuilds a projection of 5,000 instances over 20,000
//     events with and without indexedFields, alternately; reports the
//     time of each and their ratio.
//
// Every sub-benchmark gets a fresh Storage from newStorage and sets up its
// data once, outside the timed loop.
func RunBenchmarks(b *testing.B, newStorage func(tb testing.TB) storage.Storage) {
	b.Run("Save", func(b *testing.B) {
		for _, n := range []int{1, 10, 100} {
			b.Run(strconv.Itoa(n), func(b *testing.B) { benchSave(b, newStorage, n) })
		}
	})
	b.Run("Load1000", func(b *testing.B) { benchLoad(b, newStorage) })
	b.Run("FeedScan", func(b *testing.B) { benchFeedScan(b, newStorage) })
	b.Run("Search", func(b *testing.B) { benchSearch(b, newStorage) })
	b.Run("RebuildIndexed", func(b *testing.B) { benchRebuildIndexed(b, newStorage) })
}

// benchStore returns a Store on a fresh Storage, closed when b ends.
func benchStore(b *testing.B, newStorage func(tb testing.TB) storage.Storage) *eventstore.Store {
	b.Helper()
	s := newStorage(b)
	store, err := eventstore.New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	return store
}

// idGen makes distinct, valid event ids cheaply, so that the benchmarks
// measure the store rather than the random number generator.
type idGen struct {
	n    uint64
	data json.RawMessage
}

func newIDGen() *idGen { return &idGen{data: json.RawMessage(benchData)} }

func (g *idGen) next() string {
	g.n++
	const hex = "0123456789abcdef"
	b := []byte("00000000-0000-4000-8000-000000000000")
	n := g.n
	for i := len(b) - 1; n > 0 && i >= 24; i-- {
		b[i] = hex[n&15]
		n >>= 4
	}
	return string(b)
}

// batch returns n events with fresh ids, reusing buf.
func (g *idGen) batch(buf []eventstore.NewEvent, n int) []eventstore.NewEvent {
	buf = buf[:0]
	for range n {
		buf = append(buf, eventstore.NewEvent{ID: g.next(), Type: "BenchmarkHappened", Data: g.data})
	}
	return buf
}

func aggIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("agg-%d", i)
	}
	return ids
}

func benchSave(b *testing.B, newStorage func(tb testing.TB) storage.Storage, n int) {
	store := benchStore(b, newStorage)
	ctx := context.Background()
	ids := aggIDs(benchAggregates)
	g := newIDGen()
	buf := make([]eventstore.NewEvent, 0, n)
	i := 0
	for b.Loop() {
		buf = g.batch(buf, n)
		if _, err := store.Save(ctx, "bench", ids[i%len(ids)], buf, nil); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
}

func benchLoad(b *testing.B, newStorage func(tb testing.TB) storage.Storage) {
	store := benchStore(b, newStorage)
	ctx := context.Background()
	g := newIDGen()
	const batch = 100
	buf := make([]eventstore.NewEvent, 0, batch)
	// The target's saves are spread over the whole store.
	every := loadStoreSize / loadAggSize
	for k := range loadStoreSize / batch {
		id := fmt.Sprintf("other-%d", k%97)
		if k%every == every/2 {
			id = "target"
		}
		if _, err := store.Save(ctx, "bench", id, g.batch(buf, batch), nil); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		agg, err := store.Load(ctx, "bench", "target")
		if err != nil {
			b.Fatal(err)
		}
		if len(agg.Events) != loadAggSize {
			b.Fatalf("the target aggregate has %d events, want %d", len(agg.Events), loadAggSize)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/load")
}

func benchFeedScan(b *testing.B, newStorage func(tb testing.TB) storage.Storage) {
	s := newStorage(b)
	store, err := eventstore.New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	g := newIDGen()
	const batch = 100
	buf := make([]eventstore.NewEvent, 0, batch)
	for k := range scanSize / batch {
		if _, err := store.Save(ctx, "bench", fmt.Sprintf("agg-%d", k%10), g.batch(buf, batch), nil); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		q := storage.FeedQuery{Limit: scanPage}
		read := 0
		for {
			page, err := s.ReadFeed(ctx, q)
			if err != nil {
				b.Fatal(err)
			}
			read += len(page.Events)
			if len(page.Events) == 0 && page.Head == q.After {
				break
			}
			q.After = page.Head
		}
		if read != scanSize {
			b.Fatalf("the feed scan read %d events, want %d", read, scanSize)
		}
	}
	b.ReportMetric(float64(b.N*scanSize)/b.Elapsed().Seconds(), "events/s")
}
