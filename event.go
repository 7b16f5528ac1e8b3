package eventstore

import (
	"encoding/json"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
)

// NewEvent is an event to be saved. ID is stored at most once per
// aggregate, which makes a retried save idempotent.
type NewEvent struct {
	ID            string          // a UUID (NewEventID), stored in lower case
	Type          string          // the kind of event, chosen by the caller; not empty
	Data          json.RawMessage // nil or a JSON object, stored byte for byte; Save copies it
	EncryptedData string          // opaque, kept and returned unchanged
	Metadata      Metadata        // correlation, causation and the caller's own keys; optional
}

// Metadata is what an event carries beside its data: correlation and
// causation ids and a few keys of the caller's own (see
// storage.MaxMetadataKeys and storage.MaxMetadataBytes).
type Metadata = storage.Metadata

// NewEventID returns a random UUID for NewEvent.ID. A retried save must
// reuse the first attempt's ids, so make them once per batch.
func NewEventID() string { return uuid.NewString() }
