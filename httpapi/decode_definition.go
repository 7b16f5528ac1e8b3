package httpapi

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/jsonscan"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/tidwall/gjson"
)

// maxDefinitionBytes bounds the JSON text of one definition.
const maxDefinitionBytes = 4 << 20

// decodeDefinitionBody reads a definition from its JSON form strictly: text
// that is not JSON wraps ErrMalformed; an unknown, mistyped or repeated
// field, or too many handlers or functions, is a *ValidationError. It does
// not check values (names, selectors): Create and Put do.
func decodeDefinitionBody(body []byte) (eventstore.Definition, error) {
	v := fieldErrors{op: "projection definition"}
	if len(body) > maxDefinitionBytes {
		return eventstore.Definition{}, fmt.Errorf("%w: a definition may be at most %d bytes", eventstore.ErrInvalid, maxDefinitionBytes)
	}
	if len(body) == 0 {
		return eventstore.Definition{}, apiErr(errMalformed, "the body is empty, a JSON object is required")
	}
	if err := jsonscan.Check(body, limits.MaxDataDepth); err != nil {
		return eventstore.Definition{}, apiErr(errMalformed, "the body is not valid JSON")
	}
	if !utf8.Valid(body) {
		v.add("", "must be UTF-8")
		return eventstore.Definition{}, v.err()
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		v.add("", "must be a JSON object")
		return eventstore.Definition{}, v.err()
	}
	var d eventstore.Definition
	defMembers(&v, root, "", func(key string, val gjson.Result, field string) {
		switch key {
		case "projectionName":
			d.Name = defStr(&v, val, field)
		case "description":
			d.Description = defStr(&v, val, field)
		case "feedName":
			d.Feed = defStr(&v, val, field)
		case "idField":
			d.IDField = defStr(&v, val, field)
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
			d.SigningSecret = defStr(&v, val, field)
		case "indexedFields":
			for i, item := range array(val, field, &v, limits.MaxIndexedFields, "") {
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
		return eventstore.Definition{}, err
	}
	return d, nil
}

// defObjects decodes an array of at most limit objects, each member by
// member through fn, stopping once the problems fill a ValidationError.
func defObjects[T any](v *fieldErrors, val gjson.Result, field string, limit int, fn func(x *T, key string, val gjson.Result, field string)) []T {
	items := array(val, field, v, limit, "")
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
		defMembers(v, item, f+".", func(key string, val gjson.Result, field string) { fn(&x, key, val, field) })
		out = append(out, x)
		if v.full() {
			break
		}
	}
	return out
}

func decodeHandlers(v *fieldErrors, val gjson.Result, field string) []eventstore.Handler {
	return defObjects(v, val, field, limits.MaxHandlers, func(h *eventstore.Handler, key string, val gjson.Result, field string) {
		switch key {
		case "eventType":
			h.EventType = defStr(v, val, field)
		case "feedName":
			h.Feed = defStr(v, val, field)
		case "idField":
			h.IDField = defStr(v, val, field)
		case "functions":
			h.Functions = decodeFunctions(v, val, field)
		case "functionUri":
			h.FunctionURI = defStr(v, val, field)
		default:
			v.add(field, "is not a field of a handler")
		}
	})
}

func decodeFunctions(v *fieldErrors, val gjson.Result, field string) []eventstore.Function {
	return defObjects(v, val, field, limits.MaxFunctions, func(f *eventstore.Function, key string, val gjson.Result, field string) {
		switch key {
		case "function":
			f.Name = defStr(v, val, field)
		case "targetSelector":
			f.TargetSelector = defStr(v, val, field)
		case "targetFilter":
			f.TargetFilter = defStr(v, val, field)
		case "eventSelector":
			f.EventSelector = defStr(v, val, field)
		case "eventFilter":
			f.EventFilter = defStr(v, val, field)
		case "rawData":
			if val.Type != gjson.Null {
				f.RawData = []byte(val.Raw)
			}
		default:
			v.add(field, "is not a field of a function")
		}
	})
}

// defMembers calls fn for each member of obj, reporting keys given twice.
func defMembers(v *fieldErrors, obj gjson.Result, prefix string, fn func(key string, val gjson.Result, field string)) {
	var seen []string
	obj.ForEach(func(k, val gjson.Result) bool {
		key := k.String()
		field := prefix + clip(key)
		if slices.Contains(seen, key) {
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

func defStr(v *fieldErrors, val gjson.Result, field string) string {
	switch val.Type {
	case gjson.String:
		return val.Str
	case gjson.Null:
		return ""
	}
	v.add(field, "must be a string")
	return ""
}
