// Package memory is an in-memory eventstore.Storage for tests, examples and
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

	"github.com/eventkit-go/eventstore"
)

// Storage is the in-memory backend. The zero value is not usable; call New.
type Storage struct {
	mu     sync.RWMutex
	closed bool

	aggs     map[aggKey]int32 // index into aggList
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
}

var _ eventstore.Storage = (*Storage)(nil)

type aggKey struct{ typ, id string }

// feed holds the events of one aggregate type. It outlives the deletion of
// all of them, so that FeedSequences are never reused.
type feed struct {
	positions list[int64] // of the type's events, ascending
	seq       int64       // the FeedSequence of the type's latest batch
	aggCount  int64       // aggregates with events
	batches   int64       // batches of those aggregates
}

type aggregate struct {
	typ, id string
	feed    *feed // of typ
	index   int32 // in Storage.aggList
	events  list[record]
	ids     idIndex     // event id -> index in events
	seqs    list[int64] // seqs.at(v-1) is the FeedSequence of version v
}

// record is a stored event. It holds no pointers.
type record struct {
	typ     uint32 // index into Storage.types
	text    span   // the id's canonical text, the data, the encrypted data
	encLen  uint16 // length of the encrypted data at the end of text
	hasData bool
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
	rec    eventstore.DefinitionRecord
	errors []eventstore.ProjectionError
	states map[string]eventstore.ProjectionState // by instance id
}

// New returns an empty in-memory Storage.
func New() *Storage {
	return &Storage{
		aggs:    make(map[aggKey]int32),
		byType:  make(map[string]*feed),
		typeIdx: make(map[string]uint32),
		defs:    make(map[string]*definition),
		seed:    maphash.MakeSeed(),
	}
}

func (s *Storage) check(ctx context.Context) error {
	if s.closed {
		return eventstore.ErrClosed
	}
	return ctx.Err()
}

// Close implements eventstore.Storage. The data is dropped.
func (s *Storage) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.aggs, s.aggList, s.log, s.byType, s.defs = nil, list[*aggregate]{}, list[ref]{}, nil, nil
	s.types, s.typeIdx, s.arena = nil, nil, arena{}
	return nil
}
