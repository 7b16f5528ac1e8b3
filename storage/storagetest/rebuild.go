package storagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
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
		if err := p.Sync(ctx, name); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(3*events*b.N)/b.Elapsed().Seconds(), "funcs/s")
}

// BenchmarkRebuildInGo measures the rebuild of a projection in Go against
// that of the same fold in the function language (RebuildDefinition), over
// the events feed already holds (events of them, of type eventType, their
// data holding "sku" and "total"). Each iteration rebuilds both, one after
// the other, alternating which goes first, so that both see the same load
// of a shared machine; code returns the projection in Go, named name, of
// feed and eventType. It reports the events/s of each and their ratio
// (go/functions-x), the figure of the comparison.
func BenchmarkRebuildInGo(b *testing.B, st *eventstore.Store, feed, eventType string, events int, aggregated bool, code func(name string) eventstore.CodeProjection) {
	ctx := context.Background()
	p := eventstore.NewProjector(st, nil)
	var inGo, inFunctions time.Duration
	defs, err := p.Definitions(ctx)
	if err != nil {
		b.Fatal(err)
	}
	i := len(defs) // names not taken by an earlier run on st
	rebuild := func(name string, register func() error) time.Duration {
		start := time.Now()
		if err := register(); err != nil {
			b.Fatal(err)
		}
		if err := p.Sync(ctx, name); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		s, err := p.Status(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Errors) > 0 || s.Instances == 0 {
			b.Fatalf("projection %s: %d instances, errors %v", name, s.Instances, s.Errors)
		}
		return took
	}
	for b.Loop() {
		i++
		goName, fnName := fmt.Sprint("go-", i), fmt.Sprint("functions-", i)
		viaGo := func() time.Duration {
			return rebuild(goName, func() error { return p.Register(ctx, code(goName)) })
		}
		viaFunctions := func() time.Duration {
			return rebuild(fnName, func() error { return p.Create(ctx, RebuildDefinition(fnName, feed, eventType, aggregated)) })
		}
		if i%2 == 0 {
			inGo += viaGo()
			inFunctions += viaFunctions()
		} else {
			inFunctions += viaFunctions()
			inGo += viaGo()
		}
	}
	n := float64(events * b.N)
	b.ReportMetric(n/inGo.Seconds(), "go-events/s")
	b.ReportMetric(n/inFunctions.Seconds(), "functions-events/s")
	b.ReportMetric(inFunctions.Seconds()/inGo.Seconds(), "go/functions-x")
}

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
