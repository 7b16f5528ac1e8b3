package eventstore

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
)

// reservedMetadataKeys may not be keys of Metadata.Values: the names of
// its own fields, those of $.metadata in the function language
// (metadataFields) and those the body of an external function call puts
// beside them (functionBody), so that $.metadata.<key> always means one
// thing.
var reservedMetadataKeys = append([]string{storage.MetadataCorrelationID, storage.MetadataCausationID,
	"projectionName", "projectionId", "aggregateVersion"}, metadataFields...)

// checkEventMetadata validates the metadata of the event at field (as
// "events[3].metadata") and adds its problems to v: at most
// limits.MaxMetadataKeys keys in Values, each of the form of metadataKeyProblem,
// not reserved; every string valid UTF-8; at most limits.MaxMetadataBytes
// encoded.
func checkEventMetadata(v *validation, field string, m *Metadata) {
	if len(m.Values) > limits.MaxMetadataKeys {
		v.add(field, "may hold at most %d keys besides correlationId and causationId, got %d", limits.MaxMetadataKeys, len(m.Values))
		return
	}
	if !utf8.ValidString(m.CorrelationID) {
		v.add(field+"."+storage.MetadataCorrelationID, "must be valid UTF-8")
	}
	if !utf8.ValidString(m.CausationID) {
		v.add(field+"."+storage.MetadataCausationID, "must be valid UTF-8")
	}
	ok := true
	for k, val := range m.Values {
		if msg := metadataKeyProblem(k); msg != "" {
			v.add(fmt.Sprintf("%s[%q]", field, clip(k)), "%s", msg)
			ok = false
		} else if !utf8.ValidString(val) {
			v.add(field+"."+k, "must be valid UTF-8")
			ok = false
		}
	}
	if !ok {
		return
	}
	var buf [limits.MaxMetadataBytes]byte
	if n := len(storage.AppendMetadata(buf[:0], *m)); n > limits.MaxMetadataBytes {
		v.add(field, "must be at most %d bytes encoded as JSON, got %d", limits.MaxMetadataBytes, n)
	}
}

// metadataKeyProblem validates a key of Metadata.Values: 1 to
// limits.MaxMetadataKeyLen ASCII letters, digits, '_', '-' or '.', starting with
// a letter or '_', and not a reserved name.
func metadataKeyProblem(k string) string {
	if k == "" || len(k) > limits.MaxMetadataKeyLen {
		return fmt.Sprintf("a metadata key must be 1 to %d bytes long", limits.MaxMetadataKeyLen)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '-' || c == '.')) {
			return "a metadata key must start with a letter or '_' and hold only ASCII letters, digits, '_', '-' and '.'"
		}
	}
	if k == storage.MetadataCorrelationID || k == storage.MetadataCausationID {
		return fmt.Sprintf("%q is not a key of Metadata.Values: it has a field of its own", k)
	}
	if slices.Contains(reservedMetadataKeys, k) {
		return fmt.Sprintf("%q is reserved: $.metadata.%s means the event's own field", k, k)
	}
	return ""
}
