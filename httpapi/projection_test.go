package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
)

type projectionJSON struct {
	ProjectionID string          `json:"projectionId"`
	UpdatedAt    int64           `json:"updatedAt"`
	Data         json.RawMessage `json:"data"`
}

func decodeProjection(t *testing.T, res *http.Response) projectionJSON {
	t.Helper()
	raw := readBody(t, res)
	var p projectionJSON
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		t.Fatalf("projection body %q: %v", raw, err)
	}
	return p
}

func TestCreateDefinition(t *testing.T) {
	e := newEnv(t, nil)
	res := e.must(200, "POST", "/projections/definitions", totalsDef)
	var echo eventstore.Definition
	if err := json.Unmarshal([]byte(readBody(t, res)), &echo); err != nil {
		t.Fatal(err)
	}
	if echo.Name != "totals" || echo.Feed != "order" || !echo.Aggregated || len(echo.Handlers) != 1 || len(echo.Handlers[0].Functions) != 2 {
		t.Errorf("echoed definition %+v", echo)
	}
	if res.Header.Get("Content-Type") != "application/json" {
		t.Error("create: Content-Type is not application/json")
	}
	stored, err := e.p.Definition(context.Background(), "totals")
	if err != nil || stored.Handlers[0].Functions[0].EventSelector != "$.event.total" {
		t.Errorf("stored definition %+v, %v", stored, err)
	}
	mustErr(t, e.do("POST", "/projections/definitions", totalsDef), 409, "conflict")
}

func TestCreateDefinitionRejections(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"malformed", `{"projectionName":`, 400, ""},
		{"name not a string", `{"projectionName":1,"feedName":"f","handlers":[]}`, 422, "projectionName"},
		{"aggregated not a bool", `{"projectionName":"p","feedName":"f","aggregated":"yes","handlers":[]}`, 422, "aggregated"},
		{"handlers not an array", `{"projectionName":"p","feedName":"f","handlers":{}}`, 422, "handlers"},
		{"no handlers", `{"projectionName":"p","feedName":"f","handlers":[]}`, 422, "handlers"},
		{"feed missing", `{"projectionName":"p","handlers":[{"eventType":"E","functions":[{"function":"inc","targetSelector":"$.projection.n"}]}]}`, 422, "feedName"},
		{"bad selector", `{"projectionName":"p","feedName":"f","handlers":[{"eventType":"E","functions":[{"function":"set","targetSelector":"projection.n","rawData":"x"}]}]}`, 422, "handlers[0].functions[0].targetSelector"},
		{"unknown function", `{"projectionName":"p","feedName":"f","handlers":[{"eventType":"E","functions":[{"function":"mul","targetSelector":"$.projection.n"}]}]}`, 422, "handlers[0].functions[0].function"},
		{"rawData not a number", `{"projectionName":"p","feedName":"f","handlers":[{"eventType":"E","functions":[{"function":"add","targetSelector":"$.projection.n","rawData":{"a":1}}]}]}`, 422, "handlers[0].functions[0].rawData"},
		{"unknown field", `{"projectionName":"p","feedName":"f","handlers":[{"eventType":"E","functions":[{"function":"inc","target":"$.projection.n"}]}]}`, 422, "handlers[0].functions[0].target"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code := "invalid"
			if c.status == 400 {
				code = "malformed"
			}
			b := mustErr(t, e.do("POST", "/projections/definitions", c.body), c.status, code)
			if c.field != "" && !hasField(b.Errors, c.field) {
				t.Errorf("errors %+v do not name %s", b.Errors, c.field)
			}
		})
	}
	defs, err := e.p.Definition(context.Background(), "p")
	if !errors.Is(err, eventstore.ErrNotFound) {
		t.Errorf("a rejected definition was stored: %+v, %v", defs, err)
	}
}

