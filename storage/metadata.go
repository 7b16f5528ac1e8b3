package storage

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// Names of Metadata's own fields in its encoding (and over HTTP).
const (
	MetadataCorrelationID = "correlationId"
	MetadataCausationID   = "causationId"
)

// Equal reports whether m and o hold the same metadata; a nil Values and
// an empty one are equal.
func (m Metadata) Equal(o Metadata) bool {
	return m.CorrelationID == o.CorrelationID && m.CausationID == o.CausationID && maps.Equal(m.Values, o.Values)
}

// AppendMetadata appends the encoding of m that backends store to dst and
// returns the extended slice; it appends nothing for the zero Metadata.
// The encoding is compact JSON, one object of strings as the HTTP API
// shows it: "correlationId" and "causationId" first (when not empty), then
// the keys of Values in byte order, so that equal metadata encodes to
// equal bytes. Invalid UTF-8 is replaced by U+FFFD (the Store refuses it
// before an append); its size is what MaxMetadataBytes bounds.
func AppendMetadata(dst []byte, m Metadata) []byte {
	if m.IsZero() {
		return dst
	}
	dst = append(dst, '{')
	first := true
	pair := func(k, v string) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, v)
	}
	if m.CorrelationID != "" {
		pair(MetadataCorrelationID, m.CorrelationID)
	}
	if m.CausationID != "" {
		pair(MetadataCausationID, m.CausationID)
	}
	if len(m.Values) > 0 {
		var small [MaxMetadataKeys]string
		keys := small[:0]
		for k := range m.Values {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			pair(k, m.Values[k])
		}
	}
	return append(dst, '}')
}

// errMetadata is the error of ParseMetadata for bytes that are not an
// encoding of AppendMetadata.
var errMetadata = errors.New("stored metadata is not a JSON object of strings")

// ParseMetadata decodes what AppendMetadata encoded: the zero Metadata for
// empty b. Keys "correlationId" and "causationId" fill those fields; the
// others go to Values (nil when there are none). The strings are copied:
// the result does not refer to b.
func ParseMetadata(b []byte) (Metadata, error) {
	if len(b) == 0 {
		return Metadata{}, nil
	}
	return ParseMetadataString(string(b))
}

// ParseMetadataString is ParseMetadata for a string; the result's strings
// may share s's memory.
func ParseMetadataString(s string) (Metadata, error) {
	var m Metadata
	if s == "" {
		return m, nil
	}
	r := gjson.Parse(s)
	if !r.IsObject() {
		return Metadata{}, errMetadata
	}
	var err error
	r.ForEach(func(k, v gjson.Result) bool {
		if v.Type != gjson.String {
			err = fmt.Errorf("%w: the value of %q is not a string", errMetadata, k.Str)
			return false
		}
		switch k.Str {
		case MetadataCorrelationID:
			m.CorrelationID = v.Str
		case MetadataCausationID:
			m.CausationID = v.Str
		default:
			if m.Values == nil {
				m.Values = make(map[string]string, 4)
			}
			m.Values[k.Str] = v.Str
		}
		return true
	})
	if err != nil {
		return Metadata{}, err
	}
	return m, nil
}

// appendJSONString appends s as a JSON string, escaping what JSON
// requires and replacing invalid UTF-8 with U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, "\ufffd"...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
