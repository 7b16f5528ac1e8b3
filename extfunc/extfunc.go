// Package extfunc calls external projection functions over HTTP: its
// Caller is the eventstore.FunctionCaller that a Projector needs for
// handlers giving a functionUri (eventstore.ProjectorOptions.Functions).
//
// For each event, a Caller POSTs the call's body,
//
//	{"metadata":{...},"currentState":{...},"event":{"eventId","eventType","data"}}
//
// with Content-Type application/json and the header
// Serialized-Request-Signature: the hex HMAC-SHA256 of the exact body
// bytes (reactions.Sign), keyed with the definition's signingSecret, else
// its name. A 2xx answer holding {"updatedState":{...}} (and optionally
// "reference") or {"delete":true} is the result.
//
// A failed call (a non-2xx answer, a redirect, a timeout, a refused
// connection, an answer too large or not of that form) is retried after
// Options.Backoff, doubling, until Options.Attempts calls were made; the
// last error is then the event's recorded projection error. Meanwhile the
// projection waits: its events apply in order.
//
// Calls leave the server, like reactions' deliveries, and keep to the same
// reactions.Outbound policy: loopback, link-local and the server's own
// addresses are refused unless allowed, checked at every connection on the
// resolved address and, by CheckURI, when a definition is stored.
package extfunc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/tracing"
	"github.com/eventkit-go/eventstore/reactions"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Defaults of Options.
const (
	DefaultTimeout          = 10 * time.Second
	DefaultAttempts         = 3
	DefaultBackoff          = 500 * time.Millisecond
	DefaultMaxResponseBytes = 2 << 20
)

// Options configures a Caller; nil means all defaults.
type Options struct {
	// Outbound is the policy for the addresses called; nil refuses
	// loopback, link-local, unspecified and multicast addresses.
	Outbound *reactions.Outbound
	// Timeout bounds one call, connecting and reading the answer included.
	Timeout time.Duration
	// Attempts is how many calls an event gets before its error is
	// recorded.
	Attempts int
	// Backoff is the delay before the first retry, doubled for each later
	// one.
	Backoff time.Duration
	// MaxResponseBytes bounds an answer; a longer one is a failed call.
	MaxResponseBytes int64
	// TracerProvider receives a span per function call (with all its
	// attempts), and each attempt sends its traceparent. Nil follows
	// OpenTelemetry's global provider, which traces nothing until the
	// program installs one.
	TracerProvider trace.TracerProvider
}

// Caller calls external projection functions over HTTP. It is safe for
// concurrent use.
type Caller struct {
	out      *reactions.Outbound
	http     *http.Client
	timeout  time.Duration
	attempts int
	backoff  time.Duration
	max      int64
	tracer   *tracing.Tracer
}

var _ eventstore.FunctionCaller = (*Caller)(nil)

// New returns a Caller.
func New(opts *Options) *Caller {
	if opts == nil {
		opts = &Options{}
	}
	c := &Caller{out: opts.Outbound, timeout: opts.Timeout, attempts: opts.Attempts,
		backoff: opts.Backoff, max: opts.MaxResponseBytes, tracer: tracing.New(opts.TracerProvider)}
	if c.out == nil {
		c.out = &reactions.Outbound{}
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.attempts <= 0 {
		c.attempts = DefaultAttempts
	}
	if c.backoff <= 0 {
		c.backoff = DefaultBackoff
	}
	if c.max <= 0 {
		c.max = DefaultMaxResponseBytes
	}
	c.http = c.out.HTTPClient(c.timeout)
	return c
}

// CheckURI reports an error when uri's host is refused by the outbound
// policy (a host name is resolved; one that does not resolve now passes,
// as every connection is checked again).
func (c *Caller) CheckURI(ctx context.Context, uri string) error {
	u, err := url.Parse(uri)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an absolute http or https URL")
	}
	if err := c.out.CheckURL(ctx, u); err != nil {
		return errors.New(strings.TrimSuffix(err.Error(), ": "+reactions.ErrRefusedAddress.Error()))
	}
	return nil
}

