package reactions

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/internal/names"
)

// Action types.
const (
	// ActionHTTPPost POSTs the event to Action.TargetURI.
	ActionHTTPPost = "HTTP_POST"
	// ActionFunc calls the Go function Options.Funcs[Action.Function].
	ActionFunc = "FUNC"
)

// Bounds of a definition. Every one is checked by Engine.Create and
// Engine.Put, which name the field that exceeds it.
const (
	// DefaultMaxDefinitions is how many reaction definitions an Engine
	// keeps when Options.MaxDefinitions is 0.
	DefaultMaxDefinitions = 100
	// MaxCancelTypes bounds Definition.CancelOnEventTypes.
	MaxCancelTypes = 100
	// MaxHeaders bounds Action.HTTPHeaders; MaxHeaderBytes the length of
	// each name and value.
	MaxHeaders     = 32
	MaxHeaderBytes = 4096
	// MaxURIBytes bounds Action.TargetURI.
	MaxURIBytes = 2048
	// MaxSecretBytes bounds Action.SigningSecret.
	MaxSecretBytes = 512
	// MaxDescriptionBytes bounds Definition.Description.
	MaxDescriptionBytes = 4096
	// MaxOffset bounds the magnitude of Definition.Offset (ten years).
	MaxOffset = 3650 * 24 * time.Hour
	// maxPathDepth bounds the keys of TriggerTimeField.
	maxPathDepth = 32
)

// Header names of a delivery.
const (
	// HeaderSignature carries the hex HMAC-SHA256 of the body, keyed with
	// the action's SigningSecret, else the definition's name.
	HeaderSignature = "Serialized-Request-Signature"
	// HeaderReactionID carries the reaction's id: a receiver that has seen
	// it already may drop the call as a repeat.
	HeaderReactionID = "Serialized-Reaction-Id"
)

// Definition says which events schedule a reaction, when it is due and what
// it does. Its JSON form is the body of the HTTP API.
type Definition struct {
	// Name identifies the definition (reactionName).
	Name string `json:"reactionName"`
	// FeedName is the aggregate type whose events are followed.
	FeedName string `json:"feedName"`
	// ReactOnEventType is the event type that schedules a reaction.
	ReactOnEventType string `json:"reactOnEventType"`
	// Description is free text.
	Description string `json:"description,omitempty"`
	// CancelOnEventTypes are event types that cancel the pending reactions
	// of this definition for their aggregate.
	CancelOnEventTypes []string `json:"cancelOnEventTypes,omitempty"`
	// TriggerTimeField, when set, is a path into the event's data (such as
	// "dueDate", "order.dueDate" or "$.event.order.dueDate") holding the
	// trigger time as milliseconds since the epoch, an RFC 3339 date-time
	// or a date (midnight UTC). Without it the trigger time is the time the
	// event was stored.
	TriggerTimeField string `json:"triggerTimeField,omitempty"`
	// Offset is added to the trigger time: an ISO-8601 duration such as
	// "PT1H", "P3D" or "-PT30M" (weeks, days, hours, minutes and seconds;
	// years and months are refused as their length varies), at most
	// MaxOffset either way.
	Offset string `json:"offset,omitempty"`
	// Action is what the reaction does.
	Action Action `json:"action"`
	// CreatedAt is when the definition was created in the Engine it was
	// read from (Engine.Definition, Engine.Definitions); Create and Put
	// ignore it, and it is not part of the JSON form. SyncDefinitions uses
	// it: see there.
	CreatedAt time.Time `json:"-"`
}

// Action is what a reaction does when it is due.
type Action struct {
	// Type is ActionHTTPPost or ActionFunc.
	Type string `json:"actionType"`
	// TargetURI is the http or https address an ActionHTTPPost calls.
	TargetURI string `json:"targetUri,omitempty"`
	// SigningSecret keys the signature header; the definition's name when
	// empty.
	SigningSecret string `json:"signingSecret,omitempty"`
	// HTTPHeaders are sent with every call.
	HTTPHeaders map[string]string `json:"httpHeaders,omitempty"`
	// Function names the Go function of an ActionFunc in Options.Funcs.
	Function string `json:"function,omitempty"`
}

