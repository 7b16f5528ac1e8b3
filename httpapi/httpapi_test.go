package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/httpapi"
)

func TestSaveAndLoad(t *testing.T) {
	e := newEnv(t, nil)
	before := time.Now().UnixMilli()
	res := e.must(200, "POST", "/aggregates/order/o-1/events",
		events(ev(id1, "OrderPlaced", `{"total": 12.50, "big": 12345678901234567890123}`), ev(id2, "Noted", "")))
	if cl := res.Header.Get("Content-Length"); cl != "0" {
		t.Errorf("save Content-Length %q, want 0", cl)
	}
	if b := readBody(t, res); b != "" {
		t.Errorf("save body %q, want empty", b)
	}
	e.must(200, "POST", "/aggregates/order/o-1/events", `{"events":[`+ev(id3, "Shipped", `{}`)+`],"expectedVersion":1,"aggregateId":"o-1"}`)

	res = e.must(200, "GET", "/aggregates/order/o-1", "")
	if ct, v := res.Header.Get("Content-Type"), res.Header.Get("Vary"); ct != "application/json" || v != "Accept-Encoding" {
		t.Errorf("load headers Content-Type %q Vary %q", ct, v)
	}
	raw := readBody(t, res)
	if cl := res.Header.Get("Content-Length"); cl != strconv.Itoa(len(raw)) {
		t.Errorf("load Content-Length %q, body is %d bytes", cl, len(raw))
	}
	var agg struct {
		AggregateID      string `json:"aggregateId"`
		AggregateType    string `json:"aggregateType"`
		AggregateVersion int64  `json:"aggregateVersion"`
		Events           []struct {
			EventID    string          `json:"eventId"`
			EventType  string          `json:"eventType"`
			Data       json.RawMessage `json:"data"`
			Version    int64           `json:"version"`
			Sequence   int64           `json:"sequence"`
			Position   int64           `json:"position"`
			RecordedAt int64           `json:"recordedAt"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(raw), &agg); err != nil {
		t.Fatal(err)
	}
	if agg.AggregateID != "o-1" || agg.AggregateType != "order" || agg.AggregateVersion != 2 || len(agg.Events) != 3 {
		t.Fatalf("aggregate %s", raw)
	}
	e0, e1, e2 := agg.Events[0], agg.Events[1], agg.Events[2]
	if e0.EventID != id1 || e0.EventType != "OrderPlaced" || string(e0.Data) != `{"total":12.50,"big":12345678901234567890123}` {
		t.Errorf("event 0 %+v: data must keep its numbers as written", e0)
	}
	if e1.Data != nil || strings.Contains(raw, `"eventId":"`+id2+`","eventType":"Noted","data"`) {
		t.Errorf("event 1 was saved without data, response has %s", e1.Data)
	}
	if e0.Version != 1 || e1.Version != 1 || e2.Version != 2 || e0.Sequence != 1 || e2.Sequence != 3 {
		t.Errorf("versions/sequences %d %d %d / %d %d", e0.Version, e1.Version, e2.Version, e0.Sequence, e2.Sequence)
	}
	if !(e0.Position < e1.Position && e1.Position < e2.Position) {
		t.Errorf("positions not increasing: %d %d %d", e0.Position, e1.Position, e2.Position)
	}
	if e0.RecordedAt < before-1000 || e0.RecordedAt > time.Now().UnixMilli()+1000 {
		t.Errorf("recordedAt %d is not ms since the epoch around now", e0.RecordedAt)
	}
}

func TestSaveIdempotentRetry(t *testing.T) {
	e := newEnv(t, nil)
	body := events(ev(id1, "A", ""), ev(id2, "B", ""))
	e.must(200, "POST", "/aggregates/order/o-1/events", body)
	res := e.must(200, "POST", "/aggregates/order/o-1/events", body)
	if res.Header.Get("Content-Length") != "0" {
		t.Error("retry must also answer with an empty body")
	}
	agg := readBody(t, e.must(200, "GET", "/aggregates/order/o-1", ""))
	if !strings.Contains(agg, `"aggregateVersion":1`) || strings.Count(agg, `"eventId"`) != 2 {
		t.Errorf("retry changed the aggregate: %s", agg)
	}
	// Mixing stored and new ids is a conflict.
	mustErr(t, e.do("POST", "/aggregates/order/o-1/events", events(ev(id2, "B", ""), ev(id3, "C", ""))), 409, "conflict")
}

func TestSaveExpectedVersionConflict(t *testing.T) {
	e := newEnv(t, nil)
	e.must(200, "POST", "/aggregates/order/o-1/events", `{"events":[`+ev(id1, "A", "")+`],"expectedVersion":0}`)
	b := mustErr(t, e.do("POST", "/aggregates/order/o-1/events", `{"events":[`+ev(id2, "A", "")+`],"expectedVersion":0}`), 409, "conflict")
	if want := "aggregate order/o-1 is at version 1, not the expectedVersion 0; nothing was stored"; b.Message != want {
		t.Errorf("conflict message %q, want %q", b.Message, want)
	}
}

func TestSaveAggregateIDMismatch(t *testing.T) {
	e := newEnv(t, nil)
	b := mustErr(t, e.do("POST", "/aggregates/order/o-1/events", `{"aggregateId":"o-2","events":[`+ev(id1, "A", "")+`]}`), 422, "invalid")
	if !hasField(b.Errors, "aggregateId") {
		t.Errorf("errors %+v do not name aggregateId", b.Errors)
	}
	mustErr(t, e.do("GET", "/aggregates/order/o-1", ""), 404, "not_found")
}

func TestSaveRejections(t *testing.T) {
	e := newEnv(t, nil)
	cases := []struct {
		name, body string
		status     int
		code       string
		field      string // expected in errors[], if any
	}{
		{"malformed", `{"events":[`, 400, "malformed", ""},
		{"empty body", ``, 400, "malformed", ""},
		{"trailing garbage", `{"events":[]} x`, 400, "malformed", ""},
		{"not an object", `[1,2]`, 422, "invalid", ""},
		{"events missing", `{}`, 422, "invalid", "events"},
		{"events not an array", `{"events":{}}`, 422, "invalid", "events"},
		{"empty batch", `{"events":[]}`, 422, "invalid", "events"},
		{"event not an object", `{"events":[1]}`, 422, "invalid", "events[0]"},
		{"eventId not a string", `{"events":[{"eventId":1,"eventType":"A"}]}`, 422, "invalid", "events[0].eventId"},
		{"eventId not a UUID", events(ev("nope", "A", "")), 422, "invalid", "events[0].eventId"},
		{"eventType missing", `{"events":[{"eventId":"` + id1 + `"}]}`, 422, "invalid", "events[0].eventType"},
		{"data not an object", events(ev(id1, "A", `[1]`)), 422, "invalid", "events[0].data"},
		{"data a string", events(ev(id1, "A", `"x"`)), 422, "invalid", "events[0].data"},
		{"same id twice", events(ev(id1, "A", ""), ev(id1, "A", "")), 422, "invalid", "events[1].eventId"},
		{"expectedVersion not an integer", `{"events":[` + ev(id1, "A", "") + `],"expectedVersion":1.5}`, 422, "invalid", "expectedVersion"},
		{"expectedVersion a string", `{"events":[` + ev(id1, "A", "") + `],"expectedVersion":"1"}`, 422, "invalid", "expectedVersion"},
		{"expectedVersion negative", `{"events":[` + ev(id1, "A", "") + `],"expectedVersion":-1}`, 422, "invalid", "expectedVersion"},
		{"field twice", `{"events":[],"events":[]}`, 422, "invalid", "events"},
		{"not UTF-8", "{\"events\":[{\"eventId\":\"" + id1 + "\",\"eventType\":\"\xff\"}]}", 422, "invalid", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := mustErr(t, e.do("POST", "/aggregates/order/o-1/events", c.body, "Content-Type", "application/json"), c.status, c.code)
			if c.field != "" && !hasField(b.Errors, c.field) {
				t.Errorf("errors %+v do not name %s", b.Errors, c.field)
			}
		})
	}
	mustErr(t, e.do("GET", "/aggregates/order/o-1", ""), 404, "not_found")
	// Unknown fields are refused, naming them (issue 9: a misspelt
	// expectedVersion must not bypass the concurrency check); until 0.x
	// they were ignored.
	b := mustErr(t, e.do("POST", "/aggregates/order/o-1/events",
		`{"expected_version":0,"events":[{"eventID":"`+id1+`","eventType":"A","meta":1}]}`), 422, "invalid")
	for _, f := range []string{"expected_version", "events[0].eventID", "events[0].meta"} {
		if !hasField(b.Errors, f) {
			t.Errorf("errors %+v do not name %s", b.Errors, f)
		}
	}
	if !strings.Contains(fmt.Sprint(b.Errors), `did you mean "expectedVersion"?`) {
		t.Errorf("errors %+v do not suggest expectedVersion", b.Errors)
	}
	mustErr(t, e.do("GET", "/aggregates/order/o-1", ""), 404, "not_found")
}

func TestContentType(t *testing.T) {
	e := newEnv(t, nil)
	body := events(ev(id1, "A", ""))
	for _, ct := range []string{"application/json; charset=utf-8", "Application/JSON; charset=UTF-8"} {
		e.must(200, "POST", "/aggregates/order/o-1/events", body, "Content-Type", ct)
	}
	for _, ct := range []string{"-", "text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1"} {
		if ct == "-" {
			ct = ""
		}
		mustErr(t, e.do("POST", "/aggregates/order/o-2/events", body, "Content-Type", ct), 415, "unsupported_media_type")
	}
	mustErr(t, e.do("GET", "/aggregates/order/o-2", ""), 404, "not_found")
}

func TestBodyLimit(t *testing.T) {
	e := newEnv(t, &httpapi.Options{MaxBodyBytes: 100})
	big := events(ev(id1, "A", `{"pad":"`+strings.Repeat("x", 200)+`"}`))
	mustErr(t, e.do("POST", "/aggregates/order/o-1/events", big), 413, "too_large")

	// Without a Content-Length the limit is found while reading.
	r := httptest.NewRequest("POST", "/aggregates/order/o-1/events", io.MultiReader(strings.NewReader(big)))
	r.ContentLength = -1
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(httpapi.HeaderAccessKey, testAccess)
	r.Header.Set(httpapi.HeaderSecretAccessKey, testSecret)
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	mustErr(t, w.Result(), 413, "too_large")
	mustErr(t, e.do("GET", "/aggregates/order/o-1", ""), 404, "not_found")
	e.must(200, "POST", "/aggregates/order/o-1/events", events(ev(id1, "A", "")))
}

func TestAuth(t *testing.T) {
	e := newEnv(t, &httpapi.Options{Keys: []httpapi.KeyPair{
		{AccessKey: "first", SecretAccessKey: "one"},
		{AccessKey: testAccess, SecretAccessKey: testSecret},
		{AccessKey: "third", SecretAccessKey: "three"},
	}})
	body := events(ev(id1, "A", ""))
	cases := []struct{ name, access, secret string }{
		{"missing both", "", ""},
		{"missing secret", testAccess, ""},
		{"missing access", "", testSecret},
		{"wrong secret", testAccess, "test-secreT"},
		{"secret of another pair", testAccess, "one"},
		{"longer secret", testAccess, testSecret + "x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, req := range []struct{ method, path, body string }{
				{"POST", "/aggregates/order/o-1/events", body},
				{"GET", "/aggregates/order/o-1", ""},
				{"POST", "/projections/definitions", totalsDef},
				{"GET", "/projections/single/per-order/o-1", ""},
				{"GET", "/projections/aggregated/totals", ""},
				{"DELETE", "/nowhere", ""},
			} {
				mustErr(t, e.do(req.method, req.path, req.body,
					httpapi.HeaderAccessKey, c.access, httpapi.HeaderSecretAccessKey, c.secret), 401, "unauthorized")
			}
		})
	}
	// Nothing was written by the refused requests.
	mustErr(t, e.do("GET", "/aggregates/order/o-1", ""), 404, "not_found")
	mustErr(t, e.do("GET", "/projections/aggregated/totals", ""), 404, "not_found")
	// The pair in the middle works, and so do the others.
	e.must(200, "POST", "/aggregates/order/o-1/events", body)
	e.must(200, "GET", "/aggregates/order/o-1", "", httpapi.HeaderAccessKey, "third", httpapi.HeaderSecretAccessKey, "three")
}

func TestNoKeysRefusesEverything(t *testing.T) {
	st := newEnv(t, nil)
	h := httpapi.New(st.st, st.p, &httpapi.Options{Keys: []httpapi.KeyPair{{AccessKey: "", SecretAccessKey: ""}}})
	r := httptest.NewRequest("GET", "/aggregates/order/o-1", nil)
	r.Header.Set(httpapi.HeaderAccessKey, "")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	mustErr(t, w.Result(), 401, "unauthorized")

	h = httpapi.New(st.st, st.p, nil)
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/aggregates/order/o-1", nil))
	mustErr(t, w.Result(), 401, "unauthorized")
}

func TestRouting(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct{ method, path, allow string }{
		{"GET", "/aggregates/order/o-1/events", "POST"},
		{"PUT", "/aggregates/order/o-1", "GET, HEAD, DELETE"},
		{"POST", "/aggregates/order/o-1", "GET, HEAD, DELETE"},
		{"PUT", "/aggregates/order/events", "POST, GET, HEAD, DELETE"},
		{"POST", "/aggregates/order", "GET, HEAD, DELETE"},
		{"POST", "/feeds", "GET, HEAD"},
		{"DELETE", "/feeds/_all", "GET, HEAD"},
		{"PATCH", "/projections/definitions", "GET, HEAD, POST"},
		{"POST", "/projections/definitions/p", "GET, HEAD, PUT, DELETE"},
		{"POST", "/projections/single/p/o-1", "GET, HEAD"},
		{"POST", "/projections/aggregated/p", "GET, HEAD, DELETE"},
	} {
		res := e.do(c.method, c.path, "")
		mustErr(t, res, 405, "method_not_allowed")
		if a := res.Header.Get("Allow"); a != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, a, c.allow)
		}
	}
	for _, p := range []string{"/", "/aggregates", "/aggregates/order/o-1/events/x", "/feeds/_all/x", "/projections/single/p", "/projections/other/p"} {
		mustErr(t, e.do("GET", p, ""), 404, "not_found")
	}
}

func TestBadPathSegments(t *testing.T) {
	e := newEnv(t, nil)
	long := strings.Repeat("a", 257)
	for _, c := range []struct{ method, path, field string }{
		{"GET", "/aggregates/order/a%2Fb", "aggregateId"},
		{"GET", "/aggregates/or%00der/o-1", "aggregateType"},
		{"GET", "/aggregates/order/" + long, "aggregateId"},
		{"POST", "/aggregates/order/a%0Ab/events", "aggregateId"},
		{"GET", "/projections/single/p/a%7Fb", "aggregateId"},
		{"GET", "/projections/aggregated/" + long, "projectionName"},
		{"GET", "/projections/single/a%ffb/x", "projectionName"},
		{"GET", "/aggregates//o-1", ""},
		{"GET", "/aggregates/order/", ""},
		{"POST", "/aggregates/order//events", ""},
		{"GET", "/aggregates/order/../x/o-1", ""},
	} {
		t.Run(c.path, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.path, strings.NewReader(events(ev(id1, "A", ""))))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set(httpapi.HeaderAccessKey, testAccess)
			r.Header.Set(httpapi.HeaderSecretAccessKey, testSecret)
			w := httptest.NewRecorder()
			e.h.ServeHTTP(w, r)
			b := mustErr(t, w.Result(), 400, "malformed")
			if c.field != "" && !hasField(b.Errors, c.field) {
				t.Errorf("errors %+v do not name %s", b.Errors, c.field)
			}
		})
	}
}

func TestMountedUnderPrefix(t *testing.T) {
	e := newEnv(t, nil)
	mux := http.NewServeMux()
	mux.Handle("/es/", http.StripPrefix("/es", e.h))
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	call := func(method, path, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(httpapi.HeaderAccessKey, testAccess)
		req.Header.Set(httpapi.HeaderSecretAccessKey, testSecret)
		req.Header.Set("Content-Type", "application/json")
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = res.Body.Close() })
		return res
	}
	if res := call("POST", "/es/projections/definitions", totalsDef); res.StatusCode != 200 {
		t.Fatalf("create under prefix: %d %s", res.StatusCode, readBody(t, res))
	}
	if res := call("POST", "/es/aggregates/order/o-1/events", events(ev(id1, "OrderPlaced", `{"total":2}`))); res.StatusCode != 200 {
		t.Fatalf("save under prefix: %d %s", res.StatusCode, readBody(t, res))
	}
	res := call("GET", "/es/projections/aggregated/totals", "")
	if b := readBody(t, res); res.StatusCode != 200 || !strings.Contains(b, `"data":{"revenue":"2","orders":"1"}`) {
		t.Fatalf("query under prefix: %d %s", res.StatusCode, b)
	}
	mustErr(t, call("GET", "/es/nothing", ""), 404, "not_found")
	if res := call("GET", "/aggregates/order/o-1", ""); res.StatusCode != 404 {
		t.Errorf("unprefixed path reached the API: %d", res.StatusCode)
	}
}

func TestHead(t *testing.T) {
	e := newEnv(t, nil)
	e.must(200, "POST", "/projections/definitions", totalsDef)
	e.must(200, "POST", "/aggregates/order/o-1/events", events(ev(id1, "OrderPlaced", `{"total":1}`)))
	get := e.must(200, "GET", "/projections/aggregated/totals", "")
	head := e.must(200, "HEAD", "/projections/aggregated/totals", "")
	if b := readBody(t, head); b != "" || head.Header.Get("Content-Length") != get.Header.Get("Content-Length") {
		t.Errorf("HEAD: body %q, Content-Length %q (GET %q)", b, head.Header.Get("Content-Length"), get.Header.Get("Content-Length"))
	}
	// HEAD of an aggregate is an existence check: no body either way.
	if b := readBody(t, e.must(200, "HEAD", "/aggregates/order/o-1", "")); b != "" {
		t.Errorf("HEAD of an aggregate: body %q", b)
	}
	e.must(404, "HEAD", "/aggregates/order/o-2", "")
}
