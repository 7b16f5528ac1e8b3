// Package storage is the contract between the eventstore package and its
// storage backends, as database/sql/driver is for database/sql: the Storage
// interface a backend implements, the requests and results that cross it,
// and the rules every backend shares (PlanAppend, EventBytes). Application
// code does not use it: it opens a backend (storage/memory, storage/sqlite,
// storage/postgres), hands it to eventstore.New and works with the
// eventstore.Store and an eventstore.Projector. A backend proves it keeps
// the contract with storage/storagetest.Run.
//
// The values that cross the contract and that users also see (Event,
// Aggregate, AppendResult, Reference, ProjectionError, FeedInfo,
// BatchError, ConflictError, VersionCheck, Snapshot and the sentinel errors) are
// defined here and named in package eventstore by aliases, so nothing is
// converted or copied between the two.
package storage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Sentinel errors. Every error returned by this package and by conforming
// Storage backends wraps at most one of these; check them with errors.Is.
var (
	// ErrNotFound reports that an aggregate, a projection definition or a
	// projection instance does not exist.
	ErrNotFound = errors.New("eventstore: not found")

	// ErrConflict reports that a write was refused because it contradicts the
	// stored state: an expected version that does not match, a batch that
	// mixes already stored and new event ids, a projection definition whose
	// name is taken, or (inside Storage) a projection checkpoint that moved.
	// Nothing was written.
	ErrConflict = errors.New("eventstore: conflict")

	// ErrInvalid reports input that is well-formed but not acceptable: an
	// event id that is not a UUID, an empty event type, data that is not a
	// JSON object, a selector that is not of the documented form, and so on.
	// The error is usually a *ValidationError that says which field.
	ErrInvalid = errors.New("eventstore: invalid")

	// ErrClosed reports a call on an eventstore.Store, eventstore.Projector or Storage after Close.
	ErrClosed = errors.New("eventstore: closed")

	// ErrUnavailable reports that the storage could not be reached or failed
	// transiently (a dropped connection, a database restart). The operation
	// may be retried; for a save, a retry with the same event ids is safe.
	ErrUnavailable = errors.New("eventstore: storage unavailable")

	// ErrFull reports that the storage is out of space (a full disk, a
	// size limit or a quota): nothing was written. Unlike ErrUnavailable
	// it does not pass by itself; a retry succeeds only once an operator
	// has freed space. eventstore.Store.OutOfSpace reports it until a write succeeds.
	ErrFull = errors.New("eventstore: storage full")

	// ErrSchemaVersion reports that a backend's Open or Migrate found the
	// stored schema at a version this program cannot use as it stands:
	// newer than it knows, older while migrations are turned off, or due
	// a migration that older processes cannot run beside while one of
	// them is live (docs/upgrades.md). The message says which, and names
	// the processes.
	ErrSchemaVersion = errors.New("eventstore: schema version")
)

