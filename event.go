package eventstore

import (
	"encoding/json"

	"github.com/google/uuid"
)

// NewEvent is an event to be saved.
type NewEvent struct {
	// ID is a UUID in canonical text form (see NewEventID). It is stored
	// at most once per aggregate, which makes a retried save idempotent.
	ID string
	// Type is the kind of event, chosen by the caller; not empty.
	Type string
	// Data is nil or a JSON object, stored byte for byte; Save copies it.
	Data json.RawMessage
	// EncryptedData is an opaque string kept and returned unchanged.
	EncryptedData string
}

// NewEventID returns a new random event id (a version 4 UUID in its
// canonical form), for NewEvent.ID. Retrying a save must reuse the ids of
// the first attempt, so generate them once per batch, not per attempt.
func NewEventID() string { return uuid.NewString() }
