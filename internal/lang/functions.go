package lang

import (
	"fmt"
	"strings"

	"github.com/eventkit-go/eventstore/internal/decimal"
	"github.com/eventkit-go/eventstore/internal/jsonscan"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/tidwall/gjson"
)

// targetRule says what target a function takes.
type targetRule uint8

const (
	targetNone     targetRule = iota // no targetSelector
	targetOptional                   // default $.projection, the whole instance
	targetField                      // a field below $.projection is required
)

// inputRule says what input a function takes.
type inputRule uint8

const (
	inputNone     inputRule = iota // no eventSelector or rawData
	inputOptional                  // default $.event, the whole event data
	inputRequired                  // an eventSelector or rawData is required
)

// rawRule says what a rawData literal must be.
type rawRule uint8

const (
	rawAny rawRule = iota
	rawObject
	rawNumber
)

// funcSpec is one entry of the function table: what the function takes
// and how it applies. Validation messages are built from it, and the
// table of docs/projections.md follows it.
type funcSpec struct {
	name   string
	target targetRule
	filter bool // whether the target may hold [?]
	input  inputRule
	raw    rawRule
	apply  func(a *Applier, o *Op, s slot, in any) error
	// whole marks functions that act on the instance, not on slots.
	whole func(a *Applier, o *Op) error
}

// functions is the function table.
var functions = []*funcSpec{
	{name: "set", target: targetOptional, filter: true, input: inputRequired, apply: applySet},
	{name: "unset", target: targetField, filter: true, apply: applyUnset},
	{name: "merge", target: targetOptional, filter: true, input: inputOptional, raw: rawObject, apply: applyMerge},
	{name: "clear", target: targetOptional, filter: true, apply: applyClear},
	{name: "delete", whole: applyDelete},
	{name: "append", target: targetField, filter: true, input: inputOptional, apply: applyAppend},
	{name: "push", target: targetField, filter: true, input: inputOptional, apply: applyAppend},
	{name: "prepend", target: targetField, filter: true, input: inputOptional, apply: applyPrepend},
	{name: "remove", target: targetField, filter: true, input: inputNone, apply: applyRemove},
	{name: "add", target: targetField, filter: true, input: inputRequired, raw: rawNumber, apply: applyArith(false, false)},
	{name: "subtract", target: targetField, filter: true, input: inputRequired, raw: rawNumber, apply: applyArith(true, false)},
	{name: "inc", target: targetField, filter: true, apply: applyArith(false, true)},
	{name: "dec", target: targetField, filter: true, apply: applyArith(true, true)},
	{name: "setref", target: targetField, apply: applySetRef},
	{name: "clearref", whole: applyClearRef},
}

// FunctionNames returns the names of the projection functions, in the
// order of the table of docs/projections.md.
func FunctionNames() []string {
	names := make([]string, len(functions))
	for i, f := range functions {
		names[i] = f.name
	}
	return names
}

func lookupFunction(name string) *funcSpec {
	for _, f := range functions {
		if f.name == name {
			return f
		}
	}
	return nil
}

// Op is a compiled Function.
type Op struct {
	fn      *funcSpec
	target  Selector
	tfilter *filter
	// input
	hasEvent bool
	event    Selector
	efilter  *filter // elements of event[?], or a condition when cond
	cond     bool
	raw      any // a tree value; cloned at each use
	hasRaw   bool
	rawNum   decimal.Dec
	rawSize  int
}

// compileFunc validates one function against the table.
func compileFunc(v *problems, field string, f Function) (Op, bool) {
	n := v.n
	var o Op
	o.target.filterAt, o.event.filterAt = -1, -1
	o.fn = lookupFunction(f.Name)
	if o.fn == nil {
		if f.Name == "" {
			v.add(field+".function", "is required (one of %s)", strings.Join(FunctionNames(), ", "))
		} else {
			v.add(field+".function", "unknown function %q (use one of %s)", clip(f.Name), strings.Join(FunctionNames(), ", "))
		}
		return o, false
	}
	name := o.fn.name
	// Target.
	switch {
	case (o.fn.target == targetNone || o.fn.whole != nil) && f.TargetSelector != "":
		v.add(field+".targetSelector", "%s takes no targetSelector", name)
	case o.fn.target == targetNone || o.fn.whole != nil:
	case f.TargetSelector == "" && o.fn.target == targetField:
		v.add(field+".targetSelector", "is required: %s needs a field such as $.projection.total", name)
	default:
		text := f.TargetSelector
		if text == "" {
			text = projectionRoot
		}
		sel, err := parseSelector(text, projectionRoot)
		switch {
		case err != nil:
			v.add(field+".targetSelector", "%v", err)
		case o.fn.target == targetField && sel.isRoot():
			v.add(field+".targetSelector", "%s needs a field below $.projection, such as $.projection.total", name)
		case len(sel.steps) > 0 && sel.steps[len(sel.steps)-1].kind == stepKeys:
			v.add(field+".targetSelector", "['a','b'] can only be read, not written")
		case sel.filterAt >= 0 && !o.fn.filter:
			v.add(field+".targetSelector", "%s cannot use [?]", name)
		default:
			o.target = sel
		}
	}
	if f.TargetFilter != "" || o.target.filterAt >= 0 {
		switch {
		case f.TargetFilter == "":
			v.add(field+".targetFilter", "is required with [?] in targetSelector")
		case o.target.filterAt < 0:
			v.add(field+".targetFilter", "needs a [?] in targetSelector marking the array it filters")
		default:
			if flt, err := parseFilter(f.TargetFilter); err != nil {
				v.add(field+".targetFilter", "%v", err)
			} else {
				o.tfilter = &flt
			}
		}
	}
	// Input.
	hasSel, hasRaw := f.EventSelector != "", len(f.RawData) > 0
	switch {
	case o.fn.input == inputNone && (hasSel || hasRaw):
		v.add(field, "%s takes no eventSelector or rawData", name)
	case hasSel && hasRaw:
		v.add(field, "give eventSelector or rawData, not both")
	case o.fn.input == inputRequired && !hasSel && !hasRaw:
		v.add(field, "%s needs an eventSelector or rawData", name)
	case hasRaw:
		compileRaw(v, field+".rawData", &o, f.RawData)
	case hasSel || o.fn.input == inputOptional:
		text := f.EventSelector
		if text == "" {
			text = eventRoot
		}
		sel, err := parseSelector(text, eventRoot, metadataRoot)
		if err == nil {
			err = checkMetadata(sel)
		}
		if err != nil {
			v.add(field+".eventSelector", "%v", err)
		} else {
			o.event, o.hasEvent = sel, true
		}
	}
	if f.EventFilter != "" {
		if flt, err := parseFilter(f.EventFilter); err != nil {
			v.add(field+".eventFilter", "%v", err)
		} else {
			o.efilter = &flt
			o.cond = o.event.filterAt < 0
		}
	} else if o.event.filterAt >= 0 {
		v.add(field+".eventFilter", "is required with [?] in eventSelector")
	}
	return o, v.n == n
}

