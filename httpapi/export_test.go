package httpapi

import (
	"net/http"
	"time"
)

// SetTokenClock sets the clock that issues and checks h's delete tokens.
func SetTokenClock(h http.Handler, now func() time.Time) {
	h.(*handler).tokens.now = now
}

// Routes returns the path patterns h serves, each with its methods.
func Routes(h http.Handler) map[string][]string {
	out := map[string][]string{}
	for _, rt := range h.(*handler).routes() {
		for _, m := range rt.methods {
			out[rt.pattern] = append(out[rt.pattern], m.method)
		}
	}
	return out
}
