package eventstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore/internal/lang"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/internal/names"
)

// Definition describes a projection: which event types of which feeds it
// processes and how each changes the instance's JSON object. Its JSON form
// is the body of the HTTP definition calls.
type Definition struct {
	Name        string `json:"projectionName"`
	Description string `json:"description,omitempty"` // for people; changing it rebuilds nothing
	Feed        string `json:"feedName,omitempty"`    // the aggregate type read, unless each handler names one
	// Aggregated makes one instance over the whole feed, addressed by
	// Name; else there is one per aggregate id (or IDField value).
	Aggregated bool      `json:"aggregated"`
	IDField    string    `json:"idField,omitempty"` // single: key instances by this event field
	Handlers   []Handler `json:"handlers"`          // one per event type and feed
	// IndexedFields, for a single projection, are the fields that
	// ListOptions.Search searches, such as customer.name.
	IndexedFields []string `json:"indexedFields,omitempty"`
	SigningSecret string   `json:"-"` // keys FunctionURI calls' signatures (else Name does)
	// resets counts the resets of the projection in the store it was read
	// from (hooks.DefinitionResets).
	resets int64
	// Code is set, when read, on the definition of a CodeProjection,
	// whose Handlers then name only event types.
	Code *CodeSpec `json:"code,omitempty"`
}

// Handler applies Functions, in order, to the projection instance of every
// event of type EventType, or instead calls FunctionURI (FunctionCaller).
type Handler struct {
	EventType   string     `json:"eventType"`          // unique per feed in a definition
	Feed        string     `json:"feedName,omitempty"` // read instead of the definition's
	IDField     string     `json:"idField,omitempty"`  // overrides the definition's
	Functions   []Function `json:"functions,omitempty"`
	FunctionURI string     `json:"functionUri,omitempty"` // such as https://fn.example.com/fold
}

// Function is one operation of a handler, such as
//
//	Function{Name: FuncAdd, TargetSelector: "$.projection.total", EventSelector: "$.event.amount"}
//	Function{Name: FuncSet, TargetSelector: "$.projection.status", RawData: Literal("placed")}
//
// docs/projections.md says what each function takes and does.
type Function struct {
	Name string `json:"function"` // one of the Func constants
	// TargetSelector is the field changed, such as
	// $.projection.items[?].status, TargetFilter what [?] stands for, such
	// as @.id == $.event.id; the default target is $.projection.
	TargetSelector string `json:"targetSelector,omitempty"`
	TargetFilter   string `json:"targetFilter,omitempty"`
	// EventSelector is the input, $.event by default (a missing field does
	// nothing); EventFilter what a [?] in it stands for, else a condition
	// on the event data (@) for the function to run.
	EventSelector string          `json:"eventSelector,omitempty"`
	EventFilter   string          `json:"eventFilter,omitempty"`
	RawData       json.RawMessage `json:"rawData,omitempty"` // a literal input instead (Literal)
}

// compiled is a validated definition, ready to apply.
type compiled struct {
	def Definition
	// spec is the canonical JSON encoding of def.
	spec []byte
	// handlers maps feed and event type to their handler.
	handlers map[handlerKey]*chandler
	// feeds lists the feeds read, sorted; feed is set when there is one.
	feeds []string
	feed  string
	// indexed are the compiled IndexedFields.
	indexed []lang.Selector
	// ext: some handler calls an external function.
	ext bool
	// code is the Go code of a projection in Go (def.Code set), nil when
	// it is not registered in this Projector at the stored version.
	code *CodeProjection
}

type handlerKey struct{ feed, eventType string }

// chandler is a compiled handler.
type chandler struct {
	idField *lang.Selector // nil: the aggregate id
	ops     []lang.Op
	uri     string // an external function's, instead of ops
}

