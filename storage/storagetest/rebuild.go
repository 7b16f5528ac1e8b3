package storagetest

import (
	"context"
	"fmt"
	"testing"

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
