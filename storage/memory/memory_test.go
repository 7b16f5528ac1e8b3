package memory_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/storagetest"
)

func newMemory(testing.TB) storage.Storage { return memory.New() }

func TestConformance(t *testing.T) {
	storagetest.Run(t, newMemory)
}

// BenchmarkMemory runs the shared backend benchmarks on the memory backend.
// Compare with BenchmarkBaseline, which does the same work on a bare map
// and mutex, from the same run:
//
//	go test -run='^$' -bench=. -benchmem ./storage/memory/
func BenchmarkMemory(b *testing.B) {
	storagetest.RunBenchmarks(b, newMemory)
}

// baseline is the least a store can do for the benchmark workloads: a map
// of aggregates and a global log behind one mutex, with no validation, no
// idempotency and no version check. It copies data in and out, as the
// memory backend must.
type baseline struct {
	mu   sync.Mutex
	aggs map[[2]string][]storage.Event
	log  []storage.Event
}

func (s *baseline) save(typ, id string, events []eventstore.NewEvent) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [2]string{typ, id}
	agg := s.aggs[k]
	var version int64 = 1
	if len(agg) > 0 {
		version = agg[len(agg)-1].Version + 1
	}
	for _, e := range events {
		stored := storage.Event{
			ID: e.ID, Type: e.Type, Data: slices.Clone(e.Data),
			AggregateType: typ, AggregateID: id,
			Version: version, Sequence: int64(len(agg)) + 1, Position: int64(len(s.log)) + 1,
			RecordedAt: now,
		}
		agg = append(agg, stored)
		s.log = append(s.log, stored)
	}
	s.aggs[k] = agg
}

func copyOut(src []storage.Event) []storage.Event {
	out := slices.Clone(src)
	for i := range out {
		out[i].Data = slices.Clone(out[i].Data)
	}
	return out
}

func (s *baseline) load(typ, id string) []storage.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyOut(s.aggs[[2]string{typ, id}])
}

func (s *baseline) read(after int64, limit int) []storage.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	end := min(int64(len(s.log)), after+int64(limit))
	if after >= end {
		return nil
	}
	return copyOut(s.log[after:end])
}

// ids makes distinct event ids the way storagetest's benchmarks do.
type ids struct{ n uint64 }

func (g *ids) batch(buf []eventstore.NewEvent, n int, data json.RawMessage) []eventstore.NewEvent {
	const hex = "0123456789abcdef"
	buf = buf[:0]
	for range n {
		g.n++
		b := []byte("00000000-0000-4000-8000-000000000000")
		v := g.n
		for i := len(b) - 1; v > 0 && i >= 24; i-- {
			b[i] = hex[v&15]
			v >>= 4
		}
		buf = append(buf, eventstore.NewEvent{ID: string(b), Type: "BenchmarkHappened", Data: data})
	}
	return buf
}

// BenchmarkBaseline runs BenchmarkMemory's workloads on the baseline, with
// the same sub-benchmark names and sizes.
func BenchmarkBaseline(b *testing.B) {
	data := json.RawMessage(`{"amount":"12.50","currency":"EUR","note":"benchmark event"}`)
	aggs := make([]string, 100)
	for i := range aggs {
		aggs[i] = fmt.Sprintf("agg-%d", i)
	}
	fill := func(events, batch int, id func(k int) string) *baseline {
		s := &baseline{aggs: make(map[[2]string][]storage.Event)}
		var g ids
		buf := make([]eventstore.NewEvent, 0, batch)
		for k := range events / batch {
			s.save("bench", id(k), g.batch(buf, batch, data))
		}
		return s
	}
	b.Run("Save", func(b *testing.B) {
		for _, n := range []int{1, 10, 100} {
			b.Run(strconv.Itoa(n), func(b *testing.B) {
				s := fill(0, 1, nil)
				var g ids
				buf := make([]eventstore.NewEvent, 0, n)
				i := 0
				for b.Loop() {
					s.save("bench", aggs[i%len(aggs)], g.batch(buf, n, data))
					i++
				}
				b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
			})
		}
	})
	b.Run("Load1000", func(b *testing.B) {
		s := fill(100_000, 100, func(k int) string {
			if k%100 == 50 {
				return "target"
			}
			return fmt.Sprintf("other-%d", k%97)
		})
		for b.Loop() {
			if n := len(s.load("bench", "target")); n != 1000 {
				b.Fatalf("loaded %d events, want 1000", n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/load")
	})
	b.Run("FeedScan", func(b *testing.B) {
		s := fill(10_000, 100, func(k int) string { return aggs[k%10] })
		for b.Loop() {
			var after int64
			read := 0
			for {
				page := s.read(after, 500)
				if len(page) == 0 {
					break
				}
				read += len(page)
				after = page[len(page)-1].Position
			}
			if read != 10_000 {
				b.Fatalf("read %d events, want 10000", read)
			}
		}
		b.ReportMetric(float64(b.N*10_000)/b.Elapsed().Seconds(), "events/s")
	})
}

// The baseline must keep the invariants it is compared on.
func TestBaseline(t *testing.T) {
	s := &baseline{aggs: make(map[[2]string][]storage.Event)}
	var g ids
	data := json.RawMessage(`{"a":1}`)
	s.save("t", "x", g.batch(nil, 3, data))
	s.save("t", "x", g.batch(nil, 2, data))
	got := s.load("t", "x")
	if len(got) != 5 || got[4].Version != 2 || got[4].Sequence != 5 || got[4].Position != 5 {
		t.Fatalf("baseline stored %+v", got)
	}
	if feed := s.read(3, 10); len(feed) != 2 || feed[0].Position != 4 {
		t.Fatalf("baseline feed after 3: %+v", feed)
	}
}

// TestSpaces: a memory storage per name is a space of its own, as package
// tenancy keeps memory tenants.
func TestSpaces(t *testing.T) {
	storagetest.RunSpaces(t, func(testing.TB) storagetest.Spaces {
		return storagetest.Spaces{Open: func(tb testing.TB, _ string) storage.Storage { return memory.New() }}
	})
}