// Storage is the interface a backend implements. It holds only what must be
// done atomically by the database; validation, versioning rules, projection
// logic and read-your-writes waiting live in eventstore.Store and eventstore.Projector, so every
// backend behaves the same.
//
// Users do not call Storage methods directly: they pass a Storage to
// eventstore.New and use the returned eventstore.Store and an
// eventstore.Projector. Backends prove they conform with
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
	//     Sequence continuing the aggregate's sequence, consecutive
	//     Positions greater than that of any event already visible in the
	//     feed (or ever stored, even if since deleted), in batch order, and
	//     one FeedSequence, greater than every FeedSequence the aggregate
	//     type was ever given (at least 1; numbers of deleted batches are
	//     never reused).
	//
	// Positions and FeedSequences strictly increase and are never reused,
	// but need not be contiguous: a FeedSequence need not be the type's
	// previous one + 1, and a refused or rolled-back append may leave
	// numbers unused (PostgreSQL does; memory and SQLite number without
	// gaps). Only the positions of the events of one batch are consecutive.
	// A refused append moves no FeedHead.
	//
	// Either all events of the batch become visible or none do. req has
	// been validated by the eventstore.Store: ids are distinct UUIDs, types non-empty,
	// Data nil or a JSON object, RecordedAt set.
	Append(ctx context.Context, req AppendRequest) (AppendResult, error)

	// AppendAll appends several batches in one atomic step: every batch is
	// written, or none. Each request follows the rules of Append, decided
	// in request order: several requests may be for one aggregate, and
	// each sees the writes of those before it (the second of an aggregate
	// expects the version the first produces, and repeats of events the
	// first writes are its duplicates). A request whose events are all
	// stored already writes nothing and its result has Duplicate set, while
	// the others are written. When any request fails its checks, nothing
	// at all is written and the error is a *BatchError naming that
	// request, wrapping the request's error (ErrConflict for a version or
	// id conflict). Batches are stored in request order: their positions
	// rise with the request index, and so do the FeedSequences of the
	// batches of one type. results[i] belongs to reqs[i].
	AppendAll(ctx context.Context, reqs []AppendRequest) ([]AppendResult, error)

	// Load returns the aggregate q names with its events in Sequence
	// order, restricted to the versions in (q.AfterVersion,
	// q.AfterVersion+q.Limit] (all versions after q.AfterVersion when
	// q.Limit is 0). Aggregate.Version is always the aggregate's current
	// version, whatever the range; a range past it returns no events;
	// q.MaxBytes may end the range early, after a whole version. It
	// returns an error wrapping ErrNotFound when the aggregate has no
	// events.
	Load(ctx context.Context, q LoadQuery) (Aggregate, error)

	// ReadFeed returns events with Position greater than q.After, in
	// Position order, at most q.Limit of them, restricted to
	// q.AggregateType when it is not empty. With q.AfterFeedSequence > 0
	// (only together with an AggregateType) it returns the events of that
	// type whose FeedSequence is greater (and, when q.After > 0, whose
	// Position is greater than q.After). With q.From or q.To it returns
	// only the events recorded within them (see FeedQuery.From).
	//
	// The feed never skips or repeats an event: ReadFeed must not return an
	// event at position p while an event at a lower position may still
	// become visible (a transaction that took a lower position and has not
	// committed yet). FeedPage.Head says how far the read got; reading again
	// with After = Head continues exactly where this read stopped, so a
	// reader continuing from a cursor sees every committed batch exactly
	// once, in order, and never skips one that commits later. Positions may
	// have gaps (numbers never used by a committed event), so a reader
	// must continue from Head or from a position or FeedSequence it was
	// given, never compute the next number. The events of one batch have
	// consecutive positions; a page may end in the middle of a batch (Limit
	// and MaxBytes count events).
	ReadFeed(ctx context.Context, q FeedQuery) (FeedPage, error)

	// FeedHead returns the FeedSequence of the latest batch of the
	// aggregate type, or, for aggregateType "", the highest Position
	// visible in the feed (0 for an empty store). For a type that never
	// had events it returns an error wrapping ErrNotFound. Numbers of
	// deleted batches still count: the head never goes down, also for a
	// type whose events were all deleted (which Feeds no longer lists).
	// The head is not a count: numbers may have gaps (see Append), and a
	// refused or rolled-back append does not move it.
	FeedHead(ctx context.Context, aggregateType string) (int64, error)

	// Feeds returns one entry per aggregate type that has events, ordered
	// by type.
	Feeds(ctx context.Context) ([]FeedInfo, error)

	// DeleteAggregate removes every event of the aggregate, and its
	// snapshot in the same atomic step, or returns an error wrapping
	// ErrNotFound when it has no events. Its events disappear from Load
	// and ReadFeed; its id can be used again (starting at version 1,
	// without a snapshot). Positions and FeedSequences are not reused.
	DeleteAggregate(ctx context.Context, aggregateType, aggregateID string) error

	// DeleteAggregateType removes every aggregate of the type with its
	// snapshot, as DeleteAggregate does for one, or returns an error wrapping
	// ErrNotFound when the type has no events.
	DeleteAggregateType(ctx context.Context, aggregateType string) error

	// SaveSnapshot stores snap as the snapshot of the aggregate
	// (snap.AggregateType, snap.AggregateID), in one atomic step with
	// reading the aggregate's version:
	//
	//  1. If the aggregate has no events, or its current version is
	//     below snap.Version, it writes nothing and returns an error
	//     wrapping ErrConflict: a snapshot describes a version the
	//     aggregate has.
	//  2. If the stored snapshot has a higher Version, it writes nothing
	//     and returns nil: an older snapshot is ignored.
	//  3. Otherwise snap replaces the stored snapshot (one of the same
	//     Version too, so a state of a new StateVersion replaces the old
	//     one), and it returns nil.
	//
	// A Storage keeps at most one snapshot per aggregate. A snapshot
	// saved while the aggregate is being deleted is either deleted with it
	// or refused (step 1), never kept for a recreated aggregate. snap has
	// been validated by the eventstore.Store: names as for Append, Version
	// at least 1, StateVersion at least 0, at most MaxSnapshotBytes of
	// Data, RecordedAt set.
	SaveSnapshot(ctx context.Context, snap Snapshot) error

	// LoadSnapshot returns the snapshot stored for the aggregate, or an
	// error wrapping ErrNotFound when there is none. RecordedAt comes
	// back in UTC; Data may be empty but is never nil.
	LoadSnapshot(ctx context.Context, aggregateType, aggregateID string) (Snapshot, error)

	// ListAggregates returns the aggregates of q.AggregateType that have
	// events, ordered by id (byte order): the first q.Skip are left out,
	// then at most q.Limit are returned (Limit 0 returns none, only
	// Total), each with its current version and the RecordedAt times of
	// its first and last events. Total is the number of the type's
	// aggregates. Deleted aggregates are not listed. A type without
	// aggregates returns none and Total 0, without error. Backends serve
	// it from an index with an entry per aggregate, without reading the
	// events of the aggregates outside the page.
	ListAggregates(ctx context.Context, q AggregateQuery) (AggregateList, error)

	// CreateDefinition stores a new projection definition with checkpoint
	// 0. It returns an error wrapping ErrConflict when a definition of that
	// name exists.
	CreateDefinition(ctx context.Context, def DefinitionRecord) error

	// Definition returns the definition named name with its current
	// checkpoint and recent errors, or an error wrapping ErrNotFound.
	Definition(ctx context.Context, name string) (DefinitionRecord, error)

	// Definitions returns every definition, ordered by name.
	Definitions(ctx context.Context) ([]DefinitionRecord, error)

	// DeleteDefinition removes the definition named name with its
	// instances and recorded errors, or returns an error wrapping
	// ErrNotFound.
	DeleteDefinition(ctx context.Context, name string) error

	// ResetProjection removes every instance and recorded error of the
	// projection named name and sets its checkpoint to 0, so that it is
	// rebuilt from the start of the feed. Unknown names wrap ErrNotFound.
	ResetProjection(ctx context.Context, name string) error

	// RenameProjection atomically replaces the projection named to with the
	// one named from: the definition, instances and recorded errors of to
	// (if any) are removed, and those of from are renamed to, keeping
	// from's spec, CreatedAt, checkpoint, instances and errors. An unknown
	// from wraps ErrNotFound. The eventstore.Projector uses it to swap in a rebuilt
	// replacement in one step.
	RenameProjection(ctx context.Context, from, to string) error

	// UpdateSpec replaces the Spec of the definition named name with spec
	// when its stored Spec is old, byte for byte, keeping its CreatedAt,
	// checkpoint, instances and recorded errors. When the stored Spec is
	// another it writes nothing and returns an error wrapping
	// ErrConflict; an unknown name wraps ErrNotFound. The
	// eventstore.Projector uses it for a change that does not change what
	// the projection computes (a new description), which needs no rebuild;
	// a commit with the old Spec is refused afterwards, as after
	// RenameProjection.
	UpdateSpec(ctx context.Context, name string, old, spec []byte) error

	// LoadProjection returns the state of one projection instance, or an
	// error wrapping ErrNotFound when no event has touched it yet.
	LoadProjection(ctx context.Context, name, instanceID string) (ProjectionState, error)

	// LoadProjections returns the states of the instances of projection
	// name whose ids are in ids, in the order of ids, skipping those that
	// do not exist (no error). ids holds no duplicates; the eventstore.Projector asks
	// for at most a few thousand at a time.
	LoadProjections(ctx context.Context, name string, ids []string) ([]ProjectionState, error)

	// ListProjections returns the instances of projection q.Name that match
	// q, sorted and paged as q says, and the number of all matches.
	// Backends serve it without loading every instance (an index on the
	// reference). An unknown projection has no instances (no error).
	ListProjections(ctx context.Context, q ProjectionQuery) (ProjectionList, error)

	// CommitProjection atomically moves the checkpoint of projection c.Name
	// from c.From to c.To, replaces the states in c.States, removes the
	// instances in c.Deletes and records c.Errors. When the stored
	// checkpoint is not c.From (another projector got there first), or
	// c.Spec is not nil and the stored definition's Spec differs from it
	// (the definition was replaced meanwhile), it writes nothing and
	// returns an error wrapping ErrConflict; an unknown
	// projection wraps ErrNotFound. Error texts may hold any bytes: a
	// backend that cannot store some (invalid UTF-8, NUL) replaces them
	// rather than fail.
	CommitProjection(ctx context.Context, c ProjectionCommit) error

	// Close releases the backend's resources. Calls after Close fail with
	// ErrClosed. Close is idempotent.
	Close() error
}