func TestQueries(t *testing.T) {
	e := newEnv(t, nil)
	mustErr(t, e.do("GET", "/projections/aggregated/totals", ""), 404, "not_found")
	e.must(200, "POST", "/projections/definitions", totalsDef)
	e.must(200, "POST", "/projections/definitions", perOrderDef)
	mustErr(t, e.do("GET", "/projections/aggregated/totals", ""), 404, "not_found") // no event yet

	e.must(200, "POST", "/aggregates/order/o-1/events", events(ev(id1, "OrderPlaced", `{"total":0.1}`)))
	e.must(200, "POST", "/aggregates/order/o-2/events", events(ev(id2, "OrderPlaced", `{"total":0.2}`)))
	e.must(200, "POST", "/aggregates/order/o-3/events", events(ev(id3, "OrderPlaced", `{"total":9007199254740993}`)))

	res := e.must(200, "GET", "/projections/aggregated/totals", "")
	checkProjectionHeaders(t, res)
	p := decodeProjection(t, res)
	if p.ProjectionID != "totals" || string(p.Data) != `{"revenue":"9007199254740993.3","orders":"3"}` {
		t.Errorf("aggregated projection %+v (%s): numbers must be exact decimal strings", p, p.Data)
	}
	if now := time.Now().UnixMilli(); p.UpdatedAt < now-60_000 || p.UpdatedAt > now+1000 {
		t.Errorf("updatedAt %d is not ms since the epoch around now", p.UpdatedAt)
	}

	res = e.must(200, "GET", "/projections/single/per-order/o-2", "")
	checkProjectionHeaders(t, res)
	p = decodeProjection(t, res)
	if p.ProjectionID != "o-2" || string(p.Data) != `{"total":"0.2","status":"placed"}` {
		t.Errorf("single projection %+v (%s)", p, p.Data)
	}

	mustErr(t, e.do("GET", "/projections/single/per-order/o-9", ""), 404, "not_found")
	mustErr(t, e.do("GET", "/projections/single/nope/o-1", ""), 404, "not_found")
	mustErr(t, e.do("GET", "/projections/single/totals/o-1", ""), 404, "not_found") // aggregated, asked as single
	mustErr(t, e.do("GET", "/projections/aggregated/per-order", ""), 404, "not_found")
}

func checkProjectionHeaders(t *testing.T, res *http.Response) {
	t.Helper()
	h := res.Header
	if h.Get("Content-Type") != "application/json" || h.Get("Vary") != "Accept-Encoding" || h.Get("Content-Encoding") != "" {
		t.Errorf("headers %v", h)
	}
	if tag := h.Get("ETag"); len(tag) < 3 || tag[0] != '"' || tag[len(tag)-1] != '"' {
		t.Errorf("ETag %q is not a quoted strong tag", tag)
	}
	if _, err := http.ParseTime(h.Get("Last-Modified")); err != nil {
		t.Errorf("Last-Modified %q: %v", h.Get("Last-Modified"), err)
	}
	if cl, err := strconv.Atoi(h.Get("Content-Length")); err != nil || cl <= 0 {
		t.Errorf("Content-Length %q", h.Get("Content-Length"))
	}
}

func TestQueryConditional(t *testing.T) {
	e := newEnv(t, nil)
	e.must(200, "POST", "/projections/definitions", totalsDef)
	e.must(200, "POST", "/aggregates/order/o-1/events", events(ev(id1, "OrderPlaced", `{"total":1}`)))
	path := "/projections/aggregated/totals"
	tag := e.must(200, "GET", path, "").Header.Get("ETag")

	for _, inm := range []string{tag, "W/" + tag, `"other", ` + tag, `"a","b" , W/` + tag, "*"} {
		res := e.do("GET", path, "", "If-None-Match", inm)
		if res.StatusCode != 304 || readBody(t, res) != "" || res.Header.Get("ETag") != tag {
			t.Errorf("If-None-Match %s: status %d, ETag %q; want 304 with ETag %s and no body", inm, res.StatusCode, res.Header.Get("ETag"), tag)
		}
	}
	for _, inm := range []string{`"other"`, strings.Trim(tag, `"`), `W/"x", "y"`} {
		e.must(200, "GET", path, "", "If-None-Match", inm)
	}
	// A new event changes the tag.
	e.must(200, "POST", "/aggregates/order/o-2/events", events(ev(id2, "OrderPlaced", `{"total":1}`)))
	res := e.must(200, "GET", path, "", "If-None-Match", tag)
	if res.Header.Get("ETag") == tag {
		t.Error("ETag did not change with the projection")
	}
}

