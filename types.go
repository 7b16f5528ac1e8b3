package eventstore

import "github.com/eventkit-go/eventstore/storage"

// The values below cross the storage contract as well as this package's
// API. They are defined in package storage, which backends import without
// importing this package, and named here by aliases: a Store hands a
// backend's events to its caller without converting or copying them.

// Event is a stored event: its ID, Type, Data and EncryptedData as saved;
// AggregateType and AggregateID; Version (the aggregate version its save
// produced; all events of one save share it), Sequence (1, 2, 3, ... per
// aggregate), Position (its place in the store's feed: strictly
// increasing, possibly with gaps, never reused), FeedSequence (the number
// of its save in its aggregate type's feed: strictly increasing per type,
// possibly with gaps, never reused) and RecordedAt (UTC,
// microseconds). See storage.Event for each field.
type Event = storage.Event

// Aggregate is an aggregate's Type, ID, current Version (the number of
// saves that added events) and Events (all of them, or the range asked
// for) in Sequence order.
type Aggregate = storage.Aggregate

// SaveResult is the outcome of a save: the aggregate's Version after it,
// the Position of its last event, and Duplicate when every event id was
// stored already (a retried save), in which case nothing was written and
// Version and Position are those of the stored events.
type SaveResult = storage.AppendResult

// VersionCheck is an optional expectation on an aggregate's version, for
// optimistic concurrency (SaveOptions.ExpectedVersion). The zero value
// expects nothing; ExpectVersion makes one.
type VersionCheck = storage.VersionCheck

// ExpectVersion returns a VersionCheck that passes only when the
// aggregate's current version is v. ExpectVersion(0) means "the aggregate
// must not exist yet". A negative v never matches.
func ExpectVersion(v int64) VersionCheck { return storage.ExpectVersion(v) }

// BatchError is the error of Store.SaveAll when one batch of several is
// refused: its Index, AggregateType and AggregateID, and Err, why (it wraps
// a sentinel such as ErrConflict). Nothing was written.
type BatchError = storage.BatchError

// ConflictError is the error of a save refused by its checks: the
// aggregate (AggregateType, AggregateID) is at version Current, not the
// Expected one, or, when StoredIDs > 0, StoredIDs of the batch's Events ids
// are stored already while the others are not (a retry must resend the
// same batch). It wraps ErrConflict; nothing was stored.
type ConflictError = storage.ConflictError

// FeedInfo describes one aggregate type's feed: AggregateType, and the
// AggregateCount, BatchCount and EventCount of the type.
type FeedInfo = storage.FeedInfo

// Reference is the value of a projection instance that lists filter and
// sort on (set by setref): its Kind, Text (the text, or the number in
// decimal as the projection had it) and Number. Sorted ascending, numbers
// come first, then texts (by their bytes), then instances without one;
// ties are broken by instance id. ParseReference makes one.
type Reference = storage.Reference

// ReferenceKind says what a Reference holds: RefNone, RefNumber or RefText.
type ReferenceKind = storage.ReferenceKind

// Kinds of reference.
const (
	RefNone   = storage.RefNone
	RefNumber = storage.RefNumber
	RefText   = storage.RefText
)

// ProjectionSort is the order of Projector.List; each order breaks ties by
// instance id.
type ProjectionSort = storage.ProjectionSort

// Orders of Projector.List.
const (
	SortByID        = storage.SortByID
	SortByReference = storage.SortByReference
	SortByCreatedAt = storage.SortByCreatedAt
	SortByUpdatedAt = storage.SortByUpdatedAt
)

// ProjectionError records an event a projection could not apply (for
// example an add whose input is not a number): the event's Position,
// EventID and EventType, the InstanceID and the Message. The event's
// changes to that instance were discarded; later events were applied.
type ProjectionError = storage.ProjectionError
