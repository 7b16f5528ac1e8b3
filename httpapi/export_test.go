package httpapi

import (
	"net/http"
	"time"
)

// SetTokenClock sets the clock that issues and checks h's delete tokens.
func SetTokenClock(h http.Handler, now func() time.Time) {
	h.(*handler).tokens.now = now
}
