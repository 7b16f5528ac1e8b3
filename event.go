package eventstore

import (
	"encoding/json"
	"time"
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

// MaxEncryptedData bounds NewEvent.EncryptedData.
const MaxEncryptedData = 65535

// Event is a stored event.
type Event struct {
	// ID is the event id given when it was saved.
	ID string
	// Type is the event type given when it was saved.
	Type string
	// Data is the JSON object saved with the event, or nil when the event was
	// saved without data.
	Data json.RawMessage
	// EncryptedData is the opaque string saved with the event, or "".
	EncryptedData string

	// AggregateType and AggregateID identify the aggregate the event belongs
	// to. AggregateType is also the name of the feed that carries it.
	AggregateType string
	AggregateID   string

	// Version is the aggregate version produced by the save that stored the
	// event. Versions count saves, not events: every event of one batch has
	// the same Version, and the first batch of an aggregate has Version 1.
	Version int64
	// Sequence numbers the events of one aggregate: 1 for its first event,
	// then 2, 3, ... without gaps, in the order they were saved.
	Sequence int64
	// Position orders every event of the store. Positions are strictly
	// increasing in the order events become visible in the feed; they need
	// not be contiguous (a backend may leave holes, never reorder). The
	// events of one batch have consecutive positions.
	Position int64
	// FeedSequence numbers the batches of one aggregate type: every event
	// of a batch has the same FeedSequence, the type's first batch has 1,
	// and each later batch of that type the next number.
	FeedSequence int64
	// RecordedAt is when the event was saved, in UTC, with microsecond
	// precision.
	RecordedAt time.Time
}

// Aggregate is an aggregate with all its events.
type Aggregate struct {
	// Type and ID identify the aggregate.
	Type string
	ID   string
	// Version is the number of successful saves that added events to the
	// aggregate: its current version, also when Events holds only part of
	// its history.
	Version int64
	// Events holds the aggregate's events (all of them, or the range that
	// was asked for) in Sequence order.
	Events []Event
}