func compileRaw(v *problems, field string, o *Op, raw []byte) {
	if len(raw) > maxRawData {
		v.add(field, "is longer than %d bytes", maxRawData)
		return
	}
	if err := checkJSON(raw); err != "" {
		if bareWord(raw) {
			err += fmt.Sprintf("; a string needs its quotes, as in %q (eventstore.Literal(%q) in Go)", `"`+string(raw)+`"`, string(raw))
		}
		v.add(field, "%s", err)
		return
	}
	r := gjson.ParseBytes(raw)
	switch o.fn.raw {
	case rawObject:
		if !r.IsObject() {
			v.add(field, "%s needs a JSON object", o.fn.name)
			return
		}
	case rawNumber:
		d, err := readNumber(r)
		if err != nil {
			v.add(field, "%s needs a decimal number: %v", o.fn.name, err)
			return
		}
		o.rawNum = d
	}
	o.raw, o.hasRaw, o.rawSize = fromJSON(r), true, len(raw)
}

// bareWord reports whether raw is a short run of letters, digits, '-', '_'
// and spaces that starts with a letter: a string someone meant but did not
// quote.
func bareWord(raw []byte) bool {
	if len(raw) == 0 || len(raw) > 100 || !(raw[0] >= 'a' && raw[0] <= 'z' || raw[0] >= 'A' && raw[0] <= 'Z') {
		return false
	}
	switch string(raw) {
	case "true", "false", "null":
		return false
	}
	for _, c := range raw {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == ' ') {
			return false
		}
	}
	return true
}

// checkJSON returns why raw is not one JSON value within the depth limit,
// or "".
func checkJSON(raw []byte) string {
	if err := jsonscan.Check(raw, limits.MaxDataDepth); err != nil {
		return err.Error()
	}
	return ""
}

// metadataFields are the fields of $.metadata.
var metadataFields = []string{"aggregateId", "aggregateType", "feedName", "eventId", "eventType", "timestamp", "sequenceNumber", "createdAt", "updatedAt"}

// checkMetadata validates a $.metadata selector: one step, a field of
// metadataFields or a key of the event's own Metadata (correlationId,
// causationId or a key of the form Store.Save accepts in Values).
func checkMetadata(sel Selector) error {
	if sel.root != metadataRoot {
		return nil
	}
	if len(sel.steps) != 1 || sel.steps[0].kind != stepKey {
		return fmt.Errorf("$.metadata has the fields %s, and the event's metadata (correlationId, causationId and the keys saved with it), as in $.metadata.eventId or $.metadata.correlationId",
			strings.Join(metadataFields, ", "))
	}
	k := sel.steps[0].key
	if lookupString(metadataFields, k) >= 0 || k == storage.MetadataCorrelationID || k == storage.MetadataCausationID {
		return nil
	}
	if msg := MetadataKeyProblem(k); msg != "" {
		return fmt.Errorf("$.metadata[%q] is neither a field of $.metadata (%s, correlationId, causationId) nor a key an event's metadata may hold: %s",
			clip(k), strings.Join(metadataFields, ", "), msg)
	}
	return nil
}

func lookupString(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// number reads a decimal from a JSON number or from a string holding one
// (numbers in projection states are stored as strings).
func readNumber(r gjson.Result) (decimal.Dec, error) {
	var (
		d   decimal.Dec
		err error
	)
	switch r.Type {
	case gjson.Number:
		d, err = decimal.Parse(r.Raw)
	case gjson.String:
		d, err = decimal.Parse(r.Str)
	default:
		return d, fmt.Errorf("is not a number: %s", clip(r.Raw))
	}
	if err != nil {
		return d, fmt.Errorf("is not a number: %s (%v)", clip(r.Raw), err)
	}
	return d, nil
}
