package typed

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/eventkit-go/eventstore"
)

// Entry is one entry of a feed, decoded: the events one save appended to
// one aggregate (eventstore.FeedEntry).
type Entry struct {
	// Cursor is the entry's number in the feed read; store it as a
	// checkpoint and read after it to go on from here (see
	// eventstore.FeedEntry).
	Cursor                     int64
	AggregateType, AggregateID string    // the aggregate the save appended to
	Version                    int64     // the aggregate version the save produced
	RecordedAt                 time.Time // when the save was recorded
	Events                     []Event   // the save's events in order, decoded where they could be
}

// decodeEntry decodes the events of e; every event is in the Entry, those
// that did not decode with Value nil, and the error joins their errors.
func (r *Registry) decodeEntry(e eventstore.FeedEntry) (Entry, error) {
	out := Entry{Cursor: e.Cursor, AggregateType: e.AggregateType, AggregateID: e.AggregateID,
		Version: e.Version, RecordedAt: e.RecordedAt, Events: make([]Event, len(e.Events))}
	var errs []error
	for i, ev := range e.Events {
		d, err := r.Decode(ev)
		if err != nil {
			errs = append(errs, err)
		}
		out.Events[i] = d
	}
	return out, errors.Join(errs...)
}

// Feed yields the entries of the feed of aggregateType ("" for all types)
// after the cursor after, decoded, up to the feed's head, and ends; opts
// selects and pages as for eventstore.Store.ReadFeed (nil: defaults). Go
// on later from the last entry's Cursor.
//
// An entry with events that do not decode is yielded with every event
// (those with Value nil) and their *CodecErrors joined; the loop may go on
// past it. Any other error (eventstore.ErrNotFound for a type without
// events, a *eventstore.ValidationError for bad options, a storage error)
// is yielded once, with the zero Entry, and ends the sequence.
func (s *Store) Feed(ctx context.Context, aggregateType string, after int64, opts *eventstore.FeedOptions) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		for {
			res, err := s.st.ReadFeed(ctx, aggregateType, after, opts)
			if err != nil {
				yield(Entry{}, err)
				return
			}
			for _, e := range res.Entries {
				if !yield(s.reg.decodeEntry(e)) {
					return
				}
			}
			if !res.HasMore || res.Next <= after {
				return
			}
			after = res.Next
		}
	}
}

// errStop ends a subscription whose loop stopped.
var errStop = errors.New("typed: the loop stopped")

// Subscribe yields the entries of the feed of aggregateType ("" for all
// types) after the cursor after, decoded, then each new one as it is
// saved, exactly once and in order, as eventstore.Store.Subscribe does,
// until ctx is done or the loop stops; a feed without events is waited
// for. opts selects as for eventstore.Store.ReadFeed. Store each entry's
// Cursor to resume from it.
//
// An entry with events that do not decode is yielded as by Feed; the loop
// may go on past it. The subscription's own errors (eventstore.ErrClosed,
// a *eventstore.ValidationError, a storage error other than
// eventstore.ErrUnavailable, which is retried) are yielded once and end
// the sequence; ctx being done ends it without an error.
func (s *Store) Subscribe(ctx context.Context, aggregateType string, after int64, opts *eventstore.FeedOptions) iter.Seq2[Entry, error] {
	return func(yield func(Entry, error) bool) {
		err := s.st.Subscribe(ctx, aggregateType, after, opts, func(_ context.Context, e eventstore.FeedEntry) error {
			if !yield(s.reg.decodeEntry(e)) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			yield(Entry{}, err)
		}
	}
}