// AppendWatcher is implemented by a Storage shared by several processes
// that can tell when any of them appends (PostgreSQL's LISTEN/NOTIFY, for
// example). The eventstore.Store uses it to wake subscribers, long polls and
// projectors at once instead of polling.
type AppendWatcher interface {
	// WatchAppends calls notify soon after every append by any process
	// (several appends may be reported by one call) until ctx is done, then
	// returns nil. It returns an error when it cannot watch or stops
	// watching (a lost connection); the caller falls back to polling and
	// may call it again. notify must not block.
	WatchAppends(ctx context.Context, notify func()) error
}

// Rewinder is implemented by a Storage whose history can go back while
// processes run on it: PostgreSQL after a failover to a standby that had not
// received the last commits (asynchronous replication), or a database
// restored from a backup. Positions that a process handed out (in save
// results, feed pages, projection checkpoints) may then be missing from
// the store, and the next appends would take them again. A Rewinder
// remembers the highest position it has handed out or read and, when it
// finds the store below it, moves its numbering past it before handing out
// another, so that no position is given twice and a reader that goes on
// from a cursor it was given skips nothing saved later; then it reports
// the rewind to the handler set with OnRewind.
//
// The eventstore.Store sets the handler (it resets what it holds in memory
// and rebuilds the projections that applied events the store no longer
// has) and calls LastPosition when the feed stays below a position it was
// given.
type Rewinder interface {
	// LastPosition returns the highest position of an event stored, or
	// of one deleted since, whether or not the feed shows it yet (appends
	// in flight below it hold the feed back); 0 for an empty store. A
	// Rewinder that finds its store rewound here reports it as Append
	// does.
	LastPosition(ctx context.Context) (int64, error)
	// OnRewind sets the function called after each rewind found, with
	// its figures, replacing any set before; nil sets none. It is called
	// from the goroutine that found the rewind, which may be saving: it
	// must not block or call the Storage.
	OnRewind(f func(Rewind))
}

