package reactions

import (
	"net/http"
	"time"
)

// HTTPClient returns an HTTP client that keeps to o, as deliveries do: no
// proxy from the environment, every connection's resolved address checked
// by o, a connect timeout of 5 s, the whole call bounded by timeout, and
// no redirect followed (a 3xx answer is returned as it is). Other outbound
// callers, such as package extfunc, use it.
func (o *Outbound) HTTPClient(timeout time.Duration) *http.Client { return o.client(timeout) }

// CallProblem says why an outbound call failed, in words for API users,
// without Go's error chain (which repeats the URL and the resolver's
// internals).
func CallProblem(err error) string { return callProblem(err) }
