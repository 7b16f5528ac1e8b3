package lang

import (
	"fmt"
	"slices"

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

// MetadataKeyProblem validates a key of Metadata.Values: 1 to
// limits.MaxMetadataKeyLen ASCII letters, digits, '_', '-' or '.', starting with
// a letter or '_', and not a reserved name. It returns the problem, or "".
func MetadataKeyProblem(k string) string {
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
