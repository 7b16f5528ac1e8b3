// Package jsondec decodes JSON objects into Go structs as
// encoding/json.Unmarshal does, without its reflection per call, for the
// common shape of event data: a flat object of strings, numbers and
// booleans. It is what package typed decodes events and projection states
// with when their codec is typed.JSONCodec: in a projection rebuild the
// decoding of each event is most of the Go handler's cost.
//
// The result is encoding/json's, always: a Decoder handles itself only
// what it is sure of (known keys matched exactly, strings without escapes,
// numbers that parse) and otherwise hands the whole input to
// encoding/json, which then gives its own value or error. Fields of other
// kinds (slices, maps, pointers, nested structs, types with their own
// UnmarshalJSON) are decoded by encoding/json one field at a time, from
// the value's bytes, as encoding/json does within a whole decode.
package jsondec

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// maxDepth bounds the nesting a Decoder skips itself; deeper values go to
// encoding/json, which has its own bound.
const maxDepth = 100

// kind is how a field is decoded.
type kind uint8

const (
	kString kind = iota
	kBool
	kFloat64
	kFloat32
	kInt // any signed integer; bits says which
	kUint
	kOther // by encoding/json, from the value's bytes
)

type field struct {
	name string
	kind kind
	bits int
	off  uintptr
	typ  reflect.Type
}

// Decoder decodes JSON into values of the struct type T.
type Decoder[T any] struct {
	fields []field
	other  bool // some field is kOther
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
	numberType      = reflect.TypeFor[json.Number]() // a string encoding/json checks
)

// For returns the Decoder of T, or nil when T is not a struct whose
// fields it can map as encoding/json does (embedded fields, the ",string"
// option, unusual names, a type with its own UnmarshalJSON or
// UnmarshalText): the caller then uses encoding/json alone.
func For[T any]() *Decoder[T] {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct || custom(t) {
		return nil
	}
	d := &Decoder[T]{}
	seen := make(map[string]bool)
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			return nil
		}
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := cut(tag, ',')
		if opts != "" && opts != "omitempty" && opts != "omitzero" && opts != "omitempty,omitzero" && opts != "omitzero,omitempty" {
			return nil // ",string" and the like
		}
		if name == "" {
			name = sf.Name
		} else if !plainName(name) {
			return nil
		}
		if seen[name] {
			return nil // encoding/json drops both: leave that to it
		}
		seen[name] = true
		f := field{name: name, off: sf.Offset, typ: sf.Type, kind: kOther}
		if !custom(sf.Type) && sf.Type != numberType {
			switch sf.Type.Kind() {
			case reflect.String:
				f.kind = kString
			case reflect.Bool:
				f.kind = kBool
			case reflect.Float64:
				f.kind = kFloat64
			case reflect.Float32:
				f.kind = kFloat32
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				f.kind, f.bits = kInt, sf.Type.Bits()
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				f.kind, f.bits = kUint, sf.Type.Bits()
			}
		}
		d.other = d.other || f.kind == kOther
		d.fields = append(d.fields, f)
	}
	return d
}

// custom reports whether t or *t decodes itself.
func custom(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Implements(unmarshalerType) || p.Implements(unmarshalerType) ||
		t.Implements(textType) || p.Implements(textType)
}

func cut(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// plainName reports whether a tag name is one encoding/json takes as it
// is: ASCII letters, digits, '_', '-' and '.'.
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Unmarshal decodes data into *v, which must be the zero T, with the
// result (value or error) of json.Unmarshal(data, v).
func (d *Decoder[T]) Unmarshal(data []byte, v *T) error {
	if d.decode(data, unsafe.Pointer(v)) {
		return nil
	}
	var zero T
	*v = zero
	return json.Unmarshal(data, v)
}

// pending is a kOther field's value, decoded once the object is known to
// be well formed.
type pending struct {
	f   *field
	raw []byte
}

// decode decodes data into the T at p and reports whether it could; when
// not, what it wrote is to be discarded.
func (d *Decoder[T]) decode(data []byte, p unsafe.Pointer) bool {
	i := ws(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = ws(data, i+1)
	var small [4]pending
	later := small[:0]
	if i < len(data) && data[i] == '}' {
		return ws(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return false
		}
		key, next, ok := plainString(data, i)
		if !ok {
			return false
		}
		i = ws(data, next)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = ws(data, i+1)
		f := d.field(key)
		if f == nil {
			if d.folds(key) {
				return false // encoding/json matches it without regard to case
			}
			if i, ok = skip(data, i, 0); !ok {
				return false
			}
		} else if f.kind == kOther {
			start := i
			if i, ok = skip(data, i, 0); !ok {
				return false
			}
			later = append(later, pending{f, data[start:i]})
		} else if i, ok = f.set(data, i, unsafe.Add(p, f.off)); !ok {
			return false
		}
		i = ws(data, i)
		if i >= len(data) {
			return false
		}
		if data[i] == '}' {
			break
		}
		if data[i] != ',' {
			return false
		}
		i = ws(data, i+1)
	}
	if ws(data, i+1) != len(data) {
		return false
	}
	for _, l := range later {
		if err := json.Unmarshal(l.raw, reflect.NewAt(l.f.typ, unsafe.Add(p, l.f.off)).Interface()); err != nil {
			return false
		}
	}
	return true
}

// field returns the field named key exactly, or nil.
func (d *Decoder[T]) field(key []byte) *field {
	for i := range d.fields {
		if d.fields[i].name == string(key) {
			return &d.fields[i]
		}
	}
	return nil
}

// folds reports whether key might match a field without regard to case
// (encoding/json's rule for keys that match none exactly): any key with
// bytes beyond ASCII, or one equal to a name in ASCII case.
func (d *Decoder[T]) folds(key []byte) bool {
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	for i := range d.fields {
		if equalFoldASCII(d.fields[i].name, key) {
			return true
		}
	}
	return false
}

func equalFoldASCII(s string, b []byte) bool {
	if len(s) != len(b) {
		return false
	}
	for i := 0; i < len(s); i++ {
		x, y := s[i], b[i]
		if x|0x20 >= 'a' && x|0x20 <= 'z' {
			x |= 0x20
			y |= 0x20
		}
		if x != y {
			return false
		}
	}
	return true
}

// set decodes the value at data[i:] into the field at p, returning the
// offset after it.
func (f *field) set(data []byte, i int, p unsafe.Pointer) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	if isNull(data, i) {
		return i + 4, true // null leaves a plain field as it is
	}
	switch f.kind {
	case kString:
		if data[i] != '"' {
			return 0, false
		}
		s, next, ok := plainString(data, i)
		if !ok {
			return 0, false
		}
		*(*string)(p) = string(s)
		return next, true
	case kBool:
		switch {
		case hasWord(data, i, "true"):
			*(*bool)(p) = true
			return i + 4, true
		case hasWord(data, i, "false"):
			*(*bool)(p) = false
			return i + 5, true
		}
		return 0, false
	}
	end, ok := number(data, i)
	if !ok {
		return 0, false
	}
	s := unsafe.String(&data[i], end-i) // not kept: parsed here
	switch f.kind {
	case kFloat64:
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, false
		}
		*(*float64)(p) = x
	case kFloat32:
		x, err := strconv.ParseFloat(s, 32)
		if err != nil {
			return 0, false
		}
		*(*float32)(p) = float32(x)
	case kInt:
		x, err := strconv.ParseInt(s, 10, f.bits)
		if err != nil {
			return 0, false
		}
		putBits(p, f.bits, uint64(x)) // two's complement: the same low bits
	case kUint:
		x, err := strconv.ParseUint(s, 10, f.bits)
		if err != nil {
			return 0, false
		}
		putBits(p, f.bits, x)
	default:
		return 0, false
	}
	return end, true
}

