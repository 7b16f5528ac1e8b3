package httpapi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore"
	"github.com/tidwall/gjson"
)

// The decoders below are strict about JSON types and lenient about unknown
// fields: a body that is not JSON is errMalformed (400); a known field of
// the wrong type, a known field given twice, or a body that is not UTF-8 is
// a *eventstore.ValidationError (422) listing every such field; unknown
// fields are ignored. JSON null counts as an absent field. Values are
// checked further by the Store and the Projector.

// saveRequest is a decoded save body.
type saveRequest struct {
	Events []eventstore.NewEvent
	// ExpectedVersion and AggregateID are nil when absent.
	ExpectedVersion *int64
	AggregateID     *string
}

// fieldErrors collects the type errors of one body.
type fieldErrors struct {
	op     string
	fields []eventstore.FieldError
}

func (f *fieldErrors) add(field, format string, args ...any) {
	f.fields = append(f.fields, eventstore.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (f *fieldErrors) err() error {
	if len(f.fields) == 0 {
		return nil
	}
	return &eventstore.ValidationError{Op: f.op, Fields: f.fields}
}

// parseBody validates body as JSON and returns its top-level object.
func parseBody(body []byte, fe *fieldErrors) (gjson.Result, error) {
	if !gjson.ValidBytes(body) {
		if len(body) == 0 {
			return gjson.Result{}, fmt.Errorf("%w: the body is empty, a JSON object is required", errMalformed)
		}
		return gjson.Result{}, fmt.Errorf("%w: the body is not valid JSON", errMalformed)
	}
	if !utf8.Valid(body) {
		fe.add("", "the body must be UTF-8")
		return gjson.Result{}, fe.err()
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		fe.add("", "the body must be a JSON object")
		return gjson.Result{}, fe.err()
	}
	return root, nil
}

// fields returns the members of obj whose keys are in names, reporting
// keys given more than once.
func fields(obj gjson.Result, prefix string, fe *fieldErrors, names ...string) []gjson.Result {
	out := make([]gjson.Result, len(names))
	obj.ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		for i, n := range names {
			if key != n {
				continue
			}
			if out[i].Exists() {
				fe.add(prefix+n, "is given more than once")
			}
			out[i] = v
		}
		return true
	})
	return out
}

func present(v gjson.Result) bool { return v.Exists() && v.Type != gjson.Null }

// str returns v as a string, or "" after recording a type error.
func str(v gjson.Result, field string, fe *fieldErrors) string {
	if !present(v) {
		return ""
	}
	if v.Type != gjson.String {
		fe.add(field, "must be a string")
		return ""
	}
	return v.String()
}

// array returns the elements of v, nil when absent, or records a type error.
func array(v gjson.Result, field string, fe *fieldErrors) []gjson.Result {
	if !present(v) {
		return nil
	}
	if !v.IsArray() {
		fe.add(field, "must be an array")
		return nil
	}
	items := v.Array()
	if items == nil {
		items = []gjson.Result{}
	}
	return items
}

// decodeSave decodes a save body.
func decodeSave(body []byte) (saveRequest, error) {
	fe := &fieldErrors{op: "save"}
	root, err := parseBody(body, fe)
	if err != nil {
		return saveRequest{}, err
	}
	var req saveRequest
	f := fields(root, "", fe, "events", "expectedVersion", "aggregateId")
	switch events := f[0]; {
	case !present(events):
		fe.add("events", "is required")
	case !events.IsArray():
		fe.add("events", "must be an array")
	default:
		items := events.Array()
		req.Events = make([]eventstore.NewEvent, 0, len(items))
		for i, item := range items {
			prefix := fmt.Sprintf("events[%d].", i)
			if !item.IsObject() {
				fe.add(prefix[:len(prefix)-1], "must be an object")
				continue
			}
			ef := fields(item, prefix, fe, "eventId", "eventType", "data", "encryptedData")
			e := eventstore.NewEvent{
				ID:            str(ef[0], prefix+"eventId", fe),
				Type:          str(ef[1], prefix+"eventType", fe),
				EncryptedData: str(ef[3], prefix+"encryptedData", fe),
			}
			if data := ef[2]; present(data) {
				if data.IsObject() {
					e.Data = json.RawMessage(data.Raw)
				} else {
					fe.add(prefix+"data", "must be a JSON object")
				}
			}
			req.Events = append(req.Events, e)
		}
	}
	if v := f[1]; present(v) {
		n, err := strconv.ParseInt(v.Raw, 10, 64)
		if v.Type != gjson.Number || err != nil {
			fe.add("expectedVersion", "must be an integer")
		} else {
			req.ExpectedVersion = &n
		}
	}
	if v := f[2]; present(v) {
		id := str(v, "aggregateId", fe)
		req.AggregateID = &id
	}
	if err := fe.err(); err != nil {
		return saveRequest{}, err
	}
	return req, nil
}

// decodeDefinition decodes a create-definition body.
func decodeDefinition(body []byte) (eventstore.Definition, error) {
	fe := &fieldErrors{op: "create projection"}
	root, err := parseBody(body, fe)
	if err != nil {
		return eventstore.Definition{}, err
	}
	f := fields(root, "", fe, "projectionName", "feedName", "aggregated", "handlers")
	d := eventstore.Definition{
		Name: str(f[0], "projectionName", fe),
		Feed: str(f[1], "feedName", fe),
	}
	switch v := f[2]; {
	case !present(v):
	case v.Type == gjson.True || v.Type == gjson.False:
		d.Aggregated = v.Bool()
	default:
		fe.add("aggregated", "must be true or false")
	}
	if items := array(f[3], "handlers", fe); items != nil {
		d.Handlers = make([]eventstore.Handler, 0, len(items))
		for i, item := range items {
			prefix := fmt.Sprintf("handlers[%d].", i)
			if !item.IsObject() {
				fe.add(prefix[:len(prefix)-1], "must be an object")
				continue
			}
			hf := fields(item, prefix, fe, "eventType", "functions")
			h := eventstore.Handler{EventType: str(hf[0], prefix+"eventType", fe)}
			if fns := array(hf[1], prefix+"functions", fe); fns != nil {
				h.Functions = make([]eventstore.Function, 0, len(fns))
				for j, fn := range fns {
					fp := fmt.Sprintf("%sfunctions[%d].", prefix, j)
					if !fn.IsObject() {
						fe.add(fp[:len(fp)-1], "must be an object")
						continue
					}
					ff := fields(fn, fp, fe, "function", "targetSelector", "eventSelector", "rawData")
					h.Functions = append(h.Functions, eventstore.Function{
						Function:       str(ff[0], fp+"function", fe),
						TargetSelector: str(ff[1], fp+"targetSelector", fe),
						EventSelector:  str(ff[2], fp+"eventSelector", fe),
						RawData:        str(ff[3], fp+"rawData", fe),
					})
				}
			}
			d.Handlers = append(d.Handlers, h)
		}
	}
	if err := fe.err(); err != nil {
		return eventstore.Definition{}, err
	}
	return d, nil
}
