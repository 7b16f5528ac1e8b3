package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// newTestHandler returns a handler on an empty memory store, with a small
// body limit.
func newTestHandler(t *testing.T) *handler {
	t.Helper()
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, nil)
	return New(st, p, &Options{Keys: []KeyPair{{AccessKey: "a", SecretAccessKey: "s"}}, MaxBodyBytes: 1024}).(*handler)
}

// concrete fills the wildcards of a pattern.
func concrete(pattern, typ, id, name string) string {
	return strings.NewReplacer("{type}", typ, "{id}", id, "{name}", name, "{tenantId}", "1b4e28ba-2fa1-41d2-883f-0016d3cca427", "{reactionId}", id).Replace(pattern)
}

// TestEveryRouteErrorShape walks every route with bad input and checks
// that each error is the one JSON shape, with the right status, the
// Content-Type, and the request id of the response.
func TestEveryRouteErrorShape(t *testing.T) {
	h := newTestHandler(t)
	type req struct {
		method, path, body, ct string
		auth                   bool
		status                 int
	}
	var reqs []req
	usesQuery := map[string]string{ // a route and method reading limit
		patAggregate: "GET", patFeed: "GET", patDefinitions: "GET", patSingleList: "GET",
	}
	for _, rt := range h.routes() {
		path := concrete(rt.pattern, "order", "o-1", "p")
		var methods []string
		for _, m := range rt.methods {
			methods = append(methods, m.method)
		}
		reqs = append(reqs, req{"GET", path, "", "", false, 401})
		reqs = append(reqs, req{"PATCH", path, "", "", true, 405})
		if strings.Contains(rt.pattern, "{") {
			bad := concrete(rt.pattern, "bad%01type", "bad%01id", "bad%01name")
			if rt.pattern == patTypeEvents {
				bad = "/aggregates/bad%01type/events"
			}
			reqs = append(reqs, req{methods[0], bad, "{}", "application/json", true, 400})
		}
		if m, ok := usesQuery[rt.pattern]; ok {
			reqs = append(reqs, req{m, path + "?limit=abc", "", "", true, 400})
			reqs = append(reqs, req{m, path + "?limit=%zz", "", "", true, 400})
		}
		for _, m := range methods {
			switch m {
			case "POST", "PUT":
				if rt.pattern == patReactionExecute { // no body
					reqs = append(reqs, req{m, path, "", "", true, 0})
					continue
				}
				reqs = append(reqs,
					req{m, path, `{"events": [`, "application/json", true, 400},
					req{m, path, `{"events": []}`, "text/plain", true, 415},
					req{m, path, `{"x":"` + strings.Repeat("y", 2000) + `"}`, "application/json", true, 413},
					req{m, path, `{"eventID": 1, "projection_name": 2}`, "application/json", true, 422})
			case "GET", "DELETE":
				// On an empty store: 404 where something is looked up.
				reqs = append(reqs, req{m, path, "", "", true, 0})
			}
		}
	}
	reqs = append(reqs, req{"GET", "/nowhere", "", "", true, 404}, req{"GET", "/feeds//x", "", "", true, 400},
		req{"DELETE", "/aggregates/order/o-1?deleteToken=forged", "", "", true, 403})

	errorsSeen := 0
	for _, c := range reqs {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		r := httptest.NewRequest(c.method, c.path, body)
		if c.ct != "" {
			r.Header.Set("Content-Type", c.ct)
		}
		if c.auth {
			r.Header.Set(HeaderSerializedAccessKey, "a")
			r.Header.Set(HeaderSerializedSecretAccessKey, "s")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		res := w.Result()
		raw, _ := io.ReadAll(res.Body)
		id := res.Header.Get(HeaderRequestID)
		if !saneRequestID(id) {
			t.Errorf("%s %s: X-Request-Id %q", c.method, c.path, id)
		}
		if c.status != 0 && res.StatusCode != c.status {
			t.Errorf("%s %s (%s): status %d, want %d: %s", c.method, c.path, c.ct, res.StatusCode, c.status, raw)
			continue
		}
		if res.StatusCode < 400 {
			continue
		}
		errorsSeen++
		if ct := res.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: %d with Content-Type %q", c.method, c.path, res.StatusCode, ct)
		}
		if res.StatusCode == 405 && res.Header.Get("Allow") == "" {
			t.Errorf("%s %s: 405 without Allow", c.method, c.path)
		}
		var eb struct {
			Code      *string                 `json:"code"`
			Message   *string                 `json:"message"`
			Errors    []eventstore.FieldError `json:"errors"`
			RequestID string                  `json:"requestId"`
		}
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		if err := dec.Decode(&eb); err != nil || eb.Code == nil || eb.Message == nil || *eb.Message == "" ||
			eb.Errors == nil || eb.RequestID != id {
			t.Errorf("%s %s: %d body %q is not the error shape with request id %s", c.method, c.path, res.StatusCode, raw, id)
			continue
		}
		for _, bad := range []string{"eventstore:", "\\u003c", "\\n"} {
			if strings.Contains(string(raw), bad) {
				t.Errorf("%s %s: body %s holds %q", c.method, c.path, raw, bad)
			}
		}
		if res.StatusCode == 422 && !slices.ContainsFunc(eb.Errors, func(f eventstore.FieldError) bool {
			return strings.Contains(f.Message, "is not a field")
		}) && !strings.Contains(*eb.Message, "field") {
			t.Errorf("%s %s: 422 does not name the unknown field: %s", c.method, c.path, raw)
		}
	}
	t.Logf("%d requests, %d error responses checked", len(reqs), errorsSeen)
	if errorsSeen < 3*len(h.routes()) {
		t.Errorf("only %d error responses checked", errorsSeen)
	}
}

// TestRequestID: a sane incoming id is kept, others are replaced.
func TestRequestID(t *testing.T) {
	h := newTestHandler(t)
	for in, keep := range map[string]bool{
		"abc-123":                 true,
		"0f8e1a2b-3c4d-4e5f-9a0b": true,
		"":                        false,
		"has space":               false,
		"quote\"":                 false,
		strings.Repeat("a", 129):  false,
	} {
		r := httptest.NewRequest("GET", "/feeds", nil)
		r.Header.Set(HeaderRequestID, in)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		got := w.Result().Header.Get(HeaderRequestID)
		if (got == in) != keep || got == "" {
			t.Errorf("incoming %q: X-Request-Id %q, keep %v", in, got, keep)
		}
		if !strings.Contains(w.Body.String(), `"requestId":"`+got+`"`) {
			t.Errorf("body %s does not repeat the request id %s", w.Body, got)
		}
	}
}

var _ http.Handler = (*handler)(nil)