// putBits stores the low bits of x in the integer of that many bits at p.
func putBits(p unsafe.Pointer, bits int, x uint64) {
	switch bits {
	case 8:
		*(*uint8)(p) = uint8(x)
	case 16:
		*(*uint16)(p) = uint16(x)
	case 32:
		*(*uint32)(p) = uint32(x)
	default:
		*(*uint64)(p) = x
	}
}

func ws(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func isNull(data []byte, i int) bool { return hasWord(data, i, "null") }

func hasWord(data []byte, i int, w string) bool {
	return len(data)-i >= len(w) && string(data[i:i+len(w)]) == w
}

// plainString returns the contents of the string at data[i] (a '"') when
// it has no escapes, no control characters and is valid UTF-8, and the
// offset after it; ok is false otherwise (encoding/json then decides).
func plainString(data []byte, i int) (s []byte, next int, ok bool) {
	ascii := true
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			s = data[i+1 : j]
			if !ascii && !utf8.Valid(s) {
				return nil, 0, false
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, 0, false
}

// number returns the end of the JSON number at data[i], by the grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func number(data []byte, i int) (int, bool) {
	n := len(data)
	if i < n && data[i] == '-' {
		i++
	}
	switch {
	case i < n && data[i] == '0':
		i++
	case i < n && data[i] >= '1' && data[i] <= '9':
		i = digits(data, i)
	default:
		return 0, false
	}
	if i < n && data[i] == '.' {
		if j := digits(data, i+1); j > i+1 {
			i = j
		} else {
			return 0, false
		}
	}
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if j := digits(data, i); j > i {
			i = j
		} else {
			return 0, false
		}
	}
	return i, true
}

// digits returns the end of the run of decimal digits at data[i].
func digits(data []byte, i int) int {
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		i++
	}
	return i
}

// skip returns the offset after the well-formed JSON value at data[i].
func skip(data []byte, i, depth int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch c := data[i]; {
	case c == '"':
		return skipString(data, i)
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return 0, false
		}
		end := byte('}')
		if c == '[' {
			end = ']'
		}
		i = ws(data, i+1)
		if i < len(data) && data[i] == end {
			return i + 1, true
		}
		for {
			var ok bool
			if c == '{' {
				if i >= len(data) || data[i] != '"' {
					return 0, false
				}
				if i, ok = skipString(data, i); !ok {
					return 0, false
				}
				i = ws(data, i)
				if i >= len(data) || data[i] != ':' {
					return 0, false
				}
				i = ws(data, i+1)
			}
			if i, ok = skip(data, i, depth+1); !ok {
				return 0, false
			}
			i = ws(data, i)
			if i >= len(data) {
				return 0, false
			}
			if data[i] == end {
				return i + 1, true
			}
			if data[i] != ',' {
				return 0, false
			}
			i = ws(data, i+1)
		}
	case hasWord(data, i, "true") || hasWord(data, i, "null"):
		return i + 4, true
	case hasWord(data, i, "false"):
		return i + 5, true
	}
	return number(data, i)
}

// skipString returns the offset after the well-formed string at data[i].
func skipString(data []byte, i int) (int, bool) {
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return j + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			j++
			if j >= len(data) {
				return 0, false
			}
			switch data[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(data) {
					return 0, false
				}
				for _, h := range data[j+1 : j+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return 0, false
					}
				}
				j += 4
			default:
				return 0, false
			}
		}
	}
	return 0, false
}