// compile validates d and compiles it. Every problem is reported in one
// *ValidationError naming the field, e.g.
// "handlers[0].functions[1].targetSelector".
func compile(d Definition) (*compiled, error) {
	v := validation{op: "projection definition"}
	checkName(&v, "projectionName", d.Name)
	if msg := descriptionProblem(d.Description); msg != "" {
		v.add("description", "%s", msg)
	}
	if d.Feed != "" {
		checkFeedName(&v, "feedName", d.Feed)
	}
	switch {
	case len(d.Handlers) == 0:
		v.add("handlers", "at least one handler is required")
	case len(d.Handlers) > limits.MaxHandlers:
		v.add("handlers", "at most %d handlers are allowed", limits.MaxHandlers)
		d.Handlers = d.Handlers[:limits.MaxHandlers]
	}
	if d.Feed == "" && slices.ContainsFunc(d.Handlers, func(h Handler) bool { return h.Feed == "" }) {
		v.add("feedName", "is required (or a feedName on every handler)")
	}
	if d.Code != nil {
		v.add("code", "is set only on projections written in Go (Projector.Register)")
	}
	defID := compileIDField(&v, "idField", d.IDField, d.Aggregated)
	c := &compiled{def: d, handlers: make(map[handlerKey]*chandler, len(d.Handlers))}
	c.indexed = compileIndexedFields(&v, d.IndexedFields, d.Aggregated)
	seen := make(map[handlerKey]int)
	for i, h := range d.Handlers {
		hf := fmt.Sprintf("handlers[%d]", i)
		feed := h.Feed
		switch {
		case feed != "":
			checkFeedName(&v, hf+".feedName", feed)
		case d.Feed == "":
		default:
			feed = d.Feed
		}
		key := handlerKey{feed, h.EventType}
		if msg := names.TypeProblem(h.EventType); msg != "" {
			v.add(hf+".eventType", "%s", msg)
		} else if j, dup := seen[key]; dup {
			v.add(hf+".eventType", "%q of feed %q is already handled by handlers[%d]", clip(h.EventType), clip(feed), j)
		} else {
			seen[key] = i
		}
		ch := &chandler{idField: defID}
		if h.IDField != "" {
			ch.idField = compileIDField(&v, hf+".idField", h.IDField, d.Aggregated)
		}
		switch {
		case h.FunctionURI != "":
			ch.uri, c.ext = h.FunctionURI, true
			checkFunctionURI(&v, hf, h)
		case len(h.Functions) == 0:
			v.add(hf+".functions", "at least one function (or a functionUri) is required")
		case len(h.Functions) > limits.MaxFunctions:
			v.add(hf+".functions", "at most %d functions are allowed", limits.MaxFunctions)
			h.Functions = h.Functions[:limits.MaxFunctions]
		}
		ch.ops = make([]lang.Op, 0, len(h.Functions))
		for j, f := range h.Functions {
			if v.full() {
				break
			}
			if o, ok := lang.CompileFunction(&v, fmt.Sprintf("%s.functions[%d]", hf, j), lang.Function(f)); ok {
				ch.ops = append(ch.ops, o)
			}
		}
		c.handlers[key] = ch
		if !slices.Contains(c.feeds, feed) {
			c.feeds = append(c.feeds, feed)
		}
		if v.full() {
			break
		}
	}
	if len(d.SigningSecret) > maxSecretBytes {
		v.add("signingSecret", "is longer than %d bytes", maxSecretBytes)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	slices.Sort(c.feeds)
	if len(c.feeds) == 1 {
		c.feed = c.feeds[0]
	}
	spec, err := jsonSpec(d)
	if err != nil {
		return nil, err
	}
	c.spec = spec
	return c, nil
}

// descriptionProblem returns what is wrong with a definition's
// description, or "".
func descriptionProblem(s string) string {
	switch {
	case len(s) > limits.MaxDescriptionBytes:
		return fmt.Sprintf("must be at most %d bytes long", limits.MaxDescriptionBytes)
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' && r != '\n' {
			return fmt.Sprintf("must not contain %q (control characters other than tab and newline)", r)
		}
	}
	return ""
}

// compileIDField compiles an idField (lang.IDField), which single
// projections alone may have.
func compileIDField(v *validation, field, s string, aggregated bool) *lang.Selector {
	if s == "" {
		return nil
	}
	if aggregated {
		v.add(field, "applies to single projections only")
		return nil
	}
	return lang.IDField(v, field, s)
}

// reads reports whether the definition handles events of aggregate type
// feed.
func (c *compiled) reads(feed string) bool {
	_, ok := slices.BinarySearch(c.feeds, feed)
	return ok
}

// handler returns the handler of an event, or nil.
func (c *compiled) handler(e *Event) *chandler {
	return c.handlers[handlerKey{e.AggregateType, e.Type}]
}