// Rewind describes a rewind a Rewinder found: the store was below what it
// had handed out or read.
type Rewind struct {
	// Seen is the highest position the Storage had handed out or read.
	Seen int64
	// Found is where the store's numbering was when the rewind was found
	// (the position the next append would have taken, less one).
	Found int64
	// Resumed is the position after which the Storage numbers appends
	// from now on, at least Seen.
	Resumed int64
}

// WriteProber is implemented by a Storage that can check cheaply whether
// it accepts and durably commits writes right now (PostgreSQL: connected
// to a primary, not a read-only standby, whose synchronous standbys
// answer). A readiness check calls it.
type WriteProber interface {
	// ProbeWrite commits a write that changes nothing visible and
	// returns nil, or an error wrapping ErrUnavailable when the storage
	// cannot write now. It gives up when ctx is done.
	ProbeWrite(ctx context.Context) error
}

// BatchError is the error of Storage.AppendAll and eventstore.Store.SaveAll when one
// batch of several is refused: nothing was written.
type BatchError struct {
	// Index is the index of the refused batch.
	Index int
	// AggregateType and AggregateID identify its aggregate.
	AggregateType, AggregateID string
	// Err is why it was refused; it wraps a sentinel such as ErrConflict.
	Err error
}

// Error implements the error interface.
func (e *BatchError) Error() string {
	return fmt.Sprintf("batch %d (%s/%s): %v", e.Index, e.AggregateType, e.AggregateID, e.Err)
}

// Unwrap returns Err.
func (e *BatchError) Unwrap() error { return e.Err }

// LoadQuery selects the aggregate, and the part of its history, that
// Storage.Load returns.
type LoadQuery struct {
	// AggregateType and AggregateID identify the aggregate.
	AggregateType, AggregateID string
	// AfterVersion skips the events of versions up to and including it.
	AfterVersion int64
	// Limit, when positive, caps the number of versions (saves) returned.
	Limit int64
	// MaxBytes, when positive, also caps the size of the answer: the
	// backend stops after the first version with which the events
	// returned reach MaxBytes (counted by EventBytes). Versions are never
	// split, and at least one is returned when the range holds any,
	// however large. Aggregate.Version tells the caller whether versions
	// after the returned ones exist.
	MaxBytes int64
}

// AppendEvent appends e to events, the events a backend's read of at
// most limit events (0 or less: not known) has taken so far. It makes
// room for the first 256 events, then for all limit at once (up to
// 16,384; append's doubling past that), instead of append's doubling
// from one, which copies every event read so far each time (about 200
// bytes each: 12-14 % of the CPU of reading the feed in pages of 1,000).
// A read that returns few events still allocates little.
func AppendEvent(events []Event, e Event, limit int) []Event {
	if len(events) == cap(events) {
		n := min(limit, maxGrowEvents)
		switch {
		case limit <= 0:
			n = firstGrowEvents
		case len(events) == 0:
			n = min(limit, firstGrowEvents)
		}
		if n > len(events) {
			events = slices.Grow(events, n-len(events))
		}
	}
	return append(events, e)
}

