package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/internal/limits"
)

// limitBody is an error body with the count of problems left out.
type limitBody struct {
	errBody
	Omitted int `json:"omitted"`
}

// post serves a POST with a body held in memory and returns the recorder.
func (e *env) post(path string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest("POST", path, bytes.NewReader(body))
	r.Header.Set(httpapi.HeaderAccessKey, testAccess)
	r.Header.Set(httpapi.HeaderSecretAccessKey, testSecret)
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	return w
}

// repeated returns prefix, n copies of item separated by commas, suffix.
func repeated(prefix, item string, n int, suffix string) []byte {
	var b bytes.Buffer
	b.Grow(len(prefix) + n*(len(item)+1) + len(suffix))
	b.WriteString(prefix)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteString(suffix)
	return b.Bytes()
}

func TestDeepDataIsRefusedNamingTheEvent(t *testing.T) {
	e := newEnv(t, nil)
	deep := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	e.must(200, "POST", "/aggregates/order/o-0/events", events(ev(id3, "A", deep(limits.MaxDataDepth))))
	b := mustErr(t, e.do("POST", "/aggregates/order/o-1/events", events(ev(id1, "A", `{}`), ev(id2, "A", deep(limits.MaxDataDepth+1)))), 422, "invalid")
	if !hasField(b.Errors, "events[1].data") {
		t.Errorf("errors %+v must name events[1].data", b.Errors)
	}
	mustErr(t, e.do("GET", "/aggregates/order/o-1", ""), 404, "not_found")
}

// TestBodyOfBracketsIsCheap: 4 MiB of '[' is refused without recursing
// once per bracket (the stack does not grow) and with little memory.
func TestBodyOfBracketsIsCheap(t *testing.T) {
	e := newEnv(t, nil)
	body := bytes.Repeat([]byte("["), httpapi.DefaultMaxBodyBytes)
	for _, path := range []string{"/aggregates/order/o-1/events", "/projections/definitions"} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w := e.post(path, body)
		runtime.ReadMemStats(&after)
		if w.Code != 400 && w.Code != 422 {
			t.Errorf("%s: status %d, want 400 or 422; body %.200s", path, w.Code, w.Body)
		}
		stack := int64(after.StackInuse) - int64(before.StackInuse)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%s: status %d, stack grew %d bytes, allocated %d bytes", path, w.Code, stack, alloc)
		if stack > 8<<20 {
			t.Errorf("%s: the stack grew by %d bytes: the body is checked recursively", path, stack)
		}
		if alloc > 64<<20 {
			t.Errorf("%s: refusing it allocated %d bytes", path, alloc)
		}
	}
}

// TestManyEventsAreRefusedCheaply: a 3 MB body of a million empty events
// is refused while decoding, with a small answer and bounded memory.
func TestManyEventsAreRefusedCheaply(t *testing.T) {
	e := newEnv(t, nil)
	body := repeated(`{"events":[`, `{}`, 1_000_000, `]}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := e.post("/aggregates/order/o-1/events", body)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d-byte body: status %d, %d-byte answer, %d bytes allocated", len(body), w.Code, w.Body.Len(), alloc)
	if w.Code != 422 {
		t.Fatalf("status %d, want 422", w.Code)
	}
	if w.Body.Len() > 64<<10 {
		t.Errorf("the answer is %d bytes, want under 64 KiB", w.Body.Len())
	}
	if alloc > 300<<20 {
		t.Errorf("refusing a %d-byte body allocated %d bytes, want under 300 MB", len(body), alloc)
	}
	b := mustErr(t, w.Result(), 422, "invalid")
	if len(b.Errors) != 1 || b.Errors[0].Field != "events" || !strings.Contains(b.Errors[0].Message, "10000") {
		t.Errorf("%d errors (first %.200v): want one, for events, naming the limit", len(b.Errors), b.Errors)
	}
}

func TestManyHandlersAreRefusedCheaply(t *testing.T) {
	e := newEnv(t, nil)
	for _, body := range [][]byte{
		repeated(`{"projectionName":"p","feedName":"f","handlers":[`, `{}`, 1_000_001, `]}`),
		repeated(`{"projectionName":"p","feedName":"f","handlers":[{"eventType":"A","functions":[`, `{}`, 1_000_001, `]}]}`),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w := e.post("/projections/definitions", body)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("%d-byte definition: status %d, %d-byte answer, %d bytes allocated", len(body), w.Code, w.Body.Len(), alloc)
		if w.Code != 422 || w.Body.Len() > 64<<10 {
			t.Errorf("status %d with a %d-byte answer, want 422 under 64 KiB", w.Code, w.Body.Len())
		}
		if alloc > 300<<20 {
			t.Errorf("refusing a %d-byte body allocated %d bytes, want under 300 MB", len(body), alloc)
		}
	}
}

// TestProblemsAreCappedAndWrittenOnce: errors lists at most 100 problems
// and counts the rest; the message summarises instead of repeating them.
func TestProblemsAreCappedAndWrittenOnce(t *testing.T) {
	e := newEnv(t, nil)
	w := e.post("/aggregates/order/o-1/events", repeated(`{"events":[`, `{"eventId":"x","eventType":"A"}`, 150, `]}`))
	var b limitBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || w.Code != 422 {
		t.Fatalf("status %d, body %s", w.Code, w.Body)
	}
	if len(b.Errors) != 100 || b.Omitted != 50 {
		t.Errorf("%d errors listed and %d omitted, want 100 and 50", len(b.Errors), b.Omitted)
	}
	if strings.Contains(b.Message, "events[0]") || !strings.Contains(b.Message, "150 problems") {
		t.Errorf("message %.300q must summarise (150 problems), not repeat the errors", b.Message)
	}

	// Three problems: each written once, in errors.
	bb := mustErr(t, e.do("POST", "/aggregates/order/o-1/events", events(`{"eventId":"x"}`, `{"eventId":"y","eventType":"A"}`)), 422, "invalid")
	if len(bb.Errors) != 3 || !strings.Contains(bb.Message, "3 problems") || strings.Contains(bb.Message, "UUID") {
		t.Errorf("body %+v: want 3 errors and a message summarising them", bb)
	}
	// A single problem is the message.
	bb = mustErr(t, e.do("POST", "/aggregates/order/o-1/events", events(ev("x", "A", ""))), 422, "invalid")
	if len(bb.Errors) != 1 || !strings.Contains(bb.Message, "events[0].eventId") {
		t.Errorf("body %+v: want the single problem as the message", bb)
	}
}

// TestEscapedDotsAndSlashesInPath: names are checked after unescaping.
func TestEscapedDotsAndSlashesInPath(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct{ method, path, field string }{
		{"GET", "/aggregates/order/%2e%2e", "aggregateId"},
		{"GET", "/aggregates/%2E/o-1", "aggregateType"},
		{"POST", "/aggregates/order/%2e%2E/events", "aggregateId"},
		{"GET", "/projections/aggregated/%2e%2e", "projectionName"},
		{"GET", "/projections/single/p/.%2e", "aggregateId"},
		{"GET", "/projections/single/%2F/x", ""},
		{"GET", "/aggregates/order/%2f", ""},
	} {
		var res *http.Response
		if c.method == "POST" {
			res = e.do(c.method, c.path, events(ev(id1, "A", "")))
		} else {
			res = e.do(c.method, c.path, "")
		}
		b := mustErr(t, res, 400, "malformed")
		if c.field != "" && !hasField(b.Errors, c.field) {
			t.Errorf("%s: errors %+v do not name %s", c.path, b.Errors, c.field)
		}
	}
}
