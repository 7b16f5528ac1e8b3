package eventstore

import (
	"context"
	"encoding/json"
	"time"
)

// Storage is the interface a backend implements. It holds only what must be
// done atomically by the database; validation, versioning rules, projection
// logic and read-your-writes waiting live in Store and Projector, so every
// backend behaves the same.
//
// Users do not call Storage methods directly: they pass a Storage to New and
// use the returned Store and a Projector. Backends prove they conform with
// storage/storagetest.Run.
//
// All methods may be called concurrently. Slices passed in belong to the
// caller and must not be retained after the call returns; slices returned
// belong to the caller, who may modify them. A method that finds nothing
// returns an error wrapping ErrNotFound, never a zero value with a nil error.
// After Close, methods return an error wrapping ErrClosed. Transient
// failures of the database wrap ErrUnavailable.
type Storage interface {
	// Append atomically appends req.Events to the aggregate
	// (req.AggregateType, req.AggregateID), creating it when it has no
	// events. In one atomic step it:
	//
	//  1. If every id in req.Events is already stored in the aggregate,
	//     writes nothing and returns the stored batch's result with
	//     Duplicate set (Version and Position of those stored events).
	//  2. If some but not all ids are stored, writes nothing and returns an
	//     error wrapping ErrConflict.
	//  3. If req.ExpectedVersion is set and differs from the aggregate's
	//     current version (0 when it has no events), writes nothing and
	//     returns an error wrapping ErrConflict.
	//  4. Otherwise stores every event with Version = current version + 1,
	//     Sequence continuing the aggregate's sequence, and Positions greater
	//     than that of any event already visible in the feed, in batch order.
	//
	// Either all events of the batch become visible or none do. req has
	// been validated by the Store: ids are distinct UUIDs, types non-empty,
	// Data nil or a JSON object, RecordedAt set.
	Append(ctx context.Context, req AppendRequest) (AppendResult, error)

	// Load returns the aggregate with all its events in Sequence order, or
	// an error wrapping ErrNotFound when it has no events.
	Load(ctx context.Context, aggregateType, aggregateID string) (Aggregate, error)

	// ReadFeed returns events with Position greater than q.After, in
	// Position order, at most q.Limit of them, restricted to
	// q.AggregateType when it is not empty.
	//
	// The feed never skips or repeats an event: ReadFeed must not return an
	// event at position p while an event at a lower position may still
	// become visible (a transaction that took a lower position and has not
	// committed yet). FeedPage.Head says how far the read got; reading again
	// with After = Head continues exactly where this read stopped.
	ReadFeed(ctx context.Context, q FeedQuery) (FeedPage, error)

	// CreateDefinition stores a new projection definition with checkpoint
	// 0. It returns an error wrapping ErrConflict when a definition of that
	// name exists.
	CreateDefinition(ctx context.Context, def DefinitionRecord) error

	// Definition returns the definition named name with its current
	// checkpoint and recent errors, or an error wrapping ErrNotFound.
	Definition(ctx context.Context, name string) (DefinitionRecord, error)

	// Definitions returns every definition, ordered by name.
	Definitions(ctx context.Context) ([]DefinitionRecord, error)

	// LoadProjection returns the state of one projection instance, or an
	// error wrapping ErrNotFound when no event has touched it yet.
	LoadProjection(ctx context.Context, name, instanceID string) (ProjectionState, error)

	// CommitProjection atomically moves the checkpoint of projection c.Name
	// from c.From to c.To, replaces the states in c.States and records
	// c.Errors. When the stored checkpoint is not c.From (another projector
	// got there first) it writes nothing and returns an error wrapping
	// ErrConflict; an unknown projection wraps ErrNotFound.
	CommitProjection(ctx context.Context, c ProjectionCommit) error

	// Close releases the backend's resources. Calls after Close fail with
	// ErrClosed. Close is idempotent.
	Close() error
}

