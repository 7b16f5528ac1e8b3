package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/httpapi"
)

// TestJSONErrorListener: the responses net/http writes by itself, before a
// handler runs, come out in the JSON error shape.
func TestJSONErrorListener(t *testing.T) {
	e := newEnv(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e.h, MaxHeaderBytes: 4096, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(httpapi.JSONErrorListener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })

	auth := "Service-Access-Key: " + testAccess + "\r\nService-Secret-Access-Key: " + testSecret + "\r\n"
	for _, c := range []struct {
		name, raw string
		status    int
		code      string
		msg       string
	}{
		{"bad path escape", "GET /aggregates/%zz/x HTTP/1.1\r\nHost: a\r\n" + auth + "\r\n", 400, "malformed", "could not be parsed"},
		{"malformed request line", "GARBAGE\r\n\r\n", 400, "malformed", "could not be parsed"},
		{"missing Host", "GET /feeds HTTP/1.1\r\n" + auth + "\r\n", 400, "malformed", "Host"},
		{"headers too large", "GET /feeds HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("x", 20000) + "\r\n\r\n", 431, "too_large", "headers"},
		{"unsupported transfer encoding", "POST /feeds HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not_implemented", "Transfer-Encoding"},
		{"HTTP version", "GET /feeds HTTP/3.0\r\nHost: a\r\n\r\n", 505, "http_version_not_supported", "version"},
		// A request the handler answers passes unchanged.
		{"handler 405", "PATCH /feeds HTTP/1.1\r\nHost: a\r\n" + auth + "\r\n", 405, "method_not_allowed", "allowed: GET, HEAD"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(conn, c.raw); err != nil {
				t.Fatal(err)
			}
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, c.status, b)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q: %s", ct, b)
			}
			var body struct {
				Code      string            `json:"code"`
				Message   string            `json:"message"`
				Errors    []json.RawMessage `json:"errors"`
				RequestID string            `json:"requestId"`
			}
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("body %q: %v", b, err)
			}
			if body.Code != c.code || !strings.Contains(body.Message, c.msg) || body.Errors == nil ||
				body.RequestID == "" || body.RequestID != res.Header.Get(httpapi.HeaderRequestID) {
				t.Errorf("body %s (X-Request-Id %q): want code %q, a message with %q, errors [] and the request id",
					b, res.Header.Get(httpapi.HeaderRequestID), c.code, c.msg)
			}
		})
	}
}