func TestQueryGzip(t *testing.T) {
	e := newEnv(t, nil)
	e.must(200, "POST", "/projections/definitions", perOrderDef)
	big := `{"total":"` + strings.Repeat("0123456789", 300) + `"}`
	e.must(200, "POST", "/aggregates/order/o-1/events", events(ev(id1, "OrderPlaced", big)))
	e.must(200, "POST", "/aggregates/order/o-2/events", events(ev(id2, "OrderPlaced", `{"total":1}`)))

	plain := e.must(200, "GET", "/projections/single/per-order/o-1", "")
	plainBody := readBody(t, plain)
	for _, ae := range []string{"gzip", "br, gzip;q=0.5", "*", "deflate, GZIP"} {
		res := e.must(200, "GET", "/projections/single/per-order/o-1", "", "Accept-Encoding", ae)
		raw := readBody(t, res)
		if res.Header.Get("Content-Encoding") != "gzip" || res.Header.Get("Vary") != "Accept-Encoding" {
			t.Fatalf("Accept-Encoding %q: headers %v", ae, res.Header)
		}
		if cl := res.Header.Get("Content-Length"); cl != strconv.Itoa(len(raw)) || len(raw) >= len(plainBody) {
			t.Errorf("Content-Length %q for %d compressed bytes (%d plain)", cl, len(raw), len(plainBody))
		}
		zr, err := gzip.NewReader(bytes.NewReader([]byte(raw)))
		if err != nil {
			t.Fatal(err)
		}
		unz, err := io.ReadAll(zr)
		if err != nil || string(unz) != plainBody {
			t.Errorf("gunzipped body differs from the plain one: %v", err)
		}
		gzTag := res.Header.Get("ETag")
		if gzTag == plain.Header.Get("ETag") {
			t.Error("gzip representation has the identity ETag")
		}
		if r304 := e.do("GET", "/projections/single/per-order/o-1", "", "Accept-Encoding", ae, "If-None-Match", gzTag); r304.StatusCode != 304 {
			t.Errorf("If-None-Match with the gzip ETag: %d", r304.StatusCode)
		}
	}
	for _, ae := range []string{"", "identity", "gzip;q=0", "*, gzip;q=0", "br"} {
		res := e.must(200, "GET", "/projections/single/per-order/o-1", "", "Accept-Encoding", ae)
		if res.Header.Get("Content-Encoding") != "" {
			t.Errorf("Accept-Encoding %q got Content-Encoding %q", ae, res.Header.Get("Content-Encoding"))
		}
	}
	// Small bodies are not compressed.
	if res := e.must(200, "GET", "/projections/single/per-order/o-2", "", "Accept-Encoding", "gzip"); res.Header.Get("Content-Encoding") != "" {
		t.Error("a small body was compressed")
	}
}

// faultyStorage is the memory backend with injected failures on Load.
type faultyStorage struct {
	storage.Storage
	loadErr   error
	loadPanic bool
}

func (f *faultyStorage) Load(ctx context.Context, q storage.LoadQuery) (eventstore.Aggregate, error) {
	if f.loadPanic {
		panic("boom: secret internals")
	}
	if f.loadErr != nil {
		return eventstore.Aggregate{}, f.loadErr
	}
	return f.Storage.Load(ctx, q)
}

