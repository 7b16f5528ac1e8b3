package eventstore

import (
	"encoding/json"

	"github.com/google/uuid"
)

// NewEvent is an event to be saved.
type NewEvent struct {
	// ID identifies the event; it must be a UUID in its canonical textual
	// form. Within one aggregate an id is stored at most once, which makes a
	// retried save idempotent (see Store.Save).
	ID string
	// Type is the name of the kind of event, chosen by the client. It must
	// not be empty.
	Type string
	// Data is the event's payload. It is either nil (the event has no data)
	// or a JSON object nested at most MaxDataDepth levels deep. It is stored
	// byte for byte, as given. Save copies it; the caller may reuse the
	// slice afterwards.
	Data json.RawMessage
	// EncryptedData is an opaque string the store keeps with the event and
	// returns unchanged, at most MaxEncryptedData bytes; "" for none.
	EncryptedData string
}

// NewEventID returns a new random event id (a version 4 UUID in its
// canonical form), for NewEvent.ID. Retrying a save must reuse the ids of
// the first attempt, so generate them once per batch, not per attempt.
func NewEventID() string { return uuid.NewString() }
