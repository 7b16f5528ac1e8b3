package eventstore

import (
	"context"
	"errors"
	"maps"

	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/eventkit-go/eventstore/storage"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Names of the spans a Store and its Projectors start (see docs/tracing.md).
const (
	spanSave     = "eventstore.Save"
	spanSaveAll  = "eventstore.SaveAll"
	spanLoad     = "eventstore.Load"
	spanReadFeed = "eventstore.ReadFeed"
	spanCatchUp  = "eventstore.projection.CatchUp"
	spanApply    = "eventstore.projection.Apply"
)

// Attribute keys of the store's spans: the store's own, under one prefix.
// No attribute holds an aggregate or event id, event data or metadata.
const (
	attrAggregateType = attribute.Key("eventstore.aggregate.type")
	attrEventCount    = attribute.Key("eventstore.event.count")
	attrBatchCount    = attribute.Key("eventstore.batch.count")
	attrVersion       = attribute.Key("eventstore.aggregate.version")
	attrDuplicate     = attribute.Key("eventstore.save.duplicate")
	attrFeed          = attribute.Key("eventstore.feed.name")
	attrCursor        = attribute.Key("eventstore.feed.cursor")
	attrNext          = attribute.Key("eventstore.feed.next")
	attrWait          = attribute.Key("eventstore.feed.wait_ms")
	attrEntries       = attribute.Key("eventstore.feed.entries")
	attrProjection    = attribute.Key("eventstore.projection.name")
	attrCheckpoint    = attribute.Key("eventstore.projection.checkpoint")
	attrFailed        = attribute.Key("eventstore.projection.failed")
)

// maxSpanLinks bounds the links of one span to the saves it follows.
const maxSpanLinks = 32

// errorType names the kind of err for a span's error.type, and reports
// whether the failure is the store's (not the caller's).
func errorType(err error) (string, bool) {
	switch {
	case errors.Is(err, ErrConflict):
		return "conflict", false
	case errors.Is(err, ErrNotFound):
		return "not_found", false
	case errors.Is(err, ErrInvalid):
		return "invalid", false
	case errors.Is(err, ErrClosed):
		return "closed", false
	case errors.Is(err, context.Canceled):
		return "canceled", false
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout", true
	case errors.Is(err, ErrUnavailable):
		return "unavailable", true
	case errors.Is(err, ErrFull):
		return "full", true
	}
	return "internal", true
}

// fail records err, if any, on span.
func fail(span tracing.Span, err error) {
	if err != nil && span.Recording() {
		span.Fail(errorType(err))
	}
}

// stampTrace stores ctx's trace context (the save's span) in the metadata
// of events, which belong to the storage request, so that the work the
// save causes later can link to it. A caller's own traceparent is kept.
func stampTrace(ctx context.Context, events []Event) {
	values := tracing.ContextValues(ctx)
	if values == nil {
		return
	}
	for i := range events {
		md := &events[i].Metadata
		if md.Values[tracing.TraceparentKey] != "" {
			continue
		}
		m := make(map[string]string, len(md.Values)+len(values))
		maps.Copy(m, md.Values) // the caller's map stays untouched
		maps.Copy(m, values)
		md.Values = m
	}
}

// saveLinks returns links to the saves whose events are in events (each
// distinct span once, at most maxSpanLinks).
func saveLinks(events []Event) []trace.Link {
	var links []trace.Link
	var last string
	for i := range events {
		tp := events[i].Metadata.Values[tracing.TraceparentKey]
		if tp == "" || tp == last {
			continue
		}
		last = tp
		l, ok := tracing.LinkFromValues(events[i].Metadata.Values)
		if !ok || hasLink(links, l) {
			continue
		}
		links = append(links, l)
		if len(links) == maxSpanLinks {
			break
		}
	}
	return links
}

func hasLink(links []trace.Link, l trace.Link) bool {
	for _, k := range links {
		if k.SpanContext.SpanID() == l.SpanContext.SpanID() && k.SpanContext.TraceID() == l.SpanContext.TraceID() {
			return true
		}
	}
	return false
}

// endSave ends the span of a Save of n events.
func endSave(span tracing.Span, aggregateType string, n int, res SaveResult, err error) {
	if span.Recording() {
		span.SetAttributes(attrAggregateType.String(aggregateType), attrEventCount.Int(n))
		if err == nil {
			span.SetAttributes(attrVersion.Int64(res.Version), attrDuplicate.Bool(res.Duplicate))
		}
		fail(span, err)
	}
	span.End()
}

// endSaveAll ends the span of a SaveAll.
func endSaveAll(span tracing.Span, aggregateType string, batches []Batch, err error) {
	if span.Recording() {
		n := 0
		for _, b := range batches {
			n += len(b.Events)
		}
		span.SetAttributes(attrAggregateType.String(aggregateType), attrBatchCount.Int(len(batches)), attrEventCount.Int(n))
		fail(span, err)
	}
	span.End()
}

// endLoad ends the span of a Load or LoadRange.
func endLoad(span tracing.Span, aggregateType string, agg Aggregate, err error) {
	if span.Recording() {
		span.SetAttributes(attrAggregateType.String(aggregateType))
		if err == nil {
			span.SetAttributes(attrVersion.Int64(agg.Version), attrEventCount.Int(len(agg.Events)))
		}
		fail(span, err)
	}
	span.End()
}

// endReadFeed ends the span of a ReadFeed.
func endReadFeed(span tracing.Span, feed string, after int64, opts *FeedOptions, res FeedResult, err error) {
	if span.Recording() {
		if feed == "" {
			feed = "_all"
		}
		span.SetAttributes(attrFeed.String(feed), attrCursor.Int64(after))
		if opts != nil && opts.Wait > 0 {
			span.SetAttributes(attrWait.Int64(opts.Wait.Milliseconds()))
		}
		if err == nil {
			span.SetAttributes(attrEntries.Int(len(res.Entries)), attrNext.Int64(res.Next))
		}
		fail(span, err)
	}
	span.End()
}

// pageSpan starts the span of a projector's page of the projection name
// from checkpoint from, linked to the saves of its events.
func (p *Projector) pageSpan(ctx context.Context, name string, from int64, page storage.FeedPage) (context.Context, tracing.Span) {
	if !p.store.tracer.Enabled() {
		return ctx, tracing.Span{}
	}
	ctx, span := p.store.tracer.StartLinked(ctx, spanApply, trace.SpanKindInternal, saveLinks(page.Events))
	span.SetAttributes(attrProjection.String(name), attrCheckpoint.Int64(from), attrEventCount.Int(len(page.Events)))
	return ctx, span
}

// endPage ends the span of a projector's page.
func endPage(span tracing.Span, commit storage.ProjectionCommit, err error) {
	if span.Recording() {
		span.SetAttributes(attribute.Key("eventstore.projection.to").Int64(commit.To), attrFailed.Int(len(commit.Errors)))
		fail(span, err)
	}
	span.End()
}
