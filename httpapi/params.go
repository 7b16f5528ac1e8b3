package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/internal/limits"
)

// Limits of query parameters.
const (
	defaultLoadLimit = 1000 // versions per load
	maxLoadLimit     = 1000
	defaultFeedLimit = 100 // entries per feed read
	maxFeedLimit     = 1000
	maxWaitMillis    = 60_000  // longest long poll
	maxTokenLen      = 256     // longest deleteToken looked at
	maxAggregateSkip = 1 << 30 // skip of GET /aggregates/{type}, as of the projection lists
)

// queryError is a query parameter that does not parse or is out of range:
// 400, naming the parameter.
type queryError struct {
	param, msg string
}

func (e *queryError) Error() string {
	if e.param == "" {
		return e.msg
	}
	return "query parameter " + e.param + " " + e.msg
}

// queryParseProblem describes why url.ParseQuery failed, without Go's
// wrapping.
func queryParseProblem(err error) string {
	var esc url.EscapeError
	if errors.As(err, &esc) {
		return fmt.Sprintf("invalid escape %q", clip(string(esc)))
	}
	if strings.Contains(err.Error(), "semicolon") {
		return "a semicolon is not a separator, use &"
	}
	return "it is not of the form name=value&..."
}
func (e *queryError) Unwrap() error { return errMalformed }

// query holds the parameters of a request that an endpoint reads.
type query struct {
	v url.Values
}

// parseQuery parses the query string; known parameters other than repeat
// may be given at most once.
func parseQuery(r *http.Request, known ...string) (query, error) {
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return query{}, &queryError{"", "the query string does not parse: " + queryParseProblem(err)}
	}
	for _, k := range known {
		if len(v[k]) > 1 {
			return query{}, &queryError{k, "is given more than once"}
		}
	}
	return query{v}, nil
}

func (q query) has(name string) bool {
	_, ok := q.v[name]
	return ok
}

// int returns the integer parameter name, def when absent, or a
// queryError when it is not an integer in [lo, hi].
func (q query) int(name string, def, lo, hi int64) (int64, error) {
	vals, ok := q.v[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(vals[0], 10, 64)
	if err != nil {
		return 0, &queryError{name, fmt.Sprintf("must be an integer, got %q", clip(vals[0]))}
	}
	if n < lo || n > hi {
		if hi == 1<<63-1 {
			return 0, &queryError{name, fmt.Sprintf("must be at least %d, got %d", lo, n)}
		}
		return 0, &queryError{name, fmt.Sprintf("must be between %d and %d, got %d", lo, hi, n)}
	}
	return n, nil
}

// dateLayout is an RFC 3339 full-date.
const dateLayout = "2006-01-02"

// time returns the RFC 3339 date-time or date parameter name, the zero
// time when absent, or a queryError. A date stands for the start of that
// day in UTC, or with endOfDay its last instant (23:59:59.999999999 UTC),
// so that a date as the upper bound of a range includes its whole day.
// The year must be from 1 to 9999 (RFC 3339 has four-digit years; year 0
// is before limits.MinFeedTime).
func (q query) time(name string, endOfDay bool) (time.Time, error) {
	vals, ok := q.v[name]
	if !ok {
		return time.Time{}, nil
	}
	v := vals[0]
	bad := &queryError{name, fmt.Sprintf("must be an RFC 3339 date (2026-11-01) or date-time (2026-11-01T10:00:00Z), got %q", clip(v))}
	if strings.Contains(v, " ") {
		bad.msg += " (a + in the query string means a space: write an offset's + as %2B)"
	}
	var t time.Time
	var err error
	switch {
	case len(v) == len(dateLayout):
		t, err = time.Parse(dateLayout, v)
		if err == nil && endOfDay {
			t = t.AddDate(0, 0, 1).Add(-time.Nanosecond)
		}
	case len(v) > len(dateLayout) && v[len(dateLayout)] == 'T':
		// time.Parse with RFC3339 also accepts fractional seconds.
		t, err = time.Parse(time.RFC3339, v)
	default:
		return time.Time{}, bad
	}
	if err != nil {
		return time.Time{}, bad
	}
	if t.Before(limits.MinFeedTime) || t.After(limits.MaxFeedTime) {
		return time.Time{}, &queryError{name, fmt.Sprintf("must be in the years 1 to 9999 (UTC), got %q", clip(v))}
	}
	return t.UTC(), nil
}

// unsupportedParams are parameters of the hosted service that this server
// does not implement, with why.
var unsupportedParams = map[string]string{
	"tenantId": "is not supported: this server has one tenant",
}

// only refuses parameters other than names: a parameter that is ignored
// would give a wrong answer (a filter not applied).
func (q query) only(names ...string) error {
	for k := range q.v {
		if slices.Contains(names, k) {
			continue
		}
		if why, ok := unsupportedParams[k]; ok {
			return &queryError{clip(k), why}
		}
		return &queryError{clip(k), "is not a parameter of this endpoint; known: " + strings.Join(names, ", ")}
	}
	return nil
}
