package storagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

// Sizes of the search benchmarks.
const (
	searchInstances = 100_000 // instances of the searched projection
	searchMatches   = 100     // of them hold the rare word
	rebuildAggs     = 5_000   // aggregates (instances) of RebuildIndexed
	rebuildEvents   = 4       // events per aggregate of RebuildIndexed
)

// syllables make the benchmarks' words: names of two or three of them
// ("kalo", "mirusa"), so that short prefixes such as "ka" or "lo" match
// many words, as a user's first letters do.
var syllables = [...]string{"ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "bi", "pe", "ri", "da"}

// benchWord returns the k-th word of n syllables.
func benchWord(k, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(syllables[k%len(syllables)])
		k /= len(syllables)
	}
	return b.String()
}

// benchSearch measures ListProjections with Search on a projection of
// 100,000 instances, each indexed with a first name, a surname, a city
// and a customer number; 100 of them also hold the word "zanzibar".
func benchSearch(b *testing.B, newStorage func(tb testing.TB) storage.Storage) {
	s := newStorage(b)
	b.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	if err := s.CreateDefinition(ctx, newDef("p")); err != nil {
		b.Fatal(err)
	}
	const page = 1_000
	states := make([]storage.ProjectionState, 0, page)
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var from int64
	for i := range searchInstances {
		text := benchWord(i*7919%144, 2) + " " + benchWord(i*104729%1728, 3) + " " + benchWord(i%50, 3) + " c" + strconv.Itoa(i)
		if i%(searchInstances/searchMatches) == 0 {
			text += " zanzibar"
		}
		states = append(states, storage.ProjectionState{
			Name: "p", InstanceID: fmt.Sprintf("i%06d", i), Data: json.RawMessage(`{"total":"12.50"}`),
			Position: from + 1, CreatedAt: at, UpdatedAt: at,
			Reference:  storage.Reference{Kind: storage.RefNumber, Number: float64(i % 977), Text: strconv.Itoa(i % 977)},
			SearchText: text,
		})
		if len(states) == page {
			if err := s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: from, To: from + 1, States: states, Indexed: true}); err != nil {
				b.Fatal(err)
			}
			from++
			states = states[:0]
		}
	}
	for _, c := range []struct {
		name  string
		q     storage.ProjectionQuery
		total int64
	}{
		{"one-word", storage.ProjectionQuery{Name: "p", Search: []string{"zanz"}, Limit: 100}, searchMatches},
		{"rare-and-common-word", storage.ProjectionQuery{Name: "p", Search: []string{"zanz", "ka"}, Limit: 100}, -1},
		{"sorted-by-reference", storage.ProjectionQuery{Name: "p", Search: []string{"zanzibar"}, Sort: storage.SortByReference, Descending: true, Limit: 100}, searchMatches},
		{"count", storage.ProjectionQuery{Name: "p", Search: []string{"zanz"}}, searchMatches},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				list, err := s.ListProjections(ctx, c.q)
				if err != nil || (c.total >= 0 && list.Total != c.total) || (c.q.Limit > 0 && int64(len(list.States)) != list.Total) {
					b.Fatalf("search %q: %d states of %d, %v", c.q.Search, len(list.States), list.Total, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/search")
		})
	}
}

// benchRebuildIndexed rebuilds, from scratch, a single projection of
// 5,000 instances over 20,000 events, alternately with and without
// indexedFields (name and city), and reports the median time of each and
// their ratio, measured in the same run, and the ratio of the process's
// CPU time spent in each.
func benchRebuildIndexed(b *testing.B, newStorage func(tb testing.TB) storage.Storage) {
	store := benchStore(b, newStorage)
	ctx := context.Background()
	batches := make([]eventstore.Batch, 0, 500)
	flush := func() {
		if len(batches) == 0 {
			return
		}
		if _, err := store.SaveAll(ctx, "customer", batches); err != nil {
			b.Fatal(err)
		}
		batches = batches[:0]
	}
	g := newIDGen()
	for i := range rebuildAggs {
		events := make([]eventstore.NewEvent, rebuildEvents)
		for j := range events {
			data := fmt.Sprintf(`{"name":"%s %s","city":"%s","amount":"%d.50"}`,
				strings.ToUpper(benchWord(i+j, 2)[:1])+benchWord(i+j, 2)[1:], benchWord(i*31+j, 3), benchWord(i%50, 3), j)
			events[j] = eventstore.NewEvent{ID: g.next(), Type: "Updated", Data: json.RawMessage(data)}
		}
		batches = append(batches, eventstore.Batch{AggregateID: "c" + strconv.Itoa(i), Events: events})
		if len(batches) == cap(batches) {
			flush()
		}
	}
	flush()
	p := eventstore.NewProjector(store, nil)
	def := func(name string, indexed bool) eventstore.Definition {
		d := eventstore.Definition{Name: name, Feed: "customer", Handlers: []eventstore.Handler{{EventType: "Updated",
			Functions: []eventstore.Function{
				{Name: eventstore.FuncSet, TargetSelector: "$.projection.name", EventSelector: "$.event.name"},
				{Name: eventstore.FuncSet, TargetSelector: "$.projection.city", EventSelector: "$.event.city"},
				{Name: eventstore.FuncAdd, TargetSelector: "$.projection.total", EventSelector: "$.event.amount"},
				{Name: eventstore.FuncInc, TargetSelector: "$.projection.updates"},
			}}}}
		if indexed {
			d.IndexedFields = []string{"name", "$.projection.city"}
		}
		return d
	}
	var plain, indexed []time.Duration
	var plainCPU, indexedCPU time.Duration
	i := 0
	for b.Loop() {
		for _, withIndex := range []bool{i%2 == 0, i%2 != 0} {
			name := fmt.Sprintf("r%d-%v", i, withIndex)
			if err := p.Create(ctx, def(name, withIndex)); err != nil {
				b.Fatal(err)
			}
			start, cpu := time.Now(), cpuTime()
			if err := p.CatchUp(ctx, name); err != nil {
				b.Fatal(err)
			}
			took, tookCPU := time.Since(start), cpuTime()-cpu
			if withIndex {
				indexed, indexedCPU = append(indexed, took), indexedCPU+tookCPU
			} else {
				plain, plainCPU = append(plain, took), plainCPU+tookCPU
			}
			b.StopTimer()
			if err := p.Delete(ctx, name); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		i++
	}
	// Medians: the machine's other load lengthens some rebuilds of
	// either kind; the median of each, alternated, is steadier than
	// the mean.
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	mp, mi := median(plain), median(indexed)
	b.ReportMetric(float64(mp.Microseconds())/1000, "plain-ms")
	b.ReportMetric(float64(mi.Microseconds())/1000, "indexed-ms")
	b.ReportMetric(float64(mi)/float64(mp), "ratio")
	if plainCPU > 0 {
		// This process's CPU time: all of an in-process backend's work
		// (not a database server's), less disturbed by other load.
		b.ReportMetric(float64(indexedCPU)/float64(plainCPU), "cpu-ratio")
	}
}