// compiled is a checked definition, ready to schedule and deliver.
type compiled struct {
	def    Definition
	spec   []byte
	cancel map[string]bool
	path   []string // TriggerTimeField's keys
	offset time.Duration
}

// reserved are headers a definition may not set.
var reserved = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Host": true, "Transfer-Encoding": true,
	"Connection": true, "Te": true, "Upgrade": true, "Trailer": true, "Expect": true,
	http.CanonicalHeaderKey(HeaderSignature): true, http.CanonicalHeaderKey(HeaderReactionID): true,
}

// compile checks d and returns it compiled, or a *eventstore.ValidationError
// naming every bad field. check, when not nil, checks the target address.
func compile(d Definition, op string, check func(u *url.URL) error) (*compiled, error) {
	v := &eventstore.ValidationError{Op: op}
	add := func(field, format string, args ...any) {
		if len(v.Fields) < limits.MaxFieldErrors {
			v.Fields = append(v.Fields, eventstore.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
		}
	}
	name := func(field, s string) {
		if err := names.Check(s); err != nil {
			add(field, "%v", err)
		}
	}
	name("reactionName", d.Name)
	if err := names.CheckFeed(d.FeedName); err != nil {
		add("feedName", "%v", err)
	}
	name("reactOnEventType", d.ReactOnEventType)
	if len(d.Description) > MaxDescriptionBytes {
		add("description", "is longer than %d bytes", MaxDescriptionBytes)
	}
	c := &compiled{def: d, cancel: make(map[string]bool)}
	if len(d.CancelOnEventTypes) > MaxCancelTypes {
		add("cancelOnEventTypes", "holds more than %d types", MaxCancelTypes)
	} else {
		for i, t := range d.CancelOnEventTypes {
			field := fmt.Sprintf("cancelOnEventTypes[%d]", i)
			name(field, t)
			if t == d.ReactOnEventType {
				add(field, "is the reactOnEventType: an event cannot both schedule and cancel")
			}
			c.cancel[t] = true
		}
	}
	if d.TriggerTimeField != "" {
		p, err := parsePath(d.TriggerTimeField)
		if err != nil {
			add("triggerTimeField", "%v", err)
		}
		c.path = p
	}
	if d.Offset != "" {
		off, err := ParseDuration(d.Offset)
		if err != nil {
			add("offset", "%v", err)
		}
		c.offset = off
	}
	a := d.Action
	switch a.Type {
	case ActionHTTPPost:
		checkHTTP(a, add, check)
	case ActionFunc:
		if a.Function == "" {
			add("action.function", "is required for actionType FUNC")
		}
	case "":
		add("action.actionType", "is required: HTTP_POST")
	case "SLACK_MESSAGE", "IFTTT", "ZAPIER", "AUTOMATE":
		add("action.actionType", "%s is not supported by this server; use HTTP_POST to a bridge of your own", a.Type)
	default:
		add("action.actionType", "must be HTTP_POST, got %q", clip(a.Type))
	}
	if len(v.Fields) > 0 {
		return nil, v
	}
	spec, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("%s: encode: %w", op, err)
	}
	c.spec = spec
	return c, nil
}

