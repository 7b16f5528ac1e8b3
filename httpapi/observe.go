package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/eventkit-go/eventstore/internal/tracing"
)

// readyTimeout bounds the storage checks of GET /readyz, so that it
// answers within a second also when the database hangs.
const readyTimeout = 900 * time.Millisecond

// RequestInfo describes one request once it is served. It never holds
// credentials, query strings or bodies.
type RequestInfo struct {
	// Method is the request method.
	Method string
	// Route is the pattern of the endpoint that served the request, as
	// in "/aggregates/{type}/{id}", "/healthz" or "/readyz": a bounded set
	// of values, fit for a metrics label. "/" means no endpoint matched;
	// "" means the path could not be routed at all (an unclean path).
	Route string
	// Status is the response status; 0 when the handler was aborted
	// before it wrote one.
	Status int
	// Bytes counts the response body bytes written, after compression.
	Bytes int64
	// Duration is the time from the start of serving to the end.
	Duration time.Duration
	// RequestID is the X-Request-Id response header, if set.
	RequestID string
	// Aborted reports a response cut off (the client went away or a
	// streamed answer failed half way).
	Aborted bool
	// Tenant is the id of the tenant whose data served the request
	// (Options.Tenants), "" for the default data space or a request
	// refused before its tenant was opened.
	Tenant string
}

// ServeHTTP serves the health endpoints, then authenticates the request
// and routes it; it reports every request to Options.Observer. After a 401
// the connection is closed, so that unauthenticated clients cannot keep
// idle connections open.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	r = withRequestID(w, r)
	rec := &recorder{w: w}
	if h.tracer.Enabled() {
		var span tracing.Span
		r, span = startSpan(h.tracer, r)
		defer h.endSpan(span, r, rec)
	}
	if h.observe != nil {
		defer func() {
			info := RequestInfo{
				Method: r.Method, Route: h.route(r), Status: rec.status, Bytes: rec.bytes,
				Duration: time.Since(start), RequestID: w.Header().Get(HeaderRequestID), Tenant: rec.tenant,
			}
			if v := recover(); v != nil {
				info.Aborted = true
				h.observe(info)
				panic(v)
			}
			h.observe(info)
		}()
	}
	if p := r.URL.Path; !strings.HasPrefix(p, "/") {
		// http.StripPrefix("/es/", h) leaves "aggregates/...": the mux
		// would redirect to "/aggregates/...", outside the prefix.
		r.Pattern = "/"
		h.fail(rec, r, apiErr(eventstore.ErrNotFound, "the path %q does not start with a slash: mount the handler with "+
			"http.StripPrefix(\"/prefix\", h), without a trailing slash, so that it gets \"/%s\"", clip(p), clip(p)))
		return
	}
	if p := r.URL.Path; h.console && (p == ConsolePath[:len(ConsolePath)-1] || strings.HasPrefix(p, ConsolePath)) {
		h.serveConsole(rec, r)
		return
	}
	if p := r.URL.Path; p == "/healthz" || p == "/readyz" {
		r.Pattern = p
		switch {
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			rec.Header().Set("Allow", "GET, HEAD")
			h.fail(rec, r, fmt.Errorf("%w: %s %s allows GET, HEAD", errMethod, r.Method, p))
		case p == "/healthz":
			writeStatus(rec, r, "")
		default:
			writeStatus(rec, r, h.notReady(r.Context()))
		}
		return
	}
	h.serve(rec, r)
}

// route is the pattern that served r, or the one that would have for a
// request refused before routing (401).
func (h *handler) route(r *http.Request) string {
	if r.Pattern != "" {
		return r.Pattern
	}
	_, pattern := h.mux.Handler(r)
	return pattern
}

// notReady returns "" when the storage answers, has space and accepts
// writes (Store.ProbeWrite) and the projector runs, else the message of
// the 503.
func (h *handler) notReady(ctx context.Context) string {
	if !hooks.ProjectorRunning(h.p) {
		return "not ready"
	}
	if h.st.OutOfSpace() {
		return "not ready: the store is out of space"
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if _, err := h.st.FeedHead(ctx, ""); err != nil {
		return "not ready"
	}
	// A read-only standby, a primary waiting for its synchronous
	// standbys, or one that stopped answering cannot store a save.
	if err := h.st.ProbeWrite(ctx); err != nil {
		h.log.Warn("httpapi: not ready: the store cannot write", "err", err)
		return "not ready: the store cannot write"
	}
	return ""
}

// writeStatus answers a health check: 200 {"status":"ok"} when notReady
// is "", else 503 with that message. The body says nothing else.
func writeStatus(w http.ResponseWriter, r *http.Request, notReady string) {
	w.Header().Set("Cache-Control", "no-store")
	if notReady != "" {
		w.Header().Set("Retry-After", "1")
		writeErrorBody(w, http.StatusServiceUnavailable, errorBody{Code: "unavailable", Message: notReady, Errors: []eventstore.FieldError{}, RequestID: RequestID(r.Context())})
		return
	}
	body := []byte("{\"status\":\"ok\"}\n")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", "16")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// recorder notes the status and body size of a response, and closes the
// connection after a 401.
type recorder struct {
	w      http.ResponseWriter
	status int
	bytes  int64
	tenant string // the tenant that served the request
}

func (rc *recorder) Header() http.Header { return rc.w.Header() }

func (rc *recorder) WriteHeader(code int) {
	if rc.status == 0 && code >= 200 {
		rc.status = code
		if code == http.StatusUnauthorized {
			rc.w.Header().Set("Connection", "close")
		}
	}
	rc.w.WriteHeader(code)
}

func (rc *recorder) Write(p []byte) (int, error) {
	if rc.status == 0 {
		rc.status = http.StatusOK
	}
	n, err := rc.w.Write(p)
	rc.bytes += int64(n)
	return n, err
}

// Flush sends buffered data to the client, if the writer can.
func (rc *recorder) Flush() {
	_ = http.NewResponseController(rc.w).Flush()
}

// Unwrap gives http.ResponseController the underlying writer.
func (rc *recorder) Unwrap() http.ResponseWriter { return rc.w }
