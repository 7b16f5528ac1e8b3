package eventstore

import (
	"github.com/eventkit-go/eventstore/internal/lang"
	"github.com/eventkit-go/eventstore/storage"
)

// The values below cross the storage contract as well as this package's
// API. They are defined in package storage, which backends import without
// importing this package, and named here by aliases: a Store hands a
// backend's events to its caller without converting or copying them.

// Event is a stored event: a NewEvent's fields as saved; AggregateType,
// AggregateID; Version (its save's), Sequence (1, 2, 3, ... in its
// aggregate), Position and FeedSequence (see Feeds in the package doc) and
// RecordedAt (UTC, microseconds).
type Event = storage.Event

// Aggregate is an aggregate's Type, ID, current Version and Events (all,
// or the range asked for) in Sequence order.
type Aggregate = storage.Aggregate

// SaveResult is the outcome of a save.
type SaveResult struct {
	Version   int64 // the aggregate's version after the save
	Position  int64 // of the save's last event
	Duplicate bool  // a retry whose events were all stored already: nothing was written
}

// VersionCheck is an optional expectation on an aggregate's version
// (SaveOptions.ExpectedVersion); the zero value expects nothing.
type VersionCheck = storage.VersionCheck

// ExpectVersion(v) passes only when the aggregate is at version v;
// ExpectVersion(0) means it must not exist yet.
func ExpectVersion(v int64) VersionCheck { return storage.ExpectVersion(v) }

// BatchError says which batch (Index, AggregateType, AggregateID) of a
// SaveAll was refused, and why (Err, wrapping a sentinel); nothing was written.
type BatchError = storage.BatchError

// ConflictError (wrapping ErrConflict) refuses a save: the aggregate is at
// version Current, not Expected, or StoredIDs (> 0) of its ids are stored.
type ConflictError = storage.ConflictError

// FeedInfo is an aggregate type's AggregateCount, BatchCount and EventCount.
type FeedInfo = storage.FeedInfo

// Reference is the value of an instance that lists filter and sort on (set
// by setref): its Kind, Text and Number. Ascending, numbers come first,
// then texts (by bytes), then instances without one; ParseReference makes one.
type Reference = storage.Reference

// ParseReference reads a reference given as text, as in a query: a decimal
// number is a RefNumber, anything else a RefText.
func ParseReference(s string) Reference {
	return lang.ParseReference(s)
}

// ReferenceKind says what a Reference holds: RefNone, RefNumber or RefText.
type ReferenceKind = storage.ReferenceKind

// ProjectionSort is the order of Projector.List; ties are broken by id.
type ProjectionSort = storage.ProjectionSort

// Kinds of Reference, and orders of Projector.List.
const (
	RefNone   = storage.RefNone
	RefNumber = storage.RefNumber
	RefText   = storage.RefText

	SortByID        = storage.SortByID
	SortByReference = storage.SortByReference
	SortByCreatedAt = storage.SortByCreatedAt
	SortByUpdatedAt = storage.SortByUpdatedAt
)

// ProjectionError records an event a projection could not apply, such as
// add given a text: Position, EventID, EventType, InstanceID and Message.
// The event changed nothing of that instance; later events were applied.
type ProjectionError = storage.ProjectionError