// checkHTTP checks the fields of an HTTP_POST action.
func checkHTTP(a Action, add func(field, format string, args ...any), check func(u *url.URL) error) {
	switch u, err := url.Parse(a.TargetURI); {
	case a.TargetURI == "":
		add("action.targetUri", "is required for HTTP_POST")
	case len(a.TargetURI) > MaxURIBytes:
		add("action.targetUri", "is longer than %d bytes", MaxURIBytes)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		add("action.targetUri", "must be an absolute http or https URL")
	case u.User != nil:
		add("action.targetUri", "must not hold credentials; send them in httpHeaders")
	case check != nil:
		if err := check(u); err != nil {
			add("action.targetUri", "%v", err)
		}
	}
	if len(a.SigningSecret) > MaxSecretBytes {
		add("action.signingSecret", "is longer than %d bytes", MaxSecretBytes)
	}
	if len(a.HTTPHeaders) > MaxHeaders {
		add("action.httpHeaders", "holds more than %d headers", MaxHeaders)
		return
	}
	for k, val := range a.HTTPHeaders {
		field := "action.httpHeaders." + clip(k)
		switch {
		case k == "" || len(k) > MaxHeaderBytes || !validHeaderName(k):
			add(field, "is not a valid header name")
		case reserved[http.CanonicalHeaderKey(k)]:
			add(field, "is set by the server and cannot be given")
		case len(val) > MaxHeaderBytes || strings.ContainsAny(val, "\r\n\x00"):
			add(field, "must be at most %d bytes without CR, LF or NUL", MaxHeaderBytes)
		}
	}
}

// validHeaderName reports whether s is an HTTP token.
func validHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// parsePath splits a trigger time path into keys: "a.b", "$.a.b" or
// "$.event.a.b".
func parsePath(p string) ([]string, error) {
	p = strings.TrimPrefix(strings.TrimPrefix(p, "$.event."), "$.")
	if len(p) > 1024 {
		return nil, fmt.Errorf("is longer than 1024 bytes")
	}
	keys := strings.Split(p, ".")
	if len(keys) > maxPathDepth {
		return nil, fmt.Errorf("is deeper than %d keys", maxPathDepth)
	}
	for _, k := range keys {
		if k == "" {
			return nil, fmt.Errorf("must be a dotted path of field names, such as order.dueDate")
		}
	}
	return keys, nil
}

// ParseDuration parses an ISO-8601 duration of weeks, days, hours, minutes
// and seconds, with an optional sign before P and before each number:
// "PT15M", "P3D", "-PT1H30M", "PT-0.5S", "P1W". Years and months are
// refused (their length varies), as is a magnitude above MaxOffset.
func ParseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("must be an ISO-8601 duration such as PT1H, P3D or -PT30M, got %q", clip(s))
	neg := false
	rest := s
	switch {
	case strings.HasPrefix(rest, "-"):
		neg, rest = true, rest[1:]
	case strings.HasPrefix(rest, "+"):
		rest = rest[1:]
	}
	if !strings.HasPrefix(rest, "P") || rest == "P" || strings.HasSuffix(rest, "T") {
		return 0, bad
	}
	rest = rest[1:]
	var total float64
	inTime, any := false, false
	units := map[bool]map[byte]float64{
		false: {'W': 7 * 86400, 'D': 86400},
		true:  {'H': 3600, 'M': 60, 'S': 1},
	}
	for rest != "" {
		if rest[0] == 'T' {
			if inTime {
				return 0, bad
			}
			inTime, rest = true, rest[1:]
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] == '-' || rest[i] == '+' || rest[i] == '.' || rest[i] == ',' || (rest[i] >= '0' && rest[i] <= '9')) {
			i++
		}
		if i == 0 || i == len(rest) || i > 20 {
			return 0, bad
		}
		n, err := strconv.ParseFloat(strings.Replace(rest[:i], ",", ".", 1), 64)
		if err != nil {
			return 0, bad
		}
		unit := rest[i]
		if !inTime && (unit == 'Y' || unit == 'M') {
			return 0, fmt.Errorf("years and months are not supported (their length varies): use days, got %q", clip(s))
		}
		mult, ok := units[inTime][unit]
		if !ok {
			return 0, bad
		}
		total += n * mult
		any = true
		rest = rest[i+1:]
	}
	if !any || math.IsNaN(total) || math.Abs(total) > MaxOffset.Seconds() {
		if any {
			return 0, fmt.Errorf("must be at most %v either way", MaxOffset)
		}
		return 0, bad
	}
	if neg {
		total = -total
	}
	return time.Duration(math.Round(total * 1e9)), nil
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return strings.ToValidUTF8(s[:64], "") + "…"
}
