package httpapi

import (
	"net/http"
	"strconv"

	"github.com/eventkit-go/eventstore/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// startSpan starts the server span of r, continuing the trace of its
// traceparent header, if any, and returns r with the span's context.
func startSpan(t *tracing.Tracer, r *http.Request) (*http.Request, tracing.Span) {
	ctx := tracing.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := t.Start(ctx, r.Method, trace.SpanKindServer)
	return r.WithContext(ctx), span
}

// endSpan ends the span of r, named after its route as the semantic
// conventions say ("POST /aggregates/{type}/{id}/events"): the route, not
// the path, which holds ids.
func (h *handler) endSpan(span tracing.Span, r *http.Request, rec *recorder) {
	if span.Recording() {
		route := h.route(r)
		if route != "" {
			span.SetName(r.Method + " " + route)
		}
		span.SetAttributes(attribute.String("http.request.method", r.Method),
			attribute.String("http.route", route),
			attribute.Int("http.response.status_code", rec.status))
		if rec.status >= 500 {
			span.Fail(strconv.Itoa(rec.status), true)
		}
	}
	span.End()
}
