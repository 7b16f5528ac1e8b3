package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// TestAuthHeaderSpellings: both spellings of the key headers are
// accepted; mixing them, an empty value or a repeated header is 401.
func TestAuthHeaderSpellings(t *testing.T) {
	e := newEnv(t, nil)
	save := `{"events":[{"eventId":"8b0c3b68-3c8f-4d0e-9a43-6f7f5d0c1a01","eventType":"A"}]}`
	const (
		sa = httpapi.HeaderAccessKey
		ss = httpapi.HeaderSecretAccessKey
		ca = httpapi.HeaderSerializedAccessKey
		cs = httpapi.HeaderSerializedSecretAccessKey
	)
	// The official clients' spelling alone.
	e.must(200, "POST", "/aggregates/order/o-1/events", save, sa, "", ss, "", ca, testAccess, cs, testSecret)
	e.must(200, "GET", "/aggregates/order/o-1", "", sa, "", ss, "", ca, testAccess, cs, testSecret)
	// The interface's spelling alone.
	e.must(200, "GET", "/aggregates/order/o-1", "")

	for _, c := range []struct {
		name string
		hdr  []string
	}{
		{"one of each spelling", []string{ss, "", ca, "", cs, testSecret}},
		{"one of each spelling, other way", []string{sa, "", cs, ""}},
		{"all four headers", []string{ca, testAccess, cs, testSecret}},
		{"serialized spelling, secret missing", []string{sa, "", ss, "", ca, testAccess}},
		{"wrong serialized secret", []string{sa, "", ss, "", ca, testAccess, cs, "nope"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustErr(t, e.do("GET", "/aggregates/order/o-1", "", c.hdr...), 401, "unauthorized")
		})
	}

	// Empty and repeated values, which e.do cannot express.
	for _, c := range []struct {
		name string
		set  func(h map[string][]string)
	}{
		{"empty access key", func(h map[string][]string) { h[ca] = []string{""}; h[cs] = []string{testSecret} }},
		{"empty secret", func(h map[string][]string) { h[sa] = []string{testAccess}; h[ss] = []string{""} }},
		{"repeated access key", func(h map[string][]string) {
			h[sa] = []string{testAccess, testAccess}
			h[ss] = []string{testSecret}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/aggregates/order/o-1", nil)
			c.set(r.Header)
			w := httptest.NewRecorder()
			e.h.ServeHTTP(w, r)
			mustErr(t, w.Result(), 401, "unauthorized")
		})
	}
}

// TestAuthorizeAndNoKeys: Options.Authorize replaces the key check (an
// application's own authentication, or none); without keys and without
// Authorize, the 401 says that nothing is configured.
func TestAuthorizeAndNoKeys(t *testing.T) {
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, nil)
	get := func(h http.Handler, header ...string) (int, string) {
		r := httptest.NewRequest("GET", "/feeds", nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}

	code, body := get(httpapi.New(st, p, nil), httpapi.HeaderAccessKey, "a", httpapi.HeaderSecretAccessKey, "b")
	if code != http.StatusUnauthorized || !strings.Contains(body, "no key pair configured") {
		t.Errorf("no keys: %d %s, want 401 saying no key pair is configured", code, body)
	}

	app := httpapi.New(st, p, &httpapi.Options{Authorize: func(r *http.Request) bool {
		return r.Header.Get("Authorization") == "Bearer app-session"
	}})
	if code, body := get(app, "Authorization", "Bearer app-session"); code != http.StatusOK {
		t.Errorf("Authorize true: %d %s, want 200", code, body)
	}
	code, body = get(app, "Authorization", "Bearer other")
	if code != http.StatusUnauthorized || strings.Contains(body, "no key pair configured") {
		t.Errorf("Authorize false: %d %s, want the usual 401", code, body)
	}
	open := httpapi.New(st, p, &httpapi.Options{Authorize: func(*http.Request) bool { return true }})
	if code, body := get(open); code != http.StatusOK {
		t.Errorf("check turned off: %d %s, want 200", code, body)
	}
}

// TestMountedWithTrailingSlashPrefix: http.StripPrefix("/es/", h) leaves
// paths without their leading slash; the handler answers a JSON 404 that
// names the mistake, not the mux's redirect out of the prefix.
func TestMountedWithTrailingSlashPrefix(t *testing.T) {
	e := newEnv(t, nil)
	mux := http.NewServeMux()
	mux.Handle("/es/", http.StripPrefix("/es/", e.h))
	r := httptest.NewRequest("GET", "/es/feeds", nil)
	r.Header.Set(httpapi.HeaderAccessKey, testAccess)
	r.Header.Set(httpapi.HeaderSecretAccessKey, testSecret)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	if w.Code != http.StatusNotFound || w.Header().Get("Content-Type") != "application/json" ||
		!strings.Contains(w.Body.String(), `without a trailing slash`) {
		t.Errorf("StripPrefix(\"/es/\"): %d %q %s, want a JSON 404 naming the prefix mistake", w.Code, w.Header().Get("Content-Type"), w.Body.String())
	}

	mux = http.NewServeMux()
	mux.Handle("/es/", http.StripPrefix("/es", e.h))
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Errorf("StripPrefix(\"/es\"): %d %s, want 200", w.Code, w.Body.String())
	}
}

// TestPathHints: a trailing slash and a POST to an aggregate without
// /events are answered with messages that say what to do.
func TestPathHints(t *testing.T) {
	e := newEnv(t, nil)
	b := mustErr(t, e.do("GET", "/aggregates/order/o-1/", ""), 400, "malformed")
	if !strings.Contains(b.Message, "ends with a slash") {
		t.Errorf("trailing slash: %q", b.Message)
	}
	b = mustErr(t, e.do("GET", "/aggregates//o-1", ""), 400, "malformed")
	if !strings.Contains(b.Message, "path segment 2 is empty") {
		t.Errorf("empty segment: %q", b.Message)
	}
	b = mustErr(t, e.do("POST", "/aggregates/order/o-1", `{"events":[]}`), 405, "method_not_allowed")
	if !strings.Contains(b.Message, "POST /aggregates/order/o-1/events") {
		t.Errorf("POST without /events: %q", b.Message)
	}
}