// firstGrowEvents is the room AppendEvent makes for a read's first
// events, maxGrowEvents the most it makes at once.
const (
	firstGrowEvents = 256
	maxGrowEvents   = 16 << 10
)

// EventBytes is the size of an event as LoadQuery.MaxBytes and
// FeedQuery.MaxBytes count it: the length of its Data and EncryptedData
// and of its Metadata encoded (AppendMetadata, what backends store), which
// are all of its size that callers control beyond fixed bounds.
func EventBytes(e *Event) int64 {
	n := int64(len(e.Data) + len(e.EncryptedData))
	if !e.Metadata.IsZero() {
		n += int64(MetadataBytes(e.Metadata))
	}
	return n
}

// FeedInfo describes one aggregate type's feed.
type FeedInfo struct {
	// AggregateType names the feed.
	AggregateType string
	// AggregateCount, BatchCount and EventCount count the aggregates,
	// saved batches and events of the type.
	AggregateCount, BatchCount, EventCount int64
}

// AggregateQuery selects a page of one aggregate type's aggregates for
// Storage.ListAggregates.
type AggregateQuery struct {
	// AggregateType is the type listed.
	AggregateType string
	// Skip aggregates of the type, in id order, are left out, then at
	// most Limit are returned. Limit 0 returns none (only Total).
	Skip, Limit int
}

// AggregateSummary describes one aggregate without its events.
type AggregateSummary struct {
	// ID identifies the aggregate within its type.
	ID string
	// Version is the aggregate's current version.
	Version int64
	// CreatedAt is the RecordedAt of the aggregate's first event,
	// UpdatedAt that of its last one.
	CreatedAt, UpdatedAt time.Time
}

// AggregateList is the result of Storage.ListAggregates.
type AggregateList struct {
	// Aggregates are the aggregates of the page, in id order.
	Aggregates []AggregateSummary
	// Total is the number of all the type's aggregates.
	Total int64
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
	// RecordedAt is stored as given: the Store's clock for a save, the
	// source's time for an import (eventstore.Store.SaveImported), which
	// may be years before the events stored already (from 1970 on, at
	// most 5 minutes after the Store's clock) and need not
	// rise with the position; reads by date (FeedQuery.From) still find
	// every event by it.
	// Every ID is a UUID in its canonical lower-case 36-character form (the
	// eventstore.Store checks and normalises ids before it appends), so a backend may
	// compare ids as bytes without parsing them again.
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
	// AfterFeedSequence, when positive (only with an AggregateType), reads
	// the events of AggregateType whose FeedSequence is greater; After,
	// when also positive, still applies, so a reader may page on with
	// After = Head.
	AfterFeedSequence int64
	// MaxBytes, when positive, also caps the size of the page: the backend
	// stops after the first event with which the events returned reach
	// MaxBytes (counted by EventBytes), and sets FeedPage.Truncated when it
	// stopped there while more events were visible. At least one event is
	// returned when any is visible, however large.
	MaxBytes int64
	// From and To, when not zero, restrict the feed to the events whose
	// RecordedAt is within [From, To], both bounds inclusive (at the
	// microsecond precision RecordedAt is stored with); a zero bound is
	// unbounded on its side, and From after To selects nothing. The other
	// fields apply as without them: the events come in Position order, and
	// reading on with After = FeedPage.Head continues the same selection
	// without skipping or repeating an event. RecordedAt need not rise
	// with Position (writers stamp it before they take a position), so a
	// backend must not stop at the first event recorded after To.
	//
	// The bound applies to each event; the eventstore.Store stamps every
	// event of a batch with the same RecordedAt, so a batch is selected
	// whole or not at all. A database backend serves a bounded read with
	// an index on RecordedAt (per aggregate type for a type's feed), not
	// by scanning the feed; the in-memory backend scans from After.
	From, To time.Time
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
	// Truncated reports that the page ended at FeedQuery.MaxBytes before
	// Limit while events after it may be visible: a page shorter than
	// Limit is then not the end of the feed. Head is the last event's
	// Position.
	Truncated bool
}

