package reactions_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestDeliveryTraced checks that a delivery is a span linked to the save
// of the event that scheduled it, and that its receiver gets the span's
// traceparent.
func TestDeliveryTraced(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	headers := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case headers <- r.Header.Clone():
		default:
		}
	}))
	defer srv.Close()

	s := memory.New()
	st, err := eventstore.New(s, &eventstore.Options{TracerProvider: tp})
	require.NoError(t, err)
	defer st.Close()
	e, err := reactions.New(st, s, &reactions.Options{TracerProvider: tp, Outbound: &reactions.Outbound{AllowAll: true}})
	require.NoError(t, err)
	require.NoError(t, e.Create(t.Context(), reactions.Definition{Name: "notify", FeedName: "order", ReactOnEventType: "placed",
		Action: reactions.Action{Type: reactions.ActionHTTPPost, TargetURI: srv.URL}}))
	stop := run(t, e)
	defer stop()

	ctx, parent := tp.Tracer("test").Start(t.Context(), "request")
	_, err = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "placed", Data: []byte(`{}`)}}, nil)
	require.NoError(t, err)
	parent.End()
	h := <-headers
	waitFor(t, "the delivery's span", func() bool { return len(spans(rec, "eventstore.reaction.Deliver")) > 0 })

	save := spans(rec, "eventstore.Save")
	require.Len(t, save, 1)
	deliver := spans(rec, "eventstore.reaction.Deliver")[0]
	var linked bool
	for _, l := range deliver.Links() {
		linked = linked || l.SpanContext.SpanID() == save[0].SpanContext().SpanID()
	}
	assert.True(t, linked, "the delivery links to the save that scheduled it")
	assert.Equal(t, trace.SpanKindClient, deliver.SpanKind())

	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h)))
	require.True(t, got.IsValid(), "the receiver gets a traceparent: %v", h)
	assert.Equal(t, deliver.SpanContext().TraceID(), got.TraceID())
	assert.Equal(t, deliver.SpanContext().SpanID(), got.SpanID(), "the receiver's parent is the delivery")
	var status string
	for _, kv := range deliver.Attributes() {
		if kv.Key == "eventstore.reaction.status" {
			status = kv.Value.AsString()
		}
	}
	assert.Equal(t, string(reactions.StatusCompleted), status)
}

func spans(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}
