// Package memory is an in-memory storage.Storage for tests, examples and
// embedding. Nothing survives the process. It is safe for concurrent use.
//
// Events are kept in a compact form without pointers (ids indexed by hash
// in tables of 8-byte slots, types interned, ids and data in shared
// append-only chunks), so that a store holding millions of events costs
// the garbage collector almost nothing to scan. Deleting aggregates removes their events from every read, but the
// bytes of their data stay in the chunks until the Storage is closed.
package memory

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/eventkit-go/eventstore/storage"
)

// Storage is the in-memory backend. The zero value is not usable; call New.
//
// Locking. mu guards every field of the Storage and of its aggregates,
// except these:
//   - dir, the directory of live aggregates, is written under mu (so that
//     readers holding mu see it agree with aggList) and read with or
//     without it, by writers looking for their aggregate before they lock.
//   - Each aggregate has a mutex of its own, aggregate.mu, which every
//     writer of the aggregate holds from planning its batch (the version
//     check and the id lookups) to the end of writing it. aggregate.ids is
//     read and written only under aggregate.mu; aggregate.events and
//     aggregate.seqs are written only under both locks, so that either
//     lock is enough to read them. A writer therefore plans without mu and
//     takes mu only to assign positions and store the batch.
//   - aggregate.dead is set under mu when the aggregate is deleted; a
//     writer that found the aggregate before checks it under mu.
//
// Lock order: aggregate.mu before mu, and several aggregate.mu in
// ascending aggregate.index (AppendAll). Nothing takes an aggregate.mu
// while holding mu, so no cycle can form. A new aggregate is built under
// mu, its id index included, before it is stored in dir: no other writer
// can reach it sooner.
type store struct {
	mu     sync.RWMutex
	closed bool

	dir      *directory       // live aggregates only
	aggList  list[*aggregate] // nil once deleted
	log      list[ref]        // global feed; log.at(p-1) holds position p
	deleted  int              // entries of log that are deleted
	byType   map[string]*feed // each aggregate type that ever had events
	types    []string         // interned event types
	typeIdx  map[string]uint32
	lastType uint32 // index of the type interned last
	arena    arena
	seed     maphash.Seed // of the event ids' hashes

	defs map[string]*definition

	rx reactionStore // reactions, under a lock of their own (reactions.go)
}

var _ storage.Storage = (*store)(nil)

type aggKey struct{ typ, id string }

// feed holds the events of one aggregate type. It outlives the deletion of
// all of them, so that FeedSequences are never reused.
type feed struct {
	positions list[int64] // of the type's events, ascending
	seq       int64       // the FeedSequence of the type's latest batch
	aggCount  int64       // aggregates with events
	batches   int64       // batches of those aggregates
}

// aggregate holds the events of one aggregate; see Storage for the locks
// that guard its fields.
type aggregate struct {
	mu      sync.Mutex // held by the aggregate's writer, before Storage.mu
	typ, id string
	feed    *feed // of typ
	index   int32 // in Storage.aggList
	dead    atomic.Bool
	events  list[record]
	ids     idIndex     // event id -> index in events; under mu only
	seqs    list[int64] // seqs.at(v-1) is the FeedSequence of version v
	// snap is the aggregate's snapshot, or nil; under Storage.mu. It goes
	// with the aggregate when the aggregate is deleted.
	snap *storage.Snapshot
}

// record is a stored event. It holds no pointers.
type record struct {
	typ     uint32 // index into Storage.types
	text    span   // the id's canonical text, the data, the encrypted data, the metadata
	encLen  uint16 // length of the encrypted data before the metadata at the end of text
	hasData bool
	metaLen uint16 // length of the encoded metadata (storage.AppendMetadata) at the end of text
	version int64
	// position is the event's Position.
	position int64
	recorded int64 // RecordedAt in Unix microseconds
}

// ref locates a feed event without pointers; agg is -1 for an event that
// was deleted.
type ref struct {
	agg, idx int32
}

type definition struct {
	rec    storage.DefinitionRecord
	errors []storage.ProjectionError
	states map[string]storage.ProjectionState // by instance id
}

// New returns an empty in-memory storage, for eventstore.New, which
// takes it over.
func New() storage.Storage { return newStore() }

// newStore returns an empty in-memory store.
func newStore() *store {
	return &store{
		byType:  make(map[string]*feed),
		typeIdx: make(map[string]uint32),
		defs:    make(map[string]*definition),
		seed:    maphash.MakeSeed(),
		dir:     newDirectory(),
	}
}

func (s *store) check(ctx context.Context) error {
	if s.closed {
		return storage.ErrClosed
	}
	return ctx.Err()
}

// Close implements storage.Storage. The data is dropped.
func (s *store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.dir.clear()
	s.aggList, s.log, s.byType, s.defs = list[*aggregate]{}, list[ref]{}, nil, nil
	s.types, s.typeIdx, s.arena = nil, nil, arena{}
	return nil
}

// lookup returns the live aggregate (typ, id), or nil. It needs no lock:
// see Storage.
func (s *store) lookup(typ, id string) *aggregate {
	return s.dir.load(aggKey{typ, id})
}