// AppendRequest is the input of Storage.Append.
type AppendRequest struct {
	// AggregateType and AggregateID identify the aggregate appended to.
	AggregateType string
	AggregateID   string
	// ExpectedVersion, when set, is compared with the aggregate's version.
	ExpectedVersion VersionCheck
	// Events are the events to store, with ID, Type, Data and RecordedAt
	// set; Version, Sequence and Position are assigned by the backend.
	Events []Event
}

// AppendResult is the outcome of a successful Storage.Append.
type AppendResult struct {
	// Version is the aggregate version the batch produced.
	Version int64
	// Position is the Position of the batch's last event.
	Position int64
	// Duplicate reports that every event of the batch was stored already,
	// so nothing was written.
	Duplicate bool
}

// FeedQuery selects a part of the global feed.
type FeedQuery struct {
	// After is the position to read after; 0 reads from the beginning.
	After int64
	// Limit caps the number of events returned; it is at least 1.
	Limit int
	// AggregateType, when not empty, restricts the feed to events of that
	// aggregate type (the feed of that name).
	AggregateType string
}

// FeedPage is the result of Storage.ReadFeed.
type FeedPage struct {
	// Events holds the events read, in Position order.
	Events []Event
	// Head is the position the next read continues from: no event with a
	// position in (After, Head] matching the query is missing from Events.
	// When Events is not empty, Head is at least the last event's Position.
	// When the feed holds nothing more that is visible, Head may move past
	// the last returned event up to the highest visible position, so that a
	// reader of a quiet feed keeps up with the store.
	Head int64
}

// DefinitionRecord is a projection definition as a Storage keeps it.
type DefinitionRecord struct {
	// Name is the projection name.
	Name string
	// Spec is the definition, encoded by the Projector. Backends store it
	// as opaque bytes.
	Spec json.RawMessage
	// CreatedAt is when the definition was created.
	CreatedAt time.Time
	// Checkpoint is the position of the feed up to which the projection
	// has been applied. It is 0 on creation and only moves through
	// CommitProjection.
	Checkpoint int64
	// Errors holds the most recent errors recorded by CommitProjection,
	// oldest first. Backends keep at least the last MaxRecordedErrors.
	Errors []ProjectionError
}

// MaxRecordedErrors is how many recent errors per projection a Storage keeps
// at least.
const MaxRecordedErrors = 100

// ProjectionState is the stored state of one projection instance.
type ProjectionState struct {
	// Name is the projection name.
	Name string
	// InstanceID is the aggregate id for a single projection, or "" for an
	// aggregated projection.
	InstanceID string
	// Data is the projection's JSON object.
	Data json.RawMessage
	// Position is the Position of the last event applied to the instance.
	Position int64
	// UpdatedAt is the RecordedAt time of that event.
	UpdatedAt time.Time
}

// ProjectionCommit is the input of Storage.CommitProjection.
type ProjectionCommit struct {
	// Name is the projection committed.
	Name string
	// From is the checkpoint the projector read; To the new checkpoint.
	From, To int64
	// States are the instances changed between From and To.
	States []ProjectionState
	// Errors are the errors recorded while applying those events.
	Errors []ProjectionError
}

// ProjectionError records an event that a projection could not apply, for
// example an add whose input is not a number. The event's changes to that
// projection instance were discarded; later events were still applied.
//
// Its text fields may hold any bytes. Backends store them as valid UTF-8
// without NUL bytes, as strings.ToValidUTF8(s, "\uFFFD") with NUL bytes
// then removed, so that no recorded error can make a commit fail; valid
// text without NUL is stored unchanged.
type ProjectionError struct {
	// Position, EventID and EventType identify the event.
	Position  int64  `json:"position"`
	EventID   string `json:"eventId"`
	EventType string `json:"eventType"`
	// InstanceID is the projection instance the event was applied to.
	InstanceID string `json:"instanceId,omitempty"`
	// Message says what went wrong.
	Message string `json:"message"`
}