// DefinitionRecord is a projection definition as a Storage keeps it.
type DefinitionRecord struct {
	// Name is the projection name.
	Name string
	// Spec is the definition, encoded by the eventstore.Projector. Backends store it
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
	// CreatedAt is the RecordedAt time of the first event applied to the
	// instance; UpdatedAt that of the last one.
	CreatedAt, UpdatedAt time.Time
	// Reference is the value the projection marked with setref; lists
	// filter and sort on it. The zero Reference is none.
	Reference Reference
	// SearchText is the text of the instance's indexed fields as the
	// eventstore.Projector normalizes it: words of lower-case letters,
	// marks and digits, each separated from the next by one space, with
	// no leading or trailing space; "" when the projection has no
	// indexed fields or they hold no word. CommitProjection indexes it
	// for ProjectionQuery.Search. It is input only: LoadProjection,
	// LoadProjections and ListProjections may leave it empty.
	SearchText string
}

// SearchMatches reports whether every word of words is a prefix of a
// word of text, a ProjectionState.SearchText: the rule of
// ProjectionQuery.Search, for backends that check it by scanning.
func SearchMatches(text string, words []string) bool {
	for _, w := range words {
		found := false
		for rest := text; rest != "" && !found; {
			word, after, _ := strings.Cut(rest, " ")
			found = strings.HasPrefix(word, w)
			rest = after
		}
		if !found {
			return false
		}
	}
	return true
}

// ReferenceKind says what a Reference holds.
type ReferenceKind uint8

// Kinds of reference.
const (
	// RefNone: the instance has no reference.
	RefNone ReferenceKind = iota
	// RefNumber: a number (or a time as milliseconds since the epoch),
	// ordered by Number.
	RefNumber
	// RefText: a string, ordered by its bytes.
	RefText
)

// Reference is the value of a projection instance that lists filter and
// sort on. Sorted ascending, numbers come first (by Number), then texts
// (by the bytes of Text), then instances without a reference; ties are
// broken by instance id (byte order). Descending is the exact reverse,
// ties included.
type Reference struct {
	// Kind says which of the fields below holds the value.
	Kind ReferenceKind
	// Text is the reference of RefText; for RefNumber it holds the number
	// in decimal, as the projection had it.
	Text string
	// Number is the value of a RefNumber reference.
	Number float64
}

// ProjectionSort is the order of ListProjections.
type ProjectionSort uint8

// Orders of ListProjections; each breaks ties by instance id.
const (
	SortByID ProjectionSort = iota
	SortByReference
	SortByCreatedAt
	SortByUpdatedAt
)

// ProjectionQuery selects instances for Storage.ListProjections.
type ProjectionQuery struct {
	// Name is the projection.
	Name string
	// IDs, when not empty, restricts the result to these instance ids.
	IDs []string
	// Reference, when its Kind is not RefNone, keeps only instances whose
	// reference has that kind and value (Number for RefNumber, Text for
	// RefText).
	Reference Reference
	// From and To, when their Kind is not RefNone, keep only instances
	// whose reference is of that kind and at least From / at most To.
	From, To Reference
	// Search, when not empty, keeps only instances every word of which
	// is a prefix of a word of their indexed text (the SearchText last
	// committed for them), as SearchMatches decides. The words are
	// normalized like SearchText (lower case, only letters, marks and
	// digits, not empty) and distinct. Backends serve it from an index
	// of the committed texts rather than by reading every instance.
	Search []string
	// Sort and Descending order the result.
	Sort       ProjectionSort
	Descending bool
	// Skip instances of the sorted matches are left out, then at most
	// Limit are returned. Limit 0 returns none (only Total).
	Skip, Limit int
}

// ProjectionList is the result of Storage.ListProjections.
type ProjectionList struct {
	// States are the instances of the page, in order.
	States []ProjectionState
	// Total is the number of all instances that match the query.
	Total int64
}

