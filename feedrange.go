package eventstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/eventkit-go/eventstore/storage"
)

// maxRangeRead bounds the events of one Storage.ReadFeed call of
// readFeedRange (the Store's byte budget, Options.MaxReadBytes, bounds
// their data).
const maxRangeRead = 10_000

// readFeedRange returns the entries of the feed of all types whose cursor
// (last position) is in (after, upTo], in feed order, for bulk readers
// (package archive's Export, through hooks.ReadFeedRange). upTo must not
// be above a head the Store reported (FeedHead of ""), below which every
// position is visible or never will be: the range is then read with as
// few Storage.ReadFeed calls as its events allow (one for up to 10,000
// events within the byte budget), with no FeedHead and no page of
// ReadFeed's size. A batch that begins at or before after and ends after
// it is completed from its aggregate, as ReadFeed does; one that begins
// at or before upTo and ends after it is left to the range after upTo.
// The caller bounds the range, and with it the entries held: at most
// upTo-after batches, with the events of one more.
func (s *Store) readFeedRange(ctx context.Context, after, upTo int64) ([]FeedEntry, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("read feed of all types: %w", ErrClosed)
	}
	if after < 0 || upTo < after {
		return nil, fmt.Errorf("read feed of all types in (%d, %d]: %w", after, upTo, ErrInvalid)
	}
	// Read (after-1, upTo+1]: the events at after and upTo+1 tell whether
	// the batches at the range's ends go on past them.
	from, to := max(after-1, 0), upTo+1
	var events []Event
	var cuts []int // where each read after the first began in events
	for at := from; at < to; {
		if at > from {
			cuts = append(cuts, len(events))
		}
		q := storage.FeedQuery{After: at, Limit: int(min(to-at, maxRangeRead)), MaxBytes: s.readBytes}
		page, err := s.storage.ReadFeed(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("read feed of all types after %d: %w", at, err)
		}
		n := len(page.Events)
		if n == 0 {
			break // nothing visible after at (at is past the head)
		}
		if events == nil {
			events = page.Events
		} else {
			events = append(events, page.Events...)
		}
		if n < q.Limit && !page.Truncated {
			break // every visible event after at
		}
		at = page.Events[n-1].Position
	}
	events, err := s.dropCutBatches(ctx, events, cuts)
	if err != nil {
		return nil, fmt.Errorf("read feed of all types: %w", err)
	}
	for len(events) > 0 && events[len(events)-1].Position > to {
		events = events[:len(events)-1] // past the range, after a gap
	}
	if len(events) > 0 && events[len(events)-1].Position == to {
		// The event after the range: drop it, and the batch at upTo if it
		// goes on with it (its cursor is past upTo).
		k := len(events) - 1
		for k > 0 && sameBatch(&events[k-1], &events[len(events)-1]) {
			k--
		}
		events = events[:k]
	}
	var entries []FeedEntry
	if after > 0 && len(events) > 0 && events[0].Position == after {
		// The batch holding after: read before, unless it goes on past
		// after, and then whole from its aggregate, its cursor in range.
		k := batchLen(events)
		if k > 1 {
			r := batchReader{s: s}
			b, err := r.complete(ctx, events[:k])
			if err != nil {
				return nil, fmt.Errorf("read feed of all types: %w", err)
			}
			if b != nil && b[len(b)-1].Position <= upTo {
				entries = append(entries, entryOf(b))
			}
		}
		events = events[k:]
	}
	if len(events) == 0 {
		return entries, nil
	}
	if entries == nil {
		entries = make([]FeedEntry, 0, len(events))
	}
	for len(events) > 0 {
		k := batchLen(events)
		entries = append(entries, entryOf(events[:k:k]))
		events = events[k:]
	}
	return entries, nil
}

// dropCutBatches removes from events, read by Storage.ReadFeed calls the
// later of which began at the indexes cuts, each batch that a read ended
// in and the next read did not go on with, when its aggregate no longer
// has it: the batch either ended with the read (kept) or its aggregate
// was deleted between the reads and the rest is gone (dropped, never
// handed out cut).
func (s *Store) dropCutBatches(ctx context.Context, events []Event, cuts []int) ([]Event, error) {
	for i := len(cuts) - 1; i >= 0; i-- {
		b := cuts[i]
		if b == 0 || b > len(events) || (b < len(events) && sameBatch(&events[b-1], &events[b])) {
			continue
		}
		j := b - 1
		for j > 0 && sameBatch(&events[j-1], &events[b-1]) {
			j--
		}
		r := batchReader{s: s}
		whole, err := r.complete(ctx, events[j:b])
		if err != nil {
			return nil, err
		}
		if whole == nil {
			events = slices.Delete(events, j, b)
		}
	}
	return events, nil
}

// entryOf returns the feed entry of the events of one batch.
func entryOf(batch []Event) FeedEntry {
	e := &batch[0]
	return FeedEntry{Cursor: batch[len(batch)-1].Position, AggregateType: e.AggregateType, AggregateID: e.AggregateID,
		Version: e.Version, RecordedAt: e.RecordedAt, Events: batch}
}

// sameBatch reports whether a and b belong to one batch (as batchLen).
func sameBatch(a, b *Event) bool {
	return a.Version == b.Version && a.FeedSequence == b.FeedSequence && a.AggregateID == b.AggregateID &&
		a.AggregateType == b.AggregateType
}
