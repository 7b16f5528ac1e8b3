package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
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

// unsupportedParams are parameters of the hosted service that this server
// does not implement, with why.
var unsupportedParams = map[string]string{
	"from":     "is not supported: read by sequence number (since)",
	"to":       "is not supported: read by sequence number (since, limit)",
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
