package storagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

// RebuildDefinition returns the definition BenchmarkRebuild builds: a
// single (or aggregated) projection of feed with set, add and inc on events
// of type eventType whose data holds "sku" and "total".
func RebuildDefinition(name, feed, eventType string, aggregated bool) eventstore.Definition {
	return eventstore.Definition{Name: name, Feed: feed, Aggregated: aggregated, Handlers: []eventstore.Handler{{
		EventType: eventType, Functions: []eventstore.Function{
			{Name: "set", TargetSelector: "$.projection.sku", EventSelector: "$.event.sku"},
			{Name: "add", TargetSelector: "$.projection.total", EventSelector: "$.event.total"},
			{Name: "inc", TargetSelector: "$.projection.count"},
		},
	}}}
}

// BenchmarkRebuild measures building a new projection from the whole
// history of a feed: each iteration creates a RebuildDefinition and applies
// the events feed already holds, which the caller stored beforehand (events
// of them, of type eventType). It reports events/s and function
// applications/s (three per event).
func BenchmarkRebuild(b *testing.B, st *eventstore.Store, feed, eventType string, events int, aggregated bool) {
	ctx := context.Background()
	p := eventstore.NewProjector(st, nil)
	i := 0
	for b.Loop() {
		i++
		name := fmt.Sprint("rebuild-", i)
		if err := p.Create(ctx, RebuildDefinition(name, feed, eventType, aggregated)); err != nil {
			b.Fatal(err)
		}
		if err := p.CatchUp(ctx, name); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(3*events*b.N)/b.Elapsed().Seconds(), "funcs/s")
}

// BenchmarkRebuildInGo measures the rebuild of a projection in Go against
// that of the same fold in the function language (RebuildDefinition), over
// the events feed of s already holds (events of them, of type eventType,
// their data holding "sku" and "total"). Each iteration rebuilds both, one
// after the other, alternating which goes first, so that both see the
// same load of a shared machine; code returns the projection in Go, named
// name, of feed and eventType. It reports the events/s of each and their
// ratio (go/functions-x), the figure of the comparison, and how each
// rebuild's time splits per event (go-… and functions-…, ns/event): the
// storage's ReadFeed (read), LoadProjections (load) and CommitProjection
// (commit), timed around the calls, and the rest (apply: decoding,
// folding and encoding the instances, and the Projector's bookkeeping).
func BenchmarkRebuildInGo(b *testing.B, s storage.Storage, feed, eventType string, events int, aggregated bool, code func(name string) eventstore.CodeProjection) {
	ctx := context.Background()
	ts := &timedStorage{Storage: s}
	st, err := eventstore.New(ts, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close() // not s: timedStorage.Close leaves it open
	p := eventstore.NewProjector(st, nil)
	var inGo, inFunctions rebuildSplit
	defs, err := p.Definitions(ctx)
	if err != nil {
		b.Fatal(err)
	}
	i := len(defs) // names not taken by an earlier run on s
	rebuild := func(sum *rebuildSplit, name string, register func() error) {
		before := ts.split()
		start := time.Now()
		if err := register(); err != nil {
			b.Fatal(err)
		}
		if err := p.CatchUp(ctx, name); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		sum.add(took, ts.split().minus(before))
		s, err := p.Status(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Errors) > 0 || s.Instances == 0 {
			b.Fatalf("projection %s: %d instances, errors %v", name, s.Instances, s.Errors)
		}
	}
	for b.Loop() {
		i++
		goName, fnName := fmt.Sprint("go-", i), fmt.Sprint("functions-", i)
		viaGo := func() {
			rebuild(&inGo, goName, func() error { return p.Register(ctx, code(goName)) })
		}
		viaFunctions := func() {
			rebuild(&inFunctions, fnName, func() error { return p.Create(ctx, RebuildDefinition(fnName, feed, eventType, aggregated)) })
		}
		if i%2 == 0 {
			viaGo()
			viaFunctions()
		} else {
			viaFunctions()
			viaGo()
		}
	}
	n := float64(events * b.N)
	b.ReportMetric(n/inGo.total.Seconds(), "go-events/s")
	b.ReportMetric(n/inFunctions.total.Seconds(), "functions-events/s")
	b.ReportMetric(inFunctions.total.Seconds()/inGo.total.Seconds(), "go/functions-x")
	inGo.report(b, "go-", n)
	inFunctions.report(b, "functions-", n)
}

// rebuildSplit is the time of rebuilds, whole and per storage call.
type rebuildSplit struct {
	total, read, load, commit time.Duration
}

func (r *rebuildSplit) add(total time.Duration, calls rebuildSplit) {
	r.total += total
	r.read += calls.read
	r.load += calls.load
	r.commit += calls.commit
}

func (r rebuildSplit) minus(o rebuildSplit) rebuildSplit {
	return rebuildSplit{read: r.read - o.read, load: r.load - o.load, commit: r.commit - o.commit}
}

// report reports the split per event, of n events.
func (r rebuildSplit) report(b *testing.B, prefix string, n float64) {
	apply := r.total - r.read - r.load - r.commit
	for _, m := range []struct {
		d    time.Duration
		name string
	}{{r.read, "read"}, {r.load, "load"}, {r.commit, "commit"}, {apply, "apply"}} {
		b.ReportMetric(float64(m.d.Nanoseconds())/n, prefix+m.name+"-ns/event")
	}
}

// timedStorage sums the time of the storage calls a rebuild makes.
type timedStorage struct {
	storage.Storage
	read, load, commit atomic.Int64 // ns
}

func (t *timedStorage) split() rebuildSplit {
	return rebuildSplit{read: time.Duration(t.read.Load()), load: time.Duration(t.load.Load()), commit: time.Duration(t.commit.Load())}
}

func (t *timedStorage) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	defer t.time(&t.read, time.Now())
	return t.Storage.ReadFeed(ctx, q)
}

