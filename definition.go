package eventstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"
)

// Definition describes a projection: which event types of which feeds it
// processes and how each changes the projection's JSON object. Its JSON
// form is the body of the HTTP definition calls; DecodeDefinition reads it
// strictly.
type Definition struct {
	// Name is the projection name used in queries. It follows the rules of
	// aggregate ids: non-empty, at most 256 bytes, no '/' or control
	// characters.
	Name string `json:"projectionName"`
	// Description is free text for people, such as what the projection
	// is for: at most MaxDescriptionBytes of UTF-8 without control
	// characters other than tab and newline. It does not change what the
	// projection computes: Put stores a new description in place, without
	// a rebuild.
	Description string `json:"description,omitempty"`
	// Feed is the feed the projection reads: the events of the aggregate
	// type of that name. It may be empty when every handler names its own
	// feed.
	Feed string `json:"feedName,omitempty"`
	// Aggregated makes the projection one instance over all aggregates of
	// the feed, addressed by Name. When false there is one instance per
	// aggregate id (or per IDField value).
	Aggregated bool `json:"aggregated"`
	// IDField, for a single projection, keys instances by this field of
	// the event data instead of the aggregate id. Handlers may override it.
	IDField string `json:"idField,omitempty"`
	// Handlers hold one handler per processed event type and feed.
	Handlers []Handler `json:"handlers"`
	// IndexedFields, for a single projection, name the fields of the
	// instance that ListOptions.Search searches: selectors such as
	// $.projection.customer.name, or the same without the root
	// (customer.name), by key and array index; at most MaxIndexedFields.
	// The README's "Projection search" says which words they yield.
	// Changing them changes the definition: Put rebuilds it.
	IndexedFields []string `json:"indexedFields,omitempty"`
}

// Handler applies Functions, in order, to the projection instance of every
// event of type EventType.
type Handler struct {
	// EventType is the event type the handler reacts to; it is unique per
	// feed within a definition.
	EventType string `json:"eventType"`
	// Feed, when set, is the feed this handler reads instead of the
	// definition's, so one projection may read several aggregate types.
	Feed string `json:"feedName,omitempty"`
	// IDField overrides the definition's IDField for this handler.
	IDField string `json:"idField,omitempty"`
	// Functions are applied in order.
	Functions []Function `json:"functions"`
}

// Function is one operation of a handler, such as
//
//	Function{Name: FuncAdd, TargetSelector: "$.projection.total", EventSelector: "$.event.amount"}
//	Function{Name: FuncSet, TargetSelector: "$.projection.status", RawData: Literal("placed")}
//
// The Func constants name every function; the README's Functions section
// says what each takes and does.
type Function struct {
	// Name is the function, one of the Func constants such as FuncSet
	// or FuncAppend.
	Name string `json:"function"`
	// TargetSelector is the projection field changed, such as
	// $.projection.items[?].status; the default is $.projection, the
	// whole instance.
	TargetSelector string `json:"targetSelector,omitempty"`
	// TargetFilter selects the array elements a [?] in TargetSelector
	// stands for, such as @.id == $.event.id.
	TargetFilter string `json:"targetFilter,omitempty"`
	// EventSelector is the event field read as input, such as
	// $.event.total or $.metadata.timestamp; the default is $.event, the
	// whole event data. When the event lacks the field the function does
	// nothing.
	EventSelector string `json:"eventSelector,omitempty"`
	// EventFilter, with a [?] in EventSelector, selects the elements of an
	// event array read as input; without one it is a condition on the
	// event (@ is the event data) that decides whether the function runs.
	EventFilter string `json:"eventFilter,omitempty"`
	// RawData is a literal JSON input used instead of an event field. A
	// JSON string stays a string.
	RawData json.RawMessage `json:"rawData,omitempty"`
}

// maxRawData bounds a function's rawData.
const maxRawData = 64 << 10

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
	indexed []selector
}

type handlerKey struct{ feed, eventType string }

// chandler is a compiled handler.
type chandler struct {
	idField *selector // nil: the aggregate id
	ops     []op
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
		checkName(&v, "feedName", d.Feed)
	}
	switch {
	case len(d.Handlers) == 0:
		v.add("handlers", "at least one handler is required")
	case len(d.Handlers) > MaxHandlers:
		v.add("handlers", "at most %d handlers are allowed", MaxHandlers)
		d.Handlers = d.Handlers[:MaxHandlers]
	}
	if d.Feed == "" && slices.ContainsFunc(d.Handlers, func(h Handler) bool { return h.Feed == "" }) {
		v.add("feedName", "is required (or a feedName on every handler)")
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
			checkName(&v, hf+".feedName", feed)
		case d.Feed == "":
		default:
			feed = d.Feed
		}
		key := handlerKey{feed, h.EventType}
		if msg := typeProblem(h.EventType); msg != "" {
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
		case len(h.Functions) == 0:
			v.add(hf+".functions", "at least one function is required")
		case len(h.Functions) > MaxFunctions:
			v.add(hf+".functions", "at most %d functions are allowed", MaxFunctions)
			h.Functions = h.Functions[:MaxFunctions]
		}
		ch.ops = make([]op, 0, len(h.Functions))
		for j, f := range h.Functions {
			if v.full() {
				break
			}
			if o, ok := compileFunc(&v, fmt.Sprintf("%s.functions[%d]", hf, j), f); ok {
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
	if err := v.err(); err != nil {
		return nil, err
	}
	slices.Sort(c.feeds)
	if len(c.feeds) == 1 {
		c.feed = c.feeds[0]
	}
	spec, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("projection definition: %w", err)
	}
	c.spec = spec
	return c, nil
}

// descriptionProblem returns what is wrong with a definition's
// description, or "".
func descriptionProblem(s string) string {
	switch {
	case len(s) > MaxDescriptionBytes:
		return fmt.Sprintf("must be at most %d bytes long", MaxDescriptionBytes)
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

// compileIDField compiles an idField: a field name or an $.event selector.
func compileIDField(v *validation, field, s string, aggregated bool) *selector {
	if s == "" {
		return nil
	}
	if aggregated {
		v.add(field, "applies to single projections only")
		return nil
	}
	text := s
	if len(s) < 2 || s[0] != '$' {
		text = eventRoot + "." + s
	}
	sel, err := parseSelector(text, eventRoot)
	switch {
	case err != nil:
		v.add(field, "%v", err)
		return nil
	case sel.isRoot() || sel.filterAt >= 0 || sel.steps[len(sel.steps)-1].kind == stepKeys:
		v.add(field, "must name one field of the event, such as customerId or $.event.customer.id")
		return nil
	}
	return &sel
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
