package typed

import (
	"context"
	"fmt"
	"iter"

	"github.com/eventkit-go/eventstore"
)

// Event is a stored event with its data decoded. The embedded
// eventstore.Event is the event as stored: its ID, Type, raw Data bytes,
// Metadata, Version, Sequence, Position, RecordedAt and the rest.
type Event struct {
	eventstore.Event
	// Value is the decoded data, of the Go type registered for Type (a T,
	// not a *T); nil when it could not be decoded.
	Value any
}

// NewEvent is an event value to save with an id or metadata of its own;
// anything that takes event values (Store.Save, Repository.Save, the
// decide function of Repository.Update, Registry.Encode) takes a NewEvent
// in place of a bare value.
type NewEvent struct {
	// ID is the event's id, a UUID; empty means a new one. Give ids when a
	// save may be retried after an error whose outcome is unknown
	// (eventstore.ErrUnavailable): the same ids make the retry idempotent.
	ID       string
	Value    any                 // a value of a registered Go type, or a pointer to one
	Metadata eventstore.Metadata // correlation and causation ids, the caller's keys; optional
}

// Store saves and loads events as Go values, through an eventstore.Store
// and a Registry. It is safe for concurrent use, as the eventstore.Store
// is; it holds nothing of its own to close.
type Store struct {
	st  *eventstore.Store
	reg *Registry
}

// NewStore returns a Store that saves to and reads from st (not nil),
// encoding and decoding with reg (nil: an empty Registry, so every event
// is ErrUnregistered).
func NewStore(st *eventstore.Store, reg *Registry) *Store {
	return &Store{st: st, reg: reg}
}

// Untyped returns the eventstore.Store s works on.
func (s *Store) Untyped() *eventstore.Store { return s.st }

// Registry returns the Registry s encodes and decodes with.
func (s *Store) Registry() *Registry { return s.reg }

// SaveOptions are optional arguments of Store.Save; nil means none.
type SaveOptions struct {
	ExpectedVersion eventstore.VersionCheck // when set, the version the aggregate must be at
	// Metadata is given to every event of the save that has none of its
	// own (a NewEvent with Metadata set), such as the correlation id of
	// the request that made them.
	Metadata eventstore.Metadata
}

// Save encodes events (values of registered types, or NewEvents holding
// them) with the Registry and saves them to the aggregate in one
// eventstore.Store.Save: all of them or none, with the same checks and
// errors. An event that does not encode fails the save, naming its index
// and types, before anything is written.
func (s *Store) Save(ctx context.Context, aggregateType, aggregateID string, events []any, opts *SaveOptions) (eventstore.SaveResult, error) {
	var o SaveOptions
	if opts != nil {
		o = *opts
	}
	batch, err := s.encode(events, o.Metadata)
	if err != nil {
		return eventstore.SaveResult{}, fmt.Errorf("save %s/%s: %w", aggregateType, aggregateID, err)
	}
	return s.st.Save(ctx, aggregateType, aggregateID, batch, &eventstore.SaveOptions{ExpectedVersion: o.ExpectedVersion})
}

// encode encodes events for a save, giving md to those without metadata.
func (s *Store) encode(events []any, md eventstore.Metadata) ([]eventstore.NewEvent, error) {
	batch := make([]eventstore.NewEvent, len(events))
	for i, v := range events {
		ne, err := s.reg.Encode(v)
		if err != nil {
			return nil, fmt.Errorf("events[%d]: %w", i, err)
		}
		if ne.Metadata.IsZero() {
			ne.Metadata = md
		}
		batch[i] = ne
	}
	return batch, nil
}

// loadPage is how many versions (saves) Load reads per storage call.
const loadPage = 1000

// Load yields the events of the aggregate, decoded, in order. It reads
// them in pages of at most 1,000 saves (fewer when the Store's
// Options.MaxReadBytes fills a page), so a long aggregate is never held
// in memory whole; a concurrent save may or may not be seen.
//
// An event that does not decode is yielded with a *CodecError, Value nil
// and the stored event in ev.Event; the loop may go on past it. Any other
// error (such as one wrapping eventstore.ErrNotFound when the aggregate
// has no events) is yielded once, with the zero Event, and ends the
// sequence.
func (s *Store) Load(ctx context.Context, aggregateType, aggregateID string) iter.Seq2[Event, error] {
	return s.LoadAfter(ctx, aggregateType, aggregateID, 0)
}

// LoadAfter is Load of the events of the versions after afterVersion only.
// An aggregate with events, none of them after afterVersion, yields
// nothing.
func (s *Store) LoadAfter(ctx context.Context, aggregateType, aggregateID string, afterVersion int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		after := afterVersion
		for {
			agg, more, err := s.st.LoadRange(ctx, aggregateType, aggregateID, after, loadPage)
			if err != nil {
				yield(Event{}, err)
				return
			}
			for _, e := range agg.Events {
				if !yield(s.reg.Decode(e)) {
					return
				}
			}
			if !more || len(agg.Events) == 0 {
				return
			}
			after = agg.Events[len(agg.Events)-1].Version
		}
	}
}