func (t *timedStorage) LoadProjections(ctx context.Context, name string, ids []string) ([]storage.ProjectionState, error) {
	defer t.time(&t.load, time.Now())
	return t.Storage.LoadProjections(ctx, name, ids)
}

func (t *timedStorage) CommitProjection(ctx context.Context, c storage.ProjectionCommit) error {
	defer t.time(&t.commit, time.Now())
	return t.Storage.CommitProjection(ctx, c)
}

func (t *timedStorage) time(sum *atomic.Int64, start time.Time) { sum.Add(int64(time.Since(start))) }

// Close leaves the storage open: its owner closes it.
func (t *timedStorage) Close() error { return nil }

// RebuildCode returns the fold of RebuildDefinition as a projection in Go
// on the root package's hook (CodeProjection), with the event data decoded
// by encoding/json: sku set, total added, count incremented.
func RebuildCode(name, feed, eventType string, aggregated bool) eventstore.CodeProjection {
	return eventstore.CodeProjection{
		Name: name, Feed: feed, Version: 1, Aggregated: aggregated, EventTypes: []string{eventType},
		Decode: func(data []byte) (eventstore.CodeState, error) {
			s := &rebuildState{}
			if data != nil {
				if err := json.Unmarshal(data, &s.rebuildFields); err != nil {
					return nil, err
				}
			}
			return s, nil
		},
	}
}

// rebuildState is the state of RebuildCode.
type rebuildState struct{ rebuildFields }

type rebuildFields struct {
	SKU   string  `json:"sku"`
	Total float64 `json:"total"`
	Count int     `json:"count"`
}

func (s *rebuildState) Apply(e *eventstore.Event) error {
	var d struct {
		SKU   string  `json:"sku"`
		Total float64 `json:"total"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return err
	}
	s.SKU = d.SKU
	s.Total += d.Total
	s.Count++
	return nil
}

func (s *rebuildState) MarshalJSON() ([]byte, error) { return json.Marshal(s.rebuildFields) }
