package eventstore

import (
	"fmt"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore/internal/lang"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
)

// checkEventMetadata validates the metadata of the event at field (as
// "events[3].metadata") and adds its problems to v: at most
// limits.MaxMetadataKeys keys in Values, each of the form of lang.MetadataKeyProblem,
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
		if msg := lang.MetadataKeyProblem(k); msg != "" {
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
