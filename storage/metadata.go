package storage

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/eventkit-go/eventstore/internal/jsonenc"
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
// The encoding is the HTTP API's "metadata" object: compact JSON, one
// object of strings holding "correlationId" and "causationId" (when not
// empty) and the keys of Values, all in byte order, exactly as
// encoding/json writes that map with HTML escaping off. Equal metadata
// encodes to equal bytes; its size is what MaxMetadataBytes bounds.
func AppendMetadata(dst []byte, m Metadata) []byte {
	if m.IsZero() {
		return dst
	}
	var small [MaxMetadataKeys + 2]string
	keys := small[:0]
	if m.CorrelationID != "" {
		keys = append(keys, MetadataCorrelationID)
	}
	if m.CausationID != "" {
		keys = append(keys, MetadataCausationID)
	}
	for k := range m.Values {
		if (k != MetadataCorrelationID || m.CorrelationID == "") && (k != MetadataCausationID || m.CausationID == "") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		v, _ := m.Value(k)
		dst = jsonenc.AppendString(dst, k)
		dst = append(dst, ':')
		dst = jsonenc.AppendString(dst, v)
	}
	return append(dst, '}')
}

// MetadataBytes is the length of m encoded by AppendMetadata: 0 for the
// zero Metadata.
func MetadataBytes(m Metadata) int {
	if m.IsZero() {
		return 0
	}
	var buf [MaxMetadataBytes]byte // metadata past the bound grows it
	return len(AppendMetadata(buf[:0], m))
}

// Value returns the metadata named key as the encoding names it:
// CorrelationID for "correlationId" and CausationID for "causationId" (or
// the key of Values of that name when the field is empty), else the key
// of Values. ok is false when there is none.
func (m Metadata) Value(key string) (v string, ok bool) {
	switch {
	case key == MetadataCorrelationID && m.CorrelationID != "":
		return m.CorrelationID, true
	case key == MetadataCausationID && m.CausationID != "":
		return m.CausationID, true
	}
	v, ok = m.Values[key]
	return v, ok
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