// ProjectionCommit is the input of Storage.CommitProjection.
type ProjectionCommit struct {
	// Name is the projection committed.
	Name string
	// From is the checkpoint the projector read; To the new checkpoint.
	From, To int64
	// States are the instances changed between From and To.
	States []ProjectionState
	// Deletes are the ids of instances removed between From and To; no id
	// is in both States and Deletes.
	Deletes []string
	// Errors are the errors recorded while applying those events.
	Errors []ProjectionError
	// Spec, when not nil, is the spec of the definition the events were
	// applied with. The commit then also requires the stored definition's
	// Spec to equal it, so that a page computed from a definition that was
	// replaced meanwhile (RenameProjection, perhaps by another process) is
	// refused even when the checkpoints agree.
	Spec []byte
	// Indexed reports that the projection has indexed fields: each state
	// of States replaces the indexed text of its instance with its
	// SearchText ("" removes the instance from the index). When it is
	// false every SearchText is empty and no instance of the projection
	// has indexed text (changing a definition's indexed fields makes a new
	// definition, built from the start), so a backend may leave its search
	// index alone. Deleted instances always leave the index.
	Indexed bool
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

// MaxEncryptedData bounds Event.EncryptedData.
const MaxEncryptedData = 65535

// Metadata is what an event carries beside its data. Over HTTP it is the
// event's "metadata" object: {"correlationId": ..., "causationId": ...}
// plus the keys of Values, all strings. The zero value is no metadata.
type Metadata struct {
	// CorrelationID ties together the events of one business process or
	// request; CausationID names what caused this event (often the id of
	// the command or event it answers). Either may be empty.
	CorrelationID, CausationID string
	// Values holds the caller's own keys (at most MaxMetadataKeys, not
	// "correlationId" or "causationId"). The keys "traceparent" and
	// "tracestate" carry the W3C trace context of the save when the store
	// is traced.
	Values map[string]string
}

// IsZero reports whether m holds no metadata.
func (m Metadata) IsZero() bool {
	return m.CorrelationID == "" && m.CausationID == "" && len(m.Values) == 0
}

// Bounds of Metadata, checked by eventstore.Store before an append.
const (
	MaxMetadataKeys  = 16      // keys of Metadata.Values
	MaxMetadataBytes = 4 << 10 // encoded size of one event's Metadata
)

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
	// Metadata is what the caller saved beside the data: correlation and
	// causation ids and its own keys. The zero Metadata is none.
	Metadata Metadata

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
	// increasing in feed order and never reused (not even after a
	// deletion); they need not be contiguous (a backend may leave gaps,
	// for example for a refused or rolled-back append, never reorder). The
	// events of one batch have consecutive positions.
	Position int64
	// FeedSequence numbers the batches of one aggregate type: every event
	// of a batch has the same FeedSequence, at least 1, and each later
	// batch of that type a greater one. FeedSequences are never reused,
	// but may have gaps: a batch's FeedSequence need not be the type's
	// previous one + 1 (on PostgreSQL it is the batch's first position).
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

// VersionCheck is an optional expectation on an aggregate's version, used
// for optimistic concurrency. The zero value expects nothing.
type VersionCheck struct {
	version int64
	set     bool
}

// ExpectVersion returns a VersionCheck that passes only when the aggregate's
// current version is v. ExpectVersion(0) means "the aggregate must not exist
// yet". A negative v never matches.
func ExpectVersion(v int64) VersionCheck { return VersionCheck{version: v, set: true} }

// IsSet reports whether the check expects a version.
func (c VersionCheck) IsSet() bool { return c.set }

// Version returns the expected version and whether one is set.
func (c VersionCheck) Version() (int64, bool) { return c.version, c.set }

// Allows reports whether an aggregate at version current passes the check.
func (c VersionCheck) Allows(current int64) bool { return !c.set || c.version == current }

// String returns "any" or the expected version.
func (c VersionCheck) String() string {
	if !c.set {
		return "any"
	}
	return fmt.Sprint(c.version)
}

// ConflictError is the error of a save refused by its checks, as
// PlanAppend decides them: either the aggregate is not at the expected
// version, or the batch mixes event ids already stored in the aggregate
// with new ones (StoredIDs > 0), or it reuses a stored event id for an
// event that differs from the stored one (ReusedID). It wraps
// ErrConflict. Nothing was stored.
type ConflictError struct {
	// AggregateType and AggregateID identify the aggregate.
	AggregateType, AggregateID string
	// Current is the aggregate's version when the save was refused.
	Current int64
	// Expected is the version check that failed, when StoredIDs is 0.
	Expected VersionCheck
	// StoredIDs counts the batch's event ids already stored, of Events.
	StoredIDs, Events int
	// ReusedID, when not empty, is an event id of the batch stored in the
	// aggregate already with another event: Differs says what differs
	// ("type", "data", "encrypted data" or "metadata"). Every id of the
	// batch is stored (StoredIDs == Events), so the batch looks like a
	// retry, but is not one.
	ReusedID, Differs string
}

// Error implements the error interface.
func (e *ConflictError) Error() string {
	if e.ReusedID != "" {
		return fmt.Sprintf("event id %s is already stored in %s/%s with a different %s", e.ReusedID, e.AggregateType, e.AggregateID, e.Differs)
	}
	if e.StoredIDs > 0 {
		return fmt.Sprintf("%d of %d event ids are already stored in %s/%s", e.StoredIDs, e.Events, e.AggregateType, e.AggregateID)
	}
	return fmt.Sprintf("expected version %s of %s/%s, it is at %d", e.Expected, e.AggregateType, e.AggregateID, e.Current)
}

// Unwrap returns ErrConflict.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// PlanAppend applies the rules of Storage.Append that every backend shares.
// Given the request, the aggregate's current version and the already stored
// events of that aggregate whose ids occur in req.Events (with their ID,
// Type, Data, EncryptedData, Metadata, Version and Position), it returns:
//
//   - done == true and the stored batch's result (Duplicate set) when every
//     event is stored already, each as the request has it (RetryDiffers):
//     the backend writes nothing and returns it;
//   - an error wrapping ErrConflict when only some are stored, when one is
//     stored with another type, data or metadata (a *ConflictError naming
//     it), or when the version check fails: the backend writes nothing and
//     returns it;
//   - done == false and a nil error otherwise: the backend writes the batch
//     at version current+1.
//
// Backends call it inside the atomic step that then writes the batch.
func PlanAppend(req AppendRequest, current int64, stored []Event) (res AppendResult, done bool, err error) {
	if len(stored) > 0 {
		if len(stored) < len(req.Events) {
			return AppendResult{}, false, &ConflictError{AggregateType: req.AggregateType, AggregateID: req.AggregateID,
				Current: current, StoredIDs: len(stored), Events: len(req.Events)}
		}
		if id, what := reusedID(req.Events, stored); id != "" {
			return AppendResult{}, false, &ConflictError{AggregateType: req.AggregateType, AggregateID: req.AggregateID,
				Current: current, StoredIDs: len(stored), Events: len(req.Events), ReusedID: id, Differs: what}
		}
		res = AppendResult{Duplicate: true}
		for _, e := range stored {
			res.Version = max(res.Version, e.Version)
			res.Position = max(res.Position, e.Position)
		}
		return res, true, nil
	}
	if !req.ExpectedVersion.Allows(current) {
		return AppendResult{}, false, &ConflictError{AggregateType: req.AggregateType, AggregateID: req.AggregateID,
			Current: current, Expected: req.ExpectedVersion}
	}
	return AppendResult{}, false, nil
}

// RecordedRange returns q.From and q.To as inclusive bounds in Unix
// microseconds, the precision of RecordedAt: an event is within them when
// from <= RecordedAt.UnixMicro() <= to. A zero bound gives math.MinInt64
// or math.MaxInt64; a bound between two microseconds rounds inwards. ok
// is false when the query has neither bound.
func (q *FeedQuery) RecordedRange() (from, to int64, ok bool) {
	from, to = math.MinInt64, math.MaxInt64
	if !q.From.IsZero() {
		from = q.From.UnixMicro()
		if time.UnixMicro(from).Before(q.From) {
			from++
		}
	}
	if !q.To.IsZero() {
		to = q.To.UnixMicro()
		if time.UnixMicro(to).After(q.To) {
			to--
		}
	}
	return from, to, !q.From.IsZero() || !q.To.IsZero()
}

// reusedID returns the id of the first stored event that differs from
// the event of its id in events, with what differs, or "".
func reusedID(events, stored []Event) (id, what string) {
	var byID map[string]int
	if len(stored) > 16 {
		byID = make(map[string]int, len(events))
		for i := range events {
			byID[events[i].ID] = i
		}
	}
	for k := range stored {
		s := &stored[k]
		i, ok := -1, false
		if byID != nil {
			i, ok = byID[s.ID]
		} else {
			for j := range events {
				if events[j].ID == s.ID {
					i, ok = j, true
					break
				}
			}
		}
		if !ok {
			continue // a backend's stored event of another id: not ours to judge
		}
		if what := RetryDiffers(s, &events[i]); what != "" {
			return s.ID, what
		}
	}
	return "", ""
}

// RetryDiffers says how a new event e differs from the stored event s of
// its id, or returns "" when e repeats it (a retry): "type", "data",
// "encrypted data" or "metadata". Data is the same when the bytes are
// equal, or equal once insignificant whitespace is removed.
func RetryDiffers(s, e *Event) string {
	switch {
	case s.Type != e.Type:
		return "type"
	case !sameData(s.Data, e.Data):
		return "data"
	case s.EncryptedData != e.EncryptedData:
		return "encrypted data"
	case !s.Metadata.Equal(e.Metadata):
		return "metadata"
	}
	return ""
}

// sameData reports whether two event data are equal as stored JSON: both
// nil, or the same bytes, or the same once compacted.
func sameData(a, b json.RawMessage) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}