// TestStatusTable walks the whole error table through real requests.
func TestStatusTable(t *testing.T) {
	fs := &faultyStorage{Storage: memory.New()}
	st, err := eventstore.New(fs, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	e := &env{t: t, st: st, p: eventstore.NewProjector(st, nil)}
	e.h = httpapi.New(st, e.p, &httpapi.Options{
		Keys:         []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}},
		MaxBodyBytes: 300,
		Logger:       slog.New(slog.NewTextHandler(&logs, nil)),
	})
	good := events(ev(id1, "A", ""))
	save := "/aggregates/order/o-1/events"
	e.must(200, "POST", save, good)
	e.must(200, "POST", "/projections/definitions", totalsDef)

	type step struct {
		name   string
		setup  func()
		method string
		path   string
		body   string
		hdr    []string
		status int
		code   string
	}
	steps := []step{
		{name: "400 malformed JSON", method: "POST", path: save, body: `{`, status: 400, code: "malformed"},
		{name: "400 bad path segment", method: "GET", path: "/aggregates/order/%01", status: 400, code: "malformed"},
		{name: "401 wrong key", method: "GET", path: "/aggregates/order/o-1", hdr: []string{httpapi.HeaderSecretAccessKey, "x"}, status: 401, code: "unauthorized"},
		{name: "404 unknown aggregate", method: "GET", path: "/aggregates/order/o-2", status: 404, code: "not_found"},
		{name: "404 unknown path", method: "GET", path: "/x", status: 404, code: "not_found"},
		{name: "405 wrong method", method: "PATCH", path: save, status: 405, code: "method_not_allowed"},
		{name: "409 expected version", method: "POST", path: save, body: `{"events":[` + ev(id2, "A", "") + `],"expectedVersion":0}`, status: 409, code: "conflict"},
		{name: "409 duplicate definition", method: "POST", path: "/projections/definitions", body: totalsDef, status: 409, code: "conflict"},
		{name: "413 too large", method: "POST", path: save, body: events(ev(id2, "A", `{"p":"`+strings.Repeat("x", 300)+`"}`)), status: 413, code: "too_large"},
		{name: "415 not JSON", method: "POST", path: save, body: good, hdr: []string{"Content-Type", "text/plain"}, status: 415, code: "unsupported_media_type"},
		{name: "422 invalid", method: "POST", path: save, body: events(ev("x", "A", "")), status: 422, code: "invalid"},
		{name: "503 unavailable", setup: func() { fs.loadErr = fmt.Errorf("dial tcp: secret-host:5432: %w", eventstore.ErrUnavailable) },
			method: "GET", path: "/aggregates/order/o-1", status: 503, code: "unavailable"},
		{name: "500 unexpected", setup: func() { fs.loadErr = errors.New("secret-host disk on fire") },
			method: "GET", path: "/aggregates/order/o-1", status: 500, code: "internal"},
		{name: "500 panic", setup: func() { fs.loadErr, fs.loadPanic = nil, true },
			method: "GET", path: "/aggregates/order/o-1", status: 500, code: "internal"},
		{name: "503 closed", setup: func() { fs.loadPanic = false; _ = st.Close() },
			method: "GET", path: "/aggregates/order/o-1", status: 503, code: "unavailable"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.setup != nil {
				s.setup()
			}
			res := e.do(s.method, s.path, s.body, s.hdr...)
			b := mustErr(t, res, s.status, s.code)
			if strings.Contains(b.Message, "secret") {
				t.Errorf("message leaks internals: %q", b.Message)
			}
			if ra := res.Header.Get("Retry-After"); (s.name == "503 unavailable") != (ra == "1") {
				t.Errorf("Retry-After %q", ra)
			}
		})
	}
	for _, want := range []string{"disk on fire", "boom: secret internals"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestNotFoundPointsAtRecordedError: an instance whose only event could not
// be applied answers 404 with that event's recorded error, not "no event
// it handles has been processed".
func TestNotFoundPointsAtRecordedError(t *testing.T) {
	e := newEnv(t, nil)
	e.must(200, "POST", "/projections/definitions", `{"projectionName":"prices","feedName":"item","handlers":[{"eventType":"Priced","functions":[{"function":"add","targetSelector":"$.projection.total","eventSelector":"$.event.price"}]}]}`)
	e.must(200, "POST", "/aggregates/item/i-1/events", events(ev(id1, "Priced", `{"price":"cheap"}`)))
	b := mustErr(t, e.do("GET", "/projections/single/prices/i-1", ""), 404, "not_found")
	for _, want := range []string{`projection "prices" has no instance "i-1"`, "event " + id1 + " (Priced) could not be applied", "cheap", "GET /projections"} {
		if !strings.Contains(b.Message, want) {
			t.Errorf("message %q does not contain %q", b.Message, want)
		}
	}
	b = mustErr(t, e.do("GET", "/projections/single/prices/i-2", ""), 404, "not_found")
	if !strings.Contains(b.Message, "no event it handles has been processed") {
		t.Errorf("another instance's message %q", b.Message)
	}
}
