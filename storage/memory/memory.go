// Package memory is an in-memory eventstore.Storage for tests, examples and
// embedding. Nothing survives the process. It is safe for concurrent use.
//
// Events are kept in a compact form without pointers (ids as 16 bytes,
// types interned, data in shared append-only chunks), so that a store
// holding millions of events costs the garbage collector almost nothing to
// scan.
package memory

import (
	"context"
	"sync"

	"github.com/eventkit-go/eventstore"
	"github.com/google/uuid"
)

// Storage is the in-memory backend. The zero value is not usable; call New.
type Storage struct {
	mu     sync.RWMutex
	closed bool

	aggs    map[aggKey]int32 // index into aggList
	aggList []*aggregate
	log     []ref            // global feed; log[p-1] holds position p
	byType  map[string]*feed // the positions of each aggregate type
	types   []string         // interned event types
	typeIdx map[string]uint32
	arena   arena

	defs   map[string]*definition
	states map[stateKey]eventstore.ProjectionState
}

var _ eventstore.Storage = (*Storage)(nil)

type aggKey struct{ typ, id string }

// feed holds the positions of the events of one aggregate type, ascending.
type feed struct {
	positions []int64
}

type aggregate struct {
	typ, id string
	feed    *feed // of typ
	events  []record
	ids     map[uuid.UUID]int32 // event id -> index in events
}

// record is a stored event. It holds no pointers.
type record struct {
	id       uuid.UUID
	typ      uint32 // index into Storage.types
	text     span   // the id's canonical text, followed by the data
	hasData  bool
	version  int64
	position int64
	recorded int64 // RecordedAt in Unix microseconds
}

// ref locates a feed event without pointers.
type ref struct {
	agg, idx int32
}

type definition struct {
	rec    eventstore.DefinitionRecord
	errors []eventstore.ProjectionError
}

type stateKey struct{ name, instance string }

// New returns an empty in-memory Storage.
func New() *Storage {
	return &Storage{
		aggs:    make(map[aggKey]int32),
		byType:  make(map[string]*feed),
		typeIdx: make(map[string]uint32),
		defs:    make(map[string]*definition),
		states:  make(map[stateKey]eventstore.ProjectionState),
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
	s.aggs, s.aggList, s.log, s.byType, s.defs, s.states = nil, nil, nil, nil, nil, nil
	s.types, s.typeIdx, s.arena = nil, nil, arena{}
	return nil
}
