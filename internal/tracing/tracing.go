// Package tracing is the store's thin layer over the OpenTelemetry trace
// API: spans that cost nothing when no tracer provider is installed, the
// attribute names the store uses, and the W3C trace context that a save
// keeps in its events' metadata so that later work (a projector's page, a
// reaction's delivery) links back to it.
package tracing

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every span of the store.
const ScopeName = "github.com/eventkit-go/eventstore"

// unset is the global tracer provider as the otel package starts with it:
// a delegate that creates non-recording spans until a provider is set.
// While the global provider is still this one no SDK is installed, and a
// Tracer that follows the global provider starts no span at all. It is
// read once, at initialisation, and never written.
var unset = otel.GetTracerProvider()

// Tracer starts the store's spans. The zero value and nil are valid and
// trace nothing.
type Tracer struct {
	tp     trace.TracerProvider // nil: follow otel's global provider
	on     bool                 // tp is set and is not a no-op provider
	cached atomic.Pointer[cachedTracer]
}

type cachedTracer struct {
	tp trace.TracerProvider
	t  trace.Tracer
}

// New returns a Tracer on tp; nil follows otel's global provider, which
// traces nothing until the program installs one (otel.SetTracerProvider).
func New(tp trace.TracerProvider) *Tracer {
	_, noop := tp.(noop.TracerProvider)
	return &Tracer{tp: tp, on: tp != nil && !noop}
}

// provider returns the provider to use now, or nil when nothing traces.
func (t *Tracer) provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	tp := t.tp
	if tp == nil {
		tp = otel.GetTracerProvider()
		if tp == unset {
			return nil
		}
	}
	if _, ok := tp.(noop.TracerProvider); ok {
		return nil
	}
	return tp
}

// tracer returns the trace.Tracer of the current provider, or nil.
func (t *Tracer) tracer() trace.Tracer {
	tp := t.provider()
	if tp == nil {
		return nil
	}
	if c := t.cached.Load(); c != nil && c.tp == tp {
		return c.t
	}
	c := &cachedTracer{tp: tp, t: tp.Tracer(ScopeName)}
	t.cached.Store(c)
	return c.t
}

// Enabled reports whether a span started now could be recorded: a
// provider is installed. It is inlined, and cheap enough for every call:
// a field, or an atomic load of otel's global provider and a comparison.
func (t *Tracer) Enabled() bool {
	switch {
	case t == nil:
		return false
	case t.tp != nil:
		return t.on
	}
	return otel.GetTracerProvider() != unset
}

// Start starts a span named name as a child of ctx's span, of kind
// kind. When nothing traces it returns ctx and an inactive Span, without
// allocating; that check is inlined into the caller.
func (t *Tracer) Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, Span) {
	if !t.Enabled() {
		return ctx, Span{}
	}
	return t.start(ctx, name, kind, nil)
}

// StartLinked is Start with links to other spans.
func (t *Tracer) StartLinked(ctx context.Context, name string, kind trace.SpanKind, links []trace.Link) (context.Context, Span) {
	if !t.Enabled() {
		return ctx, Span{}
	}
	return t.start(ctx, name, kind, links)
}

// start is Start once Enabled.
func (t *Tracer) start(ctx context.Context, name string, kind trace.SpanKind, links []trace.Link) (context.Context, Span) {
	tr := t.tracer()
	if tr == nil {
		return ctx, Span{}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(kind)}
	if len(links) > 0 {
		opts = append(opts, trace.WithLinks(links...))
	}
	ctx, s := tr.Start(ctx, name, opts...)
	if !s.IsRecording() {
		// Sampled out: the context still carries the span context for
		// propagation, but the caller need not build attributes.
		return ctx, Span{s: s, quiet: true}
	}
	return ctx, Span{s: s}
}

// Span is a span of the store, or none: every method of an inactive Span
// does nothing.
type Span struct {
	s     trace.Span
	quiet bool // started but not recording
}

// Started reports whether a span was started: a provider is installed.
// The span may still be sampled out (see Recording).
func (s Span) Started() bool { return s.s != nil }

// Recording reports whether attributes, events and links given to the
// span are kept: callers build them only then.
func (s Span) Recording() bool { return s.s != nil && !s.quiet }

// SetAttributes sets attributes of a recording span.
func (s Span) SetAttributes(kv ...attribute.KeyValue) {
	if s.Recording() {
		s.s.SetAttributes(kv...)
	}
}

// AddLink links a recording span to another span.
func (s Span) AddLink(l trace.Link) {
	if s.Recording() {
		s.s.AddLink(l)
	}
}

// Fail records a failure of kind errorType (such as "conflict" or
// "unavailable") as the span's error.type; when the failure is not the
// caller's (serverSide), it also sets the span's status to Error. The
// error's text is never recorded: it may quote the caller's input.
func (s Span) Fail(errorType string, serverSide bool) {
	if !s.Recording() {
		return
	}
	s.s.SetAttributes(attribute.String("error.type", errorType))
	if serverSide {
		s.s.SetStatus(codes.Error, errorType)
	}
}

// SetName renames a recording span.
func (s Span) SetName(name string) {
	if s.Recording() {
		s.s.SetName(name)
	}
}

// End ends the span.
func (s Span) End() {
	if s.s != nil {
		s.s.End()
	}
}

// SpanContext returns the span's context, or an invalid one.
func (s Span) SpanContext() trace.SpanContext {
	if s.s == nil {
		return trace.SpanContext{}
	}
	return s.s.SpanContext()
}

// Propagator is the W3C Trace Context propagator: traceparent and
// tracestate headers (and metadata keys).
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Metadata keys that carry a save's trace context in its events.
const (
	TraceparentKey = "traceparent"
	TracestateKey  = "tracestate"
)

// maxTracestate bounds the tracestate kept in an event's metadata.
const maxTracestate = 256

// ContextValues returns the traceparent (and tracestate) of ctx's span
// context as metadata values, or nil when ctx carries no valid one.
func ContextValues(ctx context.Context) map[string]string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	c := propagation.MapCarrier{}
	Propagator.Inject(ctx, c)
	if len(c[TracestateKey]) > maxTracestate {
		delete(c, TracestateKey)
	}
	return c
}

// LinkFromValues returns a link to the span context that values (an
// event's metadata) carry, and whether they carry a valid one.
func LinkFromValues(values map[string]string) (trace.Link, bool) {
	if values[TraceparentKey] == "" {
		return trace.Link{}, false
	}
	ctx := Propagator.Extract(context.Background(), propagation.MapCarrier(values))
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return trace.Link{}, false
	}
	return trace.Link{SpanContext: sc}, true
}

// SpanOf returns ctx's span as a Span: inactive when it is not recording.
func SpanOf(ctx context.Context) Span {
	s := trace.SpanFromContext(ctx)
	if !s.IsRecording() {
		return Span{}
	}
	return Span{s: s}
}

// noEnd ends no span.
func noEnd() {}

// StorageCall starts the span of the storage call op of the database
// system (such as "sqlite"), a child of *ctx's span, and replaces *ctx
// with the span's context; the function it returns ends the span. Outside
// a recording span it starts nothing and allocates nothing: storage work
// of its own (a listener, a lease) makes no root spans.
func StorageCall(t *Tracer, ctx *context.Context, system, op string) func() {
	if !t.Enabled() || !trace.SpanFromContext(*ctx).IsRecording() {
		return noEnd
	}
	c, span := t.Start(*ctx, system+" "+op, trace.SpanKindClient)
	span.SetAttributes(attribute.String("db.system.name", system), attribute.String("db.operation.name", op))
	*ctx = c
	return span.End
}