// CallFunction calls call.URI, retrying as the package doc says.
func (c *Caller) CallFunction(ctx context.Context, call eventstore.FunctionCall) (res eventstore.FunctionResult, err error) {
	ctx, span := c.tracer.Start(ctx, "eventstore.function.Call", trace.SpanKindClient)
	n := 0
	if span.Started() {
		defer func() { endCall(span, call.URI, n, err) }()
	}
	sig := reactions.Sign(call.Secret, call.Body)
	delay := c.backoff
	for n = 1; ; n++ {
		res, err := c.call(ctx, call, sig)
		if err == nil {
			return res, nil
		}
		if n >= c.attempts || errors.Is(err, errRefused) || ctx.Err() != nil {
			return eventstore.FunctionResult{}, fmt.Errorf("external function, %d %s: %v", n, plural(n), err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return eventstore.FunctionResult{}, ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, time.Minute)
	}
}

func plural(n int) string {
	if n == 1 {
		return "attempt"
	}
	return "attempts"
}

// errRefused marks a call refused by the outbound policy: retrying it
// cannot help.
var errRefused = errors.New("the function's address is refused by the server's outbound policy")

// answer is the form of a function's answer.
type answer struct {
	UpdatedState json.RawMessage `json:"updatedState"`
	Reference    json.RawMessage `json:"reference"`
	Delete       bool            `json:"delete"`
}

// call makes one call.
func (c *Caller) call(ctx context.Context, call eventstore.FunctionCall, sig string) (eventstore.FunctionResult, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// timedOut: the call's own deadline or the client's passed, not the
	// caller's context; a connect timeout is told apart by CallProblem.
	timedOut := func(err error) bool {
		var ne net.Error
		var op *net.OpError
		dial := errors.As(err, &op) && op.Op == "dial"
		return parent.Err() == nil && (ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout() && !dial))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, call.URI, bytes.NewReader(call.Body))
	if err != nil {
		return eventstore.FunctionResult{}, fmt.Errorf("%w: the function's address is not usable", errRefused)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(reactions.HeaderSignature, sig)
	req.Header.Set("User-Agent", "eventstore-projections")
	tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := c.http.Do(req)
	if err != nil {
		switch {
		case errors.Is(err, reactions.ErrRefusedAddress):
			return eventstore.FunctionResult{}, errRefused
		case timedOut(err):
			return eventstore.FunctionResult{}, fmt.Errorf("no answer within %v", c.timeout)
		}
		return eventstore.FunctionResult{}, errors.New(reactions.CallProblem(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.max+1))
	switch {
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return eventstore.FunctionResult{}, fmt.Errorf("the function answered %d", resp.StatusCode)
	case err != nil && timedOut(err):
		return eventstore.FunctionResult{}, fmt.Errorf("no whole answer within %v", c.timeout)
	case err != nil:
		return eventstore.FunctionResult{}, errors.New("the answer was cut off")
	case int64(len(b)) > c.max:
		return eventstore.FunctionResult{}, fmt.Errorf("the answer is larger than %d bytes", c.max)
	}
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		return eventstore.FunctionResult{}, errors.New(`the answer is not a JSON object of the form {"updatedState":{...}} or {"delete":true}`)
	}
	switch {
	case a.Delete:
		return eventstore.FunctionResult{Delete: true}, nil
	case len(a.UpdatedState) == 0 || a.UpdatedState[0] != '{':
		return eventstore.FunctionResult{}, errors.New(`the answer has neither an "updatedState" object nor "delete": true`)
	}
	return eventstore.FunctionResult{State: a.UpdatedState, Reference: a.Reference}, nil
}

// endCall ends the span of a function call of n attempts to uri.
func endCall(span tracing.Span, uri string, n int, err error) {
	if span.Recording() {
		span.SetAttributes(attribute.String("http.request.method", http.MethodPost),
			attribute.Int("eventstore.function.attempts", n))
		if u, perr := url.Parse(uri); perr == nil {
			span.SetAttributes(attribute.String("server.address", u.Hostname()))
		}
		if err != nil {
			span.Fail("call_failed", true)
		}
	}
	span.End()
}
