package eventstore

import (
	"encoding/json"
	"fmt"

	"github.com/eventkit-go/eventstore/internal/decimal"
)

// Definition describes a projection: which event types of a feed it
// processes and how each changes the projection's JSON object. Its JSON form
// is the body of the HTTP create-definition call.
type Definition struct {
	// Name is the projection name used in queries. It follows the rules of
	// aggregate ids: non-empty, at most 256 bytes, no '/' or control
	// characters.
	Name string `json:"projectionName"`
	// Feed is the feed the projection reads: the events of the aggregate
	// type of that name.
	Feed string `json:"feedName"`
	// Aggregated makes the projection one instance over all aggregates of
	// the feed, addressed by Name. When false there is one instance per
	// aggregate id.
	Aggregated bool `json:"aggregated"`
	// Handlers hold one handler per processed event type.
	Handlers []Handler `json:"handlers"`
}

// Handler applies Functions, in order, to the projection instance of every
// event of type EventType.
type Handler struct {
	// EventType is the event type the handler reacts to; it is unique
	// within a definition.
	EventType string `json:"eventType"`
	// Functions are applied in order; at most 100.
	Functions []Function `json:"functions"`
}

// Function names.
const (
	// FuncSet assigns the input (EventSelector or RawData) to the target.
	FuncSet = "set"
	// FuncAdd adds the input number to the target, which starts at 0.
	FuncAdd = "add"
	// FuncInc adds one to the target, which starts at 0.
	FuncInc = "inc"
)

// Function is one operation of a handler.
type Function struct {
	// Function is FuncSet, FuncAdd or FuncInc.
	Function string `json:"function"`
	// TargetSelector is the projection field changed, of the form
	// $.projection.<field>[.<field>...].
	TargetSelector string `json:"targetSelector"`
	// EventSelector is the event data field read as input, of the form
	// $.event.<field>[.<field>...]. When the event lacks the field the
	// target is left unchanged.
	EventSelector string `json:"eventSelector,omitempty"`
	// RawData is a literal input used instead of an event field. For set it
	// is stored as a JSON string; for add it must be a decimal number. An
	// empty RawData counts as absent.
	RawData string `json:"rawData,omitempty"`
}

// Limits of a definition.
const (
	maxHandlers  = 1000
	maxFunctions = 100
)

// compiled is a validated definition, ready to apply.
type compiled struct {
	def      Definition
	handlers map[string][]op
}

type opKind uint8

const (
	opSet opKind = iota
	opAdd
	opInc
)

// op is a compiled Function.
type op struct {
	kind   opKind
	target selector
	event  selector // zero when the input is raw or none
	hasSel bool
	raw    []byte      // set: the JSON encoding of RawData
	rawNum decimal.Dec // add: RawData as a number
	hasRaw bool
}

// compile validates d and compiles its selectors. Every problem is reported
// in one *ValidationError naming the field, e.g.
// "handlers[0].functions[1].targetSelector".
func compile(d Definition) (*compiled, error) {
	v := validation{op: "create projection"}
	checkName(&v, "projectionName", d.Name)
	checkName(&v, "feedName", d.Feed)
	switch {
	case len(d.Handlers) == 0:
		v.add("handlers", "at least one handler is required")
	case len(d.Handlers) > maxHandlers:
		v.add("handlers", "at most %d handlers are allowed", maxHandlers)
	}
	c := &compiled{def: d, handlers: make(map[string][]op, len(d.Handlers))}
	seen := make(map[string]int)
	for i, h := range d.Handlers {
		hf := fmt.Sprintf("handlers[%d]", i)
		if msg := typeProblem(h.EventType); msg != "" {
			v.add(hf+".eventType", "%s", msg)
		} else if j, dup := seen[h.EventType]; dup {
			v.add(hf+".eventType", "%q is already handled by handlers[%d]", clip(h.EventType), j)
		} else {
			seen[h.EventType] = i
		}
		switch {
		case len(h.Functions) == 0:
			v.add(hf+".functions", "at least one function is required")
		case len(h.Functions) > maxFunctions:
			v.add(hf+".functions", "at most %d functions are allowed", maxFunctions)
		}
		ops := make([]op, 0, len(h.Functions))
		for j, f := range h.Functions {
			o, ok := compileFunc(&v, fmt.Sprintf("%s.functions[%d]", hf, j), f)
			if ok {
				ops = append(ops, o)
			}
		}
		c.handlers[h.EventType] = ops
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	return c, nil
}

func compileFunc(v *validation, field string, f Function) (op, bool) {
	n := len(v.fields)
	var o op
	switch f.Function {
	case FuncSet:
		o.kind = opSet
	case FuncAdd:
		o.kind = opAdd
	case FuncInc:
		o.kind = opInc
	case "":
		v.add(field+".function", "is required (one of set, add, inc)")
	default:
		v.add(field+".function", "unknown function %q (use set, add or inc)", clip(f.Function))
	}
	if f.TargetSelector == "" {
		v.add(field+".targetSelector", "is required")
	} else if sel, err := parseSelector(f.TargetSelector, projectionRoot); err != nil {
		v.add(field+".targetSelector", "%v", err)
	} else {
		o.target = sel
	}
	if f.EventSelector != "" {
		if sel, err := parseSelector(f.EventSelector, eventRoot); err != nil {
			v.add(field+".eventSelector", "%v", err)
		} else {
			o.event, o.hasSel = sel, true
		}
	}
	o.hasRaw = f.RawData != ""
	switch {
	case o.kind == opInc && (f.EventSelector != "" || o.hasRaw):
		v.add(field, "inc takes no eventSelector or rawData")
	case f.Function != FuncInc && f.EventSelector != "" && o.hasRaw:
		v.add(field, "give eventSelector or rawData, not both")
	case (o.kind == opSet || o.kind == opAdd) && f.Function != "" && f.EventSelector == "" && !o.hasRaw:
		v.add(field, "%s needs an eventSelector or rawData", f.Function)
	}
	if o.hasRaw {
		switch o.kind {
		case opSet:
			o.raw, _ = json.Marshal(f.RawData)
		case opAdd:
			d, err := decimal.Parse(f.RawData)
			if err != nil {
				v.add(field+".rawData", "add needs a decimal number: %v", err)
			}
			o.rawNum = d
		}
	}
	return o, len(v.fields) == n
}
