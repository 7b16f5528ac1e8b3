package httpapi_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore/httpapi"
)

// serveRaw serves a request without credentials.
func serveRaw(h http.Handler, method, path string, header ...string) *http.Response {
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// TestConsoleFiles: the console's files load without credentials, with
// the strict CSP, revalidated by ETag, gzip-compressed when asked; the
// path without its slash redirects relative to the mount point.
func TestConsoleFiles(t *testing.T) {
	e := newEnv(t, nil)
	for _, c := range []struct{ path, ctype, holds string }{
		{"/console/", "text/html; charset=utf-8", `<script type="module" src="app.js"></script>`},
		{"/console/index.html", "text/html; charset=utf-8", "<title>"},
		{"/console/app.js", "text/javascript; charset=utf-8", "sessionStorage"},
		{"/console/api.js", "text/javascript; charset=utf-8", "Service-Secret-Access-Key"},
		{"/console/dom.js", "text/javascript; charset=utf-8", "createTextNode"},
		{"/console/definitions.js", "text/javascript; charset=utf-8", "/projections/definitions"},
		{"/console/style.css", "text/css; charset=utf-8", "@media"},
		{"/console/icon.svg", "image/svg+xml", "<svg"},
	} {
		res := serveRaw(e.h, "GET", c.path)
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != c.ctype || !strings.Contains(string(body), c.holds) {
			t.Errorf("GET %s: %d %q, body holds %q: %v", c.path, res.StatusCode, res.Header.Get("Content-Type"), c.holds, strings.Contains(string(body), c.holds))
		}
		if got := res.Header.Get("Content-Security-Policy"); got != httpapi.ConsoleCSP {
			t.Errorf("GET %s: CSP %q", c.path, got)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Cache-Control") != "no-cache" || res.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("GET %s: headers %v", c.path, res.Header)
		}
		tag := res.Header.Get("ETag")
		if nm := serveRaw(e.h, "GET", c.path, "If-None-Match", tag); nm.StatusCode != 304 {
			t.Errorf("GET %s with If-None-Match %s: %d, want 304", c.path, tag, nm.StatusCode)
		}
	}
	for _, bad := range []string{"`unsafe-inline`", "'unsafe-inline'", "'unsafe-eval'", "http:", "https:", "*"} {
		if strings.Contains(httpapi.ConsoleCSP, bad) {
			t.Errorf("the CSP allows %s", bad)
		}
	}
	for _, f := range []string{"app.js", "api.js", "dom.js", "definitions.js"} {
		res := serveRaw(e.h, "GET", "/console/"+f, "Accept-Encoding", "gzip")
		zr, err := gzip.NewReader(res.Body)
		if err != nil || res.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("gzip: %v %v", err, res.Header)
		}
		js, _ := io.ReadAll(zr)
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "localStorage.set", "document.cookie", "eval("} {
			if strings.Contains(string(js), bad) {
				t.Errorf("%s uses %s", f, bad)
			}
		}
	}
	if res := serveRaw(e.h, "GET", "/console"); res.StatusCode != 301 || res.Header.Get("Location") != "console/" {
		t.Errorf("GET /console: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	for _, c := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/console/nope.js", 404}, {"GET", "/console/app.js?x=1", 404}, {"GET", "/console/../feeds", 404},
		{"POST", "/console/", 405}, {"GET", "/consoles", 401},
	} {
		if res := serveRaw(e.h, c.method, c.path); res.StatusCode != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, res.StatusCode, c.status)
		}
	}
	// Mounted under a prefix, the console's files are there too.
	mux := http.NewServeMux()
	mux.Handle("/es/", http.StripPrefix("/es", e.h))
	if res := serveRaw(mux, "GET", "/es/console/app.js"); res.StatusCode != 200 {
		t.Errorf("under /es: %d", res.StatusCode)
	}
}

// TestConsoleDisabled: with Options.DisableConsole the path is like any
// unknown one: 401 without keys, 404 with them.
func TestConsoleDisabled(t *testing.T) {
	e := newEnv(t, &httpapi.Options{DisableConsole: true})
	if res := serveRaw(e.h, "GET", "/console/"); res.StatusCode != 401 {
		t.Errorf("GET /console/ without keys: %d, want 401", res.StatusCode)
	}
	e.must(404, "GET", "/console/index.html", "")
}
