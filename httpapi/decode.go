package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/jsonscan"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/tidwall/gjson"
)

// The decoders below are strict: a body that is not JSON is errMalformed
// (400); an unknown field, a known field of the wrong type, a known field
// given twice, a body that is not UTF-8 or
// nests deeper than maxBodyDepth, or an array longer than its limit is a
// *eventstore.ValidationError (422) listing such fields (at most
// limits.MaxFieldErrors of them). JSON null
// counts as an absent field. Values are checked further by the Store and
// the Projector.
//
// The body is scanned once, without recursion, before anything is decoded,
// and arrays are counted before their elements are: a refused body costs a
// small multiple of its size.

// Limits checked while decoding.
const (
	// maxBodyDepth bounds the nesting of a body. It leaves room above
	// limits.MaxDataDepth so that event data nested too deeply is
	// refused by the Store, naming the event.
	maxBodyDepth = 256
)

// saveRequest is a decoded save body.
type saveRequest struct {
	Events []eventstore.NewEvent
	// ExpectedVersion and AggregateID are nil when absent.
	ExpectedVersion *int64
	AggregateID     *string
}

// fieldErrors collects the type errors of one body. Beyond
// limits.MaxFieldErrors it only counts them.
type fieldErrors struct {
	op      string
	fields  []eventstore.FieldError
	omitted int
}

