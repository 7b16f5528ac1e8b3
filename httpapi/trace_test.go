package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestTraceHTTPSave checks the span tree of a save over HTTP: a server
// span named by the route that continues the caller's traceparent, with
// the Store's save as its child, and no id, key or data in any span.
func TestTraceHTTPSave(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	st, err := eventstore.New(memory.New(), &eventstore.Options{TracerProvider: tp})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, nil)
	e := &env{t: t, st: st, p: p, h: httpapi.New(st, p, &httpapi.Options{TracerProvider: tp,
		Keys: []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}})}

	const remoteTrace, remoteSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	const marker = "MARKER-91c2"
	id := "7d444840-9dc0-11d1-b245-5ffdce74fad2"
	e.must(http.StatusOK, http.MethodPost, "/aggregates/order/agg-secret-9/events",
		events(ev(id, "Placed", `{"note":"`+marker+`"}`)),
		"traceparent", "00-"+remoteTrace+"-"+remoteSpan+"-01")

	var server, save sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		switch s.Name() {
		case "POST /aggregates/{type}/{id}/events":
			server = s
		case "eventstore.Save":
			save = s
		}
	}
	require.NotNil(t, server, "a server span named by the route")
	require.NotNil(t, save)
	assert.Equal(t, trace.SpanKindServer, server.SpanKind())
	assert.Equal(t, remoteTrace, server.SpanContext().TraceID().String(), "the caller's trace continues")
	assert.Equal(t, remoteSpan, server.Parent().SpanID().String())
	assert.True(t, server.Parent().IsRemote())
	assert.Equal(t, server.SpanContext().SpanID(), save.Parent().SpanID(), "the save is the request's child")
	var status, route string
	for _, kv := range server.Attributes() {
		switch kv.Key {
		case "http.response.status_code":
			status = kv.Value.Emit()
		case "http.route":
			route = kv.Value.Emit()
		}
	}
	assert.Equal(t, "200", status)
	assert.Equal(t, "/aggregates/{type}/{id}/events", route)
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			for _, secret := range []string{marker, id, "agg-secret-9", testAccess, testSecret} {
				assert.NotContains(t, kv.Value.Emit(), secret, "span %s attribute %s", s.Name(), kv.Key)
			}
		}
	}
}
