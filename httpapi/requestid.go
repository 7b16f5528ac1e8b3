package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// HeaderRequestID is the header naming a request: every response carries
// it, error bodies repeat it as requestId, and the log lines of a request
// hold it as requestId. A request may bring its own (see sanitizeRequestID);
// otherwise the handler draws one.
const HeaderRequestID = "X-Request-Id"

// maxRequestIDLen bounds an incoming request id.
const maxRequestIDLen = 128

type requestIDKey struct{}

// RequestID returns the request id of a request the handler serves, from
// its context (for middleware and endpoints of an application that wraps
// the handler: the handler stores it in the request it passes on), or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// withRequestID takes the request's X-Request-Id when it is sane, or draws
// a new one, sets it on the response and in the request's context.
func withRequestID(w http.ResponseWriter, r *http.Request) *http.Request {
	id := r.Header.Get(HeaderRequestID)
	if !saneRequestID(id) {
		id = newRequestID()
	}
	w.Header().Set(HeaderRequestID, id)
	return r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
}

// saneRequestID accepts 1 to 128 bytes of letters, digits and -_.:/+=, the
// characters of UUIDs, ULIDs, base64 and the ids of common proxies;
// anything else (spaces, quotes, control characters) could forge log
// lines or headers and is replaced.
func saneRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == ':' || c == '/' || c == '+' || c == '=':
		default:
			return false
		}
	}
	return true
}

// newRequestID returns 16 random bytes in hex.
func newRequestID() string {
	var b [16]byte
	var h [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	hex.Encode(h[:], b[:])
	return string(h[:])
}
