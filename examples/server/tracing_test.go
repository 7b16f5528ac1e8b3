package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it keeps the names of the
// spans it is sent, by service name.
type otlpReceiver struct {
	mu    sync.Mutex
	spans map[string][]string // service.name -> span names
	bad   int
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil || proto.Unmarshal(b, &req) != nil {
		o.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				o.spans[service] = append(o.spans[service], s.Name)
			}
		}
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func (o *otlpReceiver) names(service string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.spans[service]...)
}

// TestServerExportsTraces runs the server process with the standard
// OpenTelemetry variables pointing at a receiver and checks that the spans
// of a save over HTTP arrive there, with the service name asked for; and
// that without them it exports nothing.
func TestServerExportsTraces(t *testing.T) {
	rcv := &otlpReceiver{spans: map[string][]string{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	c := &apiClient{t: t, access: "ak_tr", secret: "sk_tr", http: &http.Client{Timeout: 30 * time.Second}}
	keys := []string{"EVENTSTORE_ACCESS_KEY=" + c.access, "EVENTSTORE_SECRET_ACCESS_KEY=" + c.secret}

	off := startProcess(t, keys, "-addr", "127.0.0.1:0", "-storage", "memory", "-log-requests=false")
	c.save(off.base, "o-1", "Placed")
	off.kill()

	env := append(keys, "OTEL_EXPORTER_OTLP_ENDPOINT="+srv.URL, "OTEL_SERVICE_NAME=es-trace-test",
		"OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_TRACES_SAMPLER=always_on")
	on := startProcess(t, env, "-addr", "127.0.0.1:0", "-storage", "memory", "-log-requests=false")
	c.save(on.base, "o-2", "Placed")
	want := []string{"POST /aggregates/{type}/{id}/events", "eventstore.Save"}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := strings.Join(rcv.names("es-trace-test"), "\n")
		missing := ""
		for _, w := range want {
			if !strings.Contains(got, w) {
				missing = w
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("span %q not exported within 15 s; got %q", missing, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.bad != 0 {
		t.Errorf("%d malformed export requests", rcv.bad)
	}
	if len(rcv.spans) != 1 {
		t.Errorf("spans of services %v, want only es-trace-test's (the server without the variables exports nothing)", rcv.spans)
	}
}

// TestTracingProtocol checks that a protocol this server cannot export
// with is refused at start with a message that says what to use.
func TestTracingProtocol(t *testing.T) {
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
	_, err := setupTracing(t.Context(), func(k string) string { return env[k] }, nil)
	if err == nil || !strings.Contains(err.Error(), "http/protobuf") {
		t.Fatalf("grpc: %v, want a refusal naming http/protobuf", err)
	}
	if tracingWanted(func(k string) string {
		return map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "x", "OTEL_SDK_DISABLED": "true"}[k]
	}) {
		t.Error("OTEL_SDK_DISABLED=true must turn tracing off")
	}
	if tracingWanted(func(string) string { return "" }) {
		t.Error("no variables: no tracing")
	}
}
