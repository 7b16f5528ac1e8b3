package memory_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/google/uuid"
)

// BenchmarkWriters repeats the append and contended workloads of the
// bench module (bench/harness.go) in one test binary: w writers saving
// batches of n events, each to an aggregate of its own ("append") or all
// to one aggregate with optimistic concurrency, a loser reading what it
// missed with LoadRange before retrying ("contended"). "ours" is an
// eventstore.Store on this backend, "raw" a copy of the bench module's map
// and mutex baseline. Compare the two from one run:
//
//	go test ./storage/memory -run '^$' -bench Writers -count 3
func BenchmarkWriters(b *testing.B) {
	for _, mode := range []string{"append", "contended"} {
		for _, n := range []int{1, 10} {
			for _, w := range []int{1, 8, 32} {
				for _, subj := range []string{"ours", "raw"} {
					b.Run(fmt.Sprintf("%s/%dev/%dw/%s", mode, n, w, subj), func(b *testing.B) {
						var s writer
						if subj == "ours" {
							st, err := eventstore.New(memory.New(), nil)
							if err != nil {
								b.Fatal(err)
							}
							defer st.Close()
							s = oursWriter{st}
						} else {
							s = newRawWriter()
						}
						runWriters(b, s, mode == "contended", w, n)
					})
				}
			}
		}
	}
}

// writer is one subject of BenchmarkWriters, as in bench/harness.go.
type writer interface {
	append(ctx context.Context, agg string, expected int64, n int) (int64, error)
	refresh(ctx context.Context, agg string, known int64) (int64, error)
}

var errBenchConflict = errors.New("conflict")

// runWriters makes b.N saves from w goroutines and reports events/s and
// the CPU time of the process per save (cpu-ns/op), which the other users
// of a shared machine disturb less than the wall time.
func runWriters(b *testing.B, s writer, contended bool, w, n int) {
	ctx := context.Background()
	cpu0 := cpuTime()
	var next, stored atomic.Int64
	var wg sync.WaitGroup
	shared := uuid.NewString()
	b.ResetTimer()
	for range w {
		wg.Go(func() {
			agg := uuid.NewString()
			if contended {
				agg = shared
			}
			var v int64
			for next.Add(1) <= int64(b.N) {
				nv, err := s.append(ctx, agg, v, n)
				for errors.Is(err, errBenchConflict) {
					if v, err = s.refresh(ctx, agg, v); err == nil {
						nv, err = s.append(ctx, agg, v, n)
					}
				}
				if err != nil {
					b.Error(err)
					return
				}
				v = nv
				stored.Add(int64(n))
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(stored.Load())/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

var benchData = []byte(`{"amount":1250,"note":"benchmark event"}`)

type oursWriter struct{ st *eventstore.Store }

func (o oursWriter) append(ctx context.Context, agg string, expected int64, n int) (int64, error) {
	events := make([]eventstore.NewEvent, n)
	for i := range events {
		events[i] = eventstore.NewEvent{ID: uuid.NewString(), Type: "Deposited", Data: benchData}
	}
	res, err := o.st.Save(ctx, "acct", agg, events, &eventstore.SaveOptions{ExpectedVersion: storage.ExpectVersion(expected)})
	if errors.Is(err, storage.ErrConflict) {
		return 0, errBenchConflict
	}
	return res.Version, err
}

func (o oursWriter) refresh(ctx context.Context, agg string, known int64) (int64, error) {
	a, _, err := o.st.LoadRange(ctx, "acct", agg, known, 0)
	return a.Version, err
}

// rawWriter is the mapStore of bench/memory.go (append and refresh).
type rawWriter struct {
	mu   sync.RWMutex
	aggs map[string][]int
	all  []rawEvent
}

type rawEvent struct {
	id, typ, agg string
	data         []byte
	version      int64
	recordedAt   time.Time
}

func newRawWriter() *rawWriter { return &rawWriter{aggs: make(map[string][]int)} }

func (m *rawWriter) append(_ context.Context, agg string, expected int64, n int) (int64, error) {
	events := make([]rawEvent, n)
	now := time.Now().UTC()
	for i := range events {
		events[i] = rawEvent{id: uuid.NewString(), typ: "Deposited", agg: agg, data: slices.Clone(benchData), recordedAt: now}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	idx := m.aggs[agg]
	var cur int64
	if len(idx) > 0 {
		cur = m.all[idx[len(idx)-1]].version
	}
	if cur != expected {
		return 0, errBenchConflict
	}
	for i := range events {
		events[i].version = cur + 1
		idx = append(idx, len(m.all))
		m.all = append(m.all, events[i])
	}
	m.aggs[agg] = idx
	return cur + 1, nil
}

func (m *rawWriter) refresh(_ context.Context, agg string, known int64) (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	v := known
	var missed []rawEvent
	for _, j := range m.aggs[agg] {
		if e := m.all[j]; e.version > known {
			missed = append(missed, e)
			v = e.version
		}
	}
	_ = missed
	return v, nil
}
