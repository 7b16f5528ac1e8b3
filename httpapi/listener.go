package httpapi

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
)

// JSONErrorListener wraps the listener of an http.Server that serves the
// handler of New so that the error responses net/http writes by itself,
// before any handler runs, get the JSON error shape too: a request line or
// header that does not parse, a path with a bad escape (%zz), headers
// over the server's MaxHeaderBytes (431), an unsupported
// Transfer-Encoding (501) or HTTP version (505). net/http writes those as
// plain text straight to the connection; the wrapped connections rewrite
// exactly those responses, recognised by net/http's fixed header block,
// into
//
//	{"code": "malformed", "message": "...", "errors": [], "requestId": "..."}
//
// with Content-Type application/json and an X-Request-Id. Everything else
// written to the connection passes unchanged.
func JSONErrorListener(ln net.Listener) net.Listener {
	return &jsonErrorListener{ln}
}

type jsonErrorListener struct{ net.Listener }

func (l *jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{Conn: c}, nil
}

// plainErrorHeaders is the header block net/http's server writes after the
// status line of the error responses it makes itself (server.go, conn.serve).
// Responses of handlers never look so: they carry Date, and net/http
// writes their headers sorted, Connection before Content-Type.
const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

type jsonErrorConn struct{ net.Conn }

func (c *jsonErrorConn) Write(p []byte) (int, error) {
	if !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) {
		return c.Conn.Write(p)
	}
	eol := bytes.Index(p, []byte("\r\n"))
	if eol < 0 || !bytes.HasPrefix(p[eol:], []byte(plainErrorHeaders)) {
		return c.Conn.Write(p)
	}
	status, err := strconv.Atoi(string(p[len("HTTP/1.1 "):min(len("HTTP/1.1 ")+3, eol)]))
	if err != nil || status < 400 {
		return c.Conn.Write(p)
	}
	text := string(p[eol+len(plainErrorHeaders):])
	if _, err := c.Conn.Write(plainErrorAsJSON(status, text)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// plainErrorAsJSON is the JSON response replacing net/http's plain-text
// error of status, whose body was text (such as "400 Bad Request: missing
// required Host header").
func plainErrorAsJSON(status int, text string) []byte {
	code, msg := "malformed", "the request could not be parsed: the request line or a header is malformed, or the path has a bad %-escape"
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		code, msg = "too_large", "the request headers are too large"
	case http.StatusNotImplemented:
		code, msg = "not_implemented", "the Transfer-Encoding of the request is not supported"
	case http.StatusHTTPVersionNotSupported:
		code, msg = "http_version_not_supported", "the HTTP version of the request is not supported"
	case http.StatusBadRequest:
		// net/http names a few problems after the status text: keep that.
		prefix := "400 Bad Request: "
		if len(text) > len(prefix) && text[:len(prefix)] == prefix {
			msg = "the request could not be parsed: " + oneLine(clip(text[len(prefix):]))
		}
	default:
		if status >= 500 {
			code = "internal"
		}
		msg = oneLine(clip(text))
	}
	id := newRequestID()
	body := encodeError(errorBody{Code: code, Message: msg, RequestID: id})
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	b.WriteString("Content-Type: application/json\r\n")
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	b.WriteString("Connection: close\r\n")
	b.WriteString("X-Content-Type-Options: nosniff\r\n")
	b.WriteString(HeaderRequestID + ": " + id + "\r\n\r\n")
	b.Write(body)
	return b.Bytes()
}
