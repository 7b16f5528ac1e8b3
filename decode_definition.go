package eventstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore/internal/jsonscan"

	"github.com/tidwall/gjson"
)

// ErrMalformed reports input that is not well-formed JSON (DecodeDefinition;
// the HTTP API answers 400).
var ErrMalformed = errors.New("eventstore: malformed JSON")

// The projection functions, for Function.Name; the table of
// docs/projections.md says what each takes.
const (
	FuncSet      = "set"      // assign the input to the target
	FuncUnset    = "unset"    // remove the target field
	FuncMerge    = "merge"    // merge an object into the target
	FuncClear    = "clear"    // reset the target to its type's empty value (the instance to {})
	FuncDelete   = "delete"   // delete the instance
	FuncAppend   = "append"   // append the input to the target array
	FuncPush     = "push"     // the same as append
	FuncPrepend  = "prepend"  // insert the input at the front of the target array
	FuncRemove   = "remove"   // remove the elements TargetFilter selects, or the target key
	FuncAdd      = "add"      // add the input number to the target, which starts at 0
	FuncSubtract = "subtract" // subtract the input number from the target
	FuncInc      = "inc"      // add one to the target
	FuncDec      = "dec"      // subtract one from the target
	FuncSetRef   = "setref"   // mark the target's value as the instance's Reference
	FuncClearRef = "clearref" // clear the instance's Reference
)

// Literal returns v as JSON, for Function.RawData: Literal("placed") is
// the JSON string "placed", quotes included. A value encoding/json cannot
// encode gives text that Put and Create refuse, naming the field.
func Literal(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("Literal: " + err.Error())
	}
	return b
}

// maxDefinitionBytes bounds the JSON text of one definition.
const maxDefinitionBytes = 4 << 20

// DecodeDefinition reads a definition from its JSON form strictly: text
// that is not JSON wraps ErrMalformed; an unknown, mistyped or repeated
// field, or too many handlers or functions, is a *ValidationError. It does
// not check values (names, selectors): Create and Put do.
func DecodeDefinition(body []byte) (Definition, error) {
	v := validation{op: "projection definition"}
	if len(body) > maxDefinitionBytes {
		return Definition{}, fmt.Errorf("%w: a definition may be at most %d bytes", ErrInvalid, maxDefinitionBytes)
	}
	if len(body) == 0 {
		return Definition{}, fmt.Errorf("%w: the body is empty, a JSON object is required", ErrMalformed)
	}
	if err := jsonscan.Check(body, MaxDataDepth); err != nil {
		return Definition{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if !utf8.Valid(body) {
		v.add("", "must be UTF-8")
		return Definition{}, v.err()
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		v.add("", "must be a JSON object")
		return Definition{}, v.err()
	}
	var d Definition
	members(&v, root, "", func(key string, val gjson.Result, field string) {
		switch key {
		case "projectionName":
			d.Name = str(&v, val, field)
		case "description":
			d.Description = str(&v, val, field)
		case "feedName":
			d.Feed = str(&v, val, field)
		case "idField":
			d.IDField = str(&v, val, field)
		case "aggregated":
			switch val.Type {
			case gjson.True, gjson.False:
				d.Aggregated = val.Bool()
			case gjson.Null:
			default:
				v.add(field, "must be true or false")
			}
		case "handlers":
			d.Handlers = decodeHandlers(&v, val, field)
		case "signingSecret":
			d.SigningSecret = str(&v, val, field)
		case "indexedFields":
			for i, item := range arrayOf(&v, val, field, MaxIndexedFields) {
				if item.Type != gjson.String {
					v.add(fmt.Sprintf("%s[%d]", field, i), "must be a string")
					continue
				}
				d.IndexedFields = append(d.IndexedFields, item.Str)
			}
		default:
			v.add(field, "is not a field of a projection definition")
		}
	})
	if err := v.err(); err != nil {
		return Definition{}, err
	}
	return d, nil
}

// objectsOf decodes an array of at most limit objects, each member by
// member through fn, stopping once the problems fill a ValidationError.
func objectsOf[T any](v *validation, val gjson.Result, field string, limit int, fn func(x *T, key string, val gjson.Result, field string)) []T {
	items := arrayOf(v, val, field, limit)
	if len(items) == 0 {
		return nil
	}
	out := make([]T, 0, len(items))
	for i, item := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		if !item.IsObject() {
			v.add(f, "must be an object")
			continue
		}
		var x T
		members(v, item, f+".", func(key string, val gjson.Result, field string) { fn(&x, key, val, field) })
		out = append(out, x)
		if v.full() {
			break
		}
	}
	return out
}

func decodeHandlers(v *validation, val gjson.Result, field string) []Handler {
	return objectsOf(v, val, field, MaxHandlers, func(h *Handler, key string, val gjson.Result, field string) {
		switch key {
		case "eventType":
			h.EventType = str(v, val, field)
		case "feedName":
			h.Feed = str(v, val, field)
		case "idField":
			h.IDField = str(v, val, field)
		case "functions":
			h.Functions = decodeFunctions(v, val, field)
		case "functionUri":
			h.FunctionURI = str(v, val, field)
		default:
			v.add(field, "is not a field of a handler")
		}
	})
}

func decodeFunctions(v *validation, val gjson.Result, field string) []Function {
	return objectsOf(v, val, field, MaxFunctions, func(f *Function, key string, val gjson.Result, field string) {
		switch key {
		case "function":
			f.Name = str(v, val, field)
		case "targetSelector":
			f.TargetSelector = str(v, val, field)
		case "targetFilter":
			f.TargetFilter = str(v, val, field)
		case "eventSelector":
			f.EventSelector = str(v, val, field)
		case "eventFilter":
			f.EventFilter = str(v, val, field)
		case "rawData":
			if val.Type != gjson.Null {
				f.RawData = []byte(val.Raw)
			}
		default:
			v.add(field, "is not a field of a function")
		}
	})
}

// members calls fn for each member of obj, reporting keys given twice.
func members(v *validation, obj gjson.Result, prefix string, fn func(key string, val gjson.Result, field string)) {
	var seen []string
	obj.ForEach(func(k, val gjson.Result) bool {
		key := k.String()
		field := prefix + clip(key)
		if lookupString(seen, key) >= 0 {
			v.add(field, "is given more than once")
			return !v.full()
		}
		if len(seen) < 32 {
			seen = append(seen, key)
		}
		fn(key, val, field)
		return !v.full()
	})
}

// arrayOf returns the elements of an array of at most limit elements,
// counting before it builds anything.
func arrayOf(v *validation, val gjson.Result, field string, limit int) []gjson.Result {
	switch {
	case val.Type == gjson.Null:
		return nil
	case !val.IsArray():
		v.add(field, "must be an array")
		return nil
	}
	n := 0
	val.ForEach(func(_, _ gjson.Result) bool {
		n++
		return n <= limit
	})
	if n > limit {
		v.add(field, "at most %d are allowed", limit)
		return nil
	}
	return val.Array()
}

func str(v *validation, val gjson.Result, field string) string {
	switch val.Type {
	case gjson.String:
		return val.Str
	case gjson.Null:
		return ""
	}
	v.add(field, "must be a string")
	return ""
}
