package reactions

import (
	"context"

	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// spanDeliver names the span of one delivery attempt.
const spanDeliver = "eventstore.reaction.Deliver"

// Attribute keys of a delivery's span. No attribute holds an aggregate,
// event or reaction id, nor the event's data.
const (
	attrReaction  = attribute.Key("eventstore.reaction.name")
	attrAttempt   = attribute.Key("eventstore.reaction.attempt")
	attrStatus    = attribute.Key("eventstore.reaction.status")
	attrType      = attribute.Key("eventstore.aggregate.type")
	semconvStatus = attribute.Key("http.response.status_code")
)

// deliverySpan starts the span of an attempt of r, linked to the save of
// the event that scheduled it (whose trace context r's payload carries).
func (e *Engine) deliverySpan(ctx context.Context, r *storage.Reaction) (context.Context, tracing.Span) {
	if !e.tracer.Enabled() {
		return ctx, tracing.Span{}
	}
	var links []trace.Link
	if tp := gjson.GetBytes(r.Payload, "metadata.traceparent"); tp.Exists() {
		values := map[string]string{tracing.TraceparentKey: tp.String()}
		if ts := gjson.GetBytes(r.Payload, "metadata.tracestate"); ts.Exists() {
			values[tracing.TracestateKey] = ts.String()
		}
		if l, ok := tracing.LinkFromValues(values); ok {
			links = append(links, l)
		}
	}
	ctx, span := e.tracer.StartLinked(ctx, spanDeliver, trace.SpanKindClient, links)
	span.SetAttributes(attrReaction.String(r.Definition), attrAttempt.Int(r.Attempts), attrType.String(r.AggregateType))
	return ctx, span
}

// endDelivery ends the span of an attempt with its outcome o (ok false:
// the attempt was cut short by shutdown).
func endDelivery(span tracing.Span, o storage.ReactionOutcome, ok bool) {
	if span.Recording() {
		switch {
		case !ok:
			span.SetAttributes(attrStatus.String("interrupted"))
		default:
			status := StatusFailed
			switch o.State {
			case storage.ReactionCompleted:
				status = StatusCompleted
			case storage.ReactionCanceled:
				status = StatusCanceled
			case storage.ReactionPending:
				status = StatusScheduled // retried later
			}
			span.SetAttributes(attrStatus.String(string(status)))
			if o.Error != "" {
				span.Fail("delivery_failed", true)
			}
		}
	}
	span.End()
}
