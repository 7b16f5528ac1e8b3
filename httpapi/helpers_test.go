package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/storage/memory"
)

const (
	testAccess = "test-access"
	testSecret = "test-secret"
)

// env is a handler on a fresh in-memory store.
type env struct {
	t  *testing.T
	st *eventstore.Store
	p  *eventstore.Projector
	h  http.Handler
}

func newEnv(t *testing.T, opts *httpapi.Options) *env {
	t.Helper()
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, nil)
	if opts == nil {
		opts = &httpapi.Options{}
	}
	if opts.Keys == nil {
		opts.Keys = []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}
	}
	return &env{t: t, st: st, p: p, h: httpapi.New(st, p, opts)}
}

// do serves one authenticated request; header pairs override defaults
// (an empty value deletes the header).
func (e *env) do(method, path, body string, header ...string) *http.Response {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.Header.Set(httpapi.HeaderAccessKey, testAccess)
	r.Header.Set(httpapi.HeaderSecretAccessKey, testSecret)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			r.Header.Del(header[i])
		} else {
			r.Header.Set(header[i], header[i+1])
		}
	}
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, r)
	res := w.Result()
	// Every response of the suite follows the OpenAPI document.
	b, _ := io.ReadAll(res.Body)
	checkOpenAPI(e.t, r, res, b)
	res.Body = io.NopCloser(bytes.NewReader(b))
	return res
}

// must serves a request and fails unless it gets status want.
func (e *env) must(want int, method, path, body string, header ...string) *http.Response {
	e.t.Helper()
	res := e.do(method, path, body, header...)
	if res.StatusCode != want {
		b, _ := io.ReadAll(res.Body)
		e.t.Fatalf("%s %s: status %d, want %d; body %s", method, path, res.StatusCode, want, b)
	}
	return res
}

func readBody(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// errBody is the error body every failure carries.
type errBody struct {
	Code    string                  `json:"code"`
	Message string                  `json:"message"`
	Errors  []eventstore.FieldError `json:"errors"`
}

// mustErr checks a failure's status, JSON headers and code, and returns its body.
func mustErr(t *testing.T, res *http.Response, status int, code string) errBody {
	t.Helper()
	raw := readBody(t, res)
	if res.StatusCode != status {
		t.Fatalf("status %d, want %d; body %s", res.StatusCode, status, raw)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if v := res.Header.Get("Vary"); v != "Accept-Encoding" {
		t.Errorf("Vary %q, want Accept-Encoding", v)
	}
	var b errBody
	if err := json.Unmarshal([]byte(raw), &b); err != nil {
		t.Fatalf("error body %q is not JSON: %v", raw, err)
	}
	if b.Code != code || b.Message == "" {
		t.Errorf("error body %s: want code %q and a message", raw, code)
	}
	return b
}

// hasField reports whether errs names field.
func hasField(errs []eventstore.FieldError, field string) bool {
	for _, f := range errs {
		if f.Field == field {
			return true
		}
	}
	return false
}

func ev(id, typ, data string) string {
	s := `{"eventId":"` + id + `","eventType":"` + typ + `"`
	if data != "" {
		s += `,"data":` + data
	}
	return s + "}"
}

func events(evs ...string) string {
	return `{"events":[` + strings.Join(evs, ",") + `]}`
}

const (
	id1 = "11111111-1111-4111-8111-111111111111"
	id2 = "22222222-2222-4222-8222-222222222222"
	id3 = "33333333-3333-4333-8333-333333333333"
)

const totalsDef = `{"projectionName":"totals","feedName":"order","aggregated":true,"handlers":[
 {"eventType":"OrderPlaced","functions":[
  {"function":"add","targetSelector":"$.projection.revenue","eventSelector":"$.event.total"},
  {"function":"inc","targetSelector":"$.projection.orders"}]}]}`

const perOrderDef = `{"projectionName":"per-order","feedName":"order","handlers":[
 {"eventType":"OrderPlaced","functions":[
  {"function":"set","targetSelector":"$.projection.total","eventSelector":"$.event.total"},
  {"function":"set","targetSelector":"$.projection.status","rawData":"placed"}]}]}`