func (f *fieldErrors) add(field, format string, args ...any) {
	if len(f.fields) >= limits.MaxFieldErrors {
		f.omitted++
		return
	}
	f.fields = append(f.fields, eventstore.FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

func (f *fieldErrors) err() error {
	if len(f.fields) == 0 {
		return nil
	}
	return &eventstore.ValidationError{Op: f.op, Fields: f.fields, Omitted: f.omitted}
}

// full reports whether the collector holds as many problems as it lists.
func (f *fieldErrors) full() bool { return len(f.fields) >= limits.MaxFieldErrors }

// parseBody validates body as JSON and returns its top-level object.
func parseBody(body []byte, fe *fieldErrors) (gjson.Result, error) {
	if err := jsonscan.Check(body, maxBodyDepth); err != nil {
		switch {
		case errors.Is(err, jsonscan.ErrDepth):
			fe.add("", "the body nests deeper than %d levels (event data may nest %d)", maxBodyDepth, limits.MaxDataDepth)
			return gjson.Result{}, fe.err()
		case len(body) == 0:
			return gjson.Result{}, apiErr(errMalformed, "the body is empty, a JSON object is required")
		}
		return gjson.Result{}, syntaxError(body, err)
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
// keys given more than once and keys not in names: a misspelt field (such
// as expected_version) must never be ignored, or a typo could bypass the
// concurrency check. what names the object in the message.
func fields(obj gjson.Result, prefix, what string, fe *fieldErrors, names ...string) []gjson.Result {
	out := make([]gjson.Result, len(names))
	obj.ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		known := false
		for i, n := range names {
			if key != n {
				continue
			}
			known = true
			if out[i].Exists() {
				fe.add(prefix+n, "is given more than once")
			}
			out[i] = v
		}
		if !known {
			msg := "is not a field of " + what
			if near := nearName(key, names); near != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", near)
			}
			fe.add(prefix+clip(key), "%s", msg)
		}
		return true
	})
	return out
}

// nearName returns the name of names that key spells differently (case,
// underscores, dashes), or "".
func nearName(key string, names []string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	for _, n := range names {
		if norm(n) == norm(key) {
			return n
		}
	}
	return ""
}

func present(v gjson.Result) bool { return v.Exists() && v.Type != gjson.Null }

// str returns v as a string, or "" after recording a type error of the
// field prefix+name (joined only then).
func str(v gjson.Result, prefix, name string, fe *fieldErrors) string {
	if !present(v) {
		return ""
	}
	if v.Type != gjson.String {
		fe.add(prefix+name, "must be a string")
		return ""
	}
	return v.String()
}

// array returns the elements of v, nil when absent, or records a type
// error, or a problem when v holds more than limit elements, which are
// counted (up to limit+1) before any is built; what names them in the
// message, if not "".
func array(v gjson.Result, field string, fe *fieldErrors, limit int, what string) []gjson.Result {
	if !present(v) {
		return nil
	}
	if !v.IsArray() {
		fe.add(field, "must be an array")
		return nil
	}
	n := 0
	v.ForEach(func(_, _ gjson.Result) bool {
		n++
		return n <= limit
	})
	if n > limit {
		if what != "" {
			what += " "
		}
		fe.add(field, "at most %d %sare allowed", limit, what)
		return nil
	}
	items := make([]gjson.Result, 0, n)
	v.ForEach(func(_, item gjson.Result) bool {
		items = append(items, item)
		return true
	})
	return items
}

// metadata decodes an event's "metadata" object: strings only,
// "correlationId" and "causationId" into their fields, the other keys into
// Values. Its members are counted (up to the bound, plus one) before any
// is kept; the Store checks the keys and the encoded size.
func metadata(v gjson.Result, field string, fe *fieldErrors) eventstore.Metadata {
	var m eventstore.Metadata
	if !present(v) {
		return m
	}
	if !v.IsObject() {
		fe.add(field, "must be a JSON object of strings")
		return m
	}
	const limit = limits.MaxMetadataKeys + 2 // with correlationId and causationId
	n := 0
	v.ForEach(func(_, _ gjson.Result) bool {
		n++
		return n <= limit
	})
	if n > limit {
		fe.add(field, "may hold at most %d keys besides correlationId and causationId", limits.MaxMetadataKeys)
		return m
	}
	v.ForEach(func(k, val gjson.Result) bool {
		key := k.String()
		if val.Type != gjson.String {
			fe.add(field+"["+strconv.Quote(clip(key))+"]", "must be a string")
			return true
		}
		_, dup := m.Value(key)
		switch {
		case dup:
			fe.add(field+"["+strconv.Quote(clip(key))+"]", "is given more than once")
		case key == storage.MetadataCorrelationID:
			m.CorrelationID = val.String()
		case key == storage.MetadataCausationID:
			m.CausationID = val.String()
		default:
			if m.Values == nil {
				m.Values = make(map[string]string, n)
			}
			m.Values[key] = val.String()
		}
		return true
	})
	return m
}

// decodeSave decodes a save body.
func decodeSave(body []byte) (saveRequest, error) {
	fe := &fieldErrors{op: "save"}
	root, err := parseBody(body, fe)
	if err != nil {
		return saveRequest{}, err
	}
	var req saveRequest
	f := fields(root, "", "a save request", fe, "events", "expectedVersion", "aggregateId")
	if !present(f[0]) {
		fe.add("events", "is required")
	}
	if items := array(f[0], "events", fe, limits.MaxEventsPerSave, "events in one save"); items != nil {
		req.Events = make([]eventstore.NewEvent, 0, len(items))
		for i, item := range items {
			prefix := "events[" + strconv.Itoa(i) + "]."
			if !item.IsObject() {
				fe.add(prefix[:len(prefix)-1], "must be an object")
				continue
			}
			ef := fields(item, prefix, "an event", fe, "eventId", "eventType", "data", "encryptedData", "metadata")
			e := eventstore.NewEvent{
				ID:            str(ef[0], prefix, "eventId", fe),
				Type:          str(ef[1], prefix, "eventType", fe),
				EncryptedData: str(ef[3], prefix, "encryptedData", fe),
				Metadata:      metadata(ef[4], prefix+"metadata", fe),
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
		id := str(v, "", "aggregateId", fe)
		req.AggregateID = &id
	}
	if err := fe.err(); err != nil {
		return saveRequest{}, err
	}
	return req, nil
}

// decodeDefinition decodes a definition body with the library's strict
// decoder.
func decodeDefinition(body []byte) (eventstore.Definition, error) {
	if err := checkDefinitionSyntax(body); err != nil {
		return eventstore.Definition{}, err
	}
	return decodeDefinitionBody(body)
}

// syntaxError describes a jsonscan error of body for a client: what was
// found, and where, by line, column (in bytes, from 1) and byte offset.
func syntaxError(body []byte, err error) error {
	var se *jsonscan.Error
	if !errors.As(err, &se) {
		return apiErr(errMalformed, "the body is not valid JSON")
	}
	off := min(max(se.Offset, 0), len(body))
	line := 1 + bytes.Count(body[:off], []byte{'\n'})
	col := off - bytes.LastIndexByte(body[:off], '\n')
	what := "unexpected end"
	if off < len(body) {
		c := body[off]
		switch {
		case c >= 0x20 && c < 0x7f:
			what = fmt.Sprintf("unexpected %q", rune(c))
		default:
			what = fmt.Sprintf("unexpected byte 0x%02x", c)
		}
	}
	return apiErr(errMalformed, "the body is not valid JSON: %s at line %d, column %d (byte %d)", what, line, col, off)
}

// checkDefinitionSyntax reports a definition body that is not JSON with
// where the problem is (decodeDefinitionBody only says that it is not).
func checkDefinitionSyntax(body []byte) error {
	if len(body) == 0 {
		return apiErr(errMalformed, "the body is empty, a JSON object is required")
	}
	if err := jsonscan.Check(body, maxBodyDepth); err != nil && errors.Is(err, jsonscan.ErrSyntax) {
		return syntaxError(body, err)
	}
	return nil
}
