package archive

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
)

// exportPage is the feed entries Export reads at a time.
const exportPage = limits.MaxFeedLimit

// Export writes the batches of st's feed of all types after the cursor
// after (0 for the start) to w, in feed order, page by page, and flushes
// w. It returns the cursor to export on from: with a nil error, the
// feed's end when Export read it; with an error, the end of the last page
// that reached w's underlying writer, so Export(ctx, st, w2, next) on a
// new archive goes on without losing or repeating a batch. Deleted
// aggregates are not in the feed, so not in the archive.
func Export(ctx context.Context, st *eventstore.Store, w *Writer, after int64) (next int64, err error) {
	next = after
	for {
		res, err := st.ReadFeed(ctx, "", next, &eventstore.FeedOptions{Limit: exportPage})
		if errors.Is(err, eventstore.ErrNotFound) { // an empty store
			break
		}
		if err != nil {
			return next, fmt.Errorf("archive: export after %d: %w", next, err)
		}
		for _, e := range res.Entries {
			b := Batch{AggregateType: e.AggregateType, AggregateID: e.AggregateID, Version: e.Version,
				RecordedAt: e.RecordedAt, Events: make([]Event, len(e.Events))}
			for i := range e.Events {
				ev := &e.Events[i]
				b.Events[i] = Event{ID: ev.ID, Type: ev.Type, Data: ev.Data, EncryptedData: ev.EncryptedData, Metadata: ev.Metadata}
			}
			if err := w.WriteBatch(b); err != nil {
				return next, fmt.Errorf("archive: export after %d: %w", next, err)
			}
		}
		if err := w.Flush(); err != nil {
			return next, fmt.Errorf("archive: export after %d: %w", next, err)
		}
		next = res.Next
		if !res.HasMore {
			break
		}
	}
	return next, w.Flush()
}

// Stats counts what Import did: Batches and Events saved, and Duplicates,
// the batches that were stored already (by an earlier, interrupted
// import) and were skipped.
type Stats struct {
	Batches, Events, Duplicates int64
}

// Import saves every batch of r into st with Store.Save, in order, each
// atomically, keeping event ids and aggregate versions: a batch is saved
// only if its aggregate is at the batch's version minus one. Batches
// stored already are Duplicates, so an import interrupted and run again
// on the same archive ends with exactly one copy of every event. It stops
// at the first bad line or batch with an error naming the line, leaving
// the batches before it imported: a bad archive (see Reader.Next) wraps
// eventstore.ErrInvalid, a batch that st refuses (such as an event id or
// type it does not take) the error of Save, and a batch whose version
// does not follow the aggregate's version in st wraps
// eventstore.ErrConflict. Events get the time of the import as their
// recorded time (see the package doc).
func Import(ctx context.Context, st *eventstore.Store, r *Reader) (Stats, error) {
	var stats Stats
	var events []eventstore.NewEvent
	for {
		if err := ctx.Err(); err != nil {
			return stats, fmt.Errorf("archive: import: %w", err)
		}
		b, err := r.Next()
		if err == io.EOF {
			return stats, nil
		}
		if err != nil {
			return stats, fmt.Errorf("archive: import: %w", err)
		}
		events = events[:0]
		for _, e := range b.Events {
			events = append(events, eventstore.NewEvent{ID: e.ID, Type: e.Type, Data: e.Data,
				EncryptedData: e.EncryptedData, Metadata: e.Metadata})
		}
		res, err := st.Save(ctx, b.AggregateType, b.AggregateID, events,
			&eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(b.Version - 1)})
		var ce *eventstore.ConflictError
		switch {
		case errors.As(err, &ce) && ce.StoredIDs == 0:
			return stats, fmt.Errorf("archive: import: line %d: batch %s/%s version %d does not follow the stored version %d: %w",
				r.Line(), b.AggregateType, b.AggregateID, b.Version, ce.Current, eventstore.ErrConflict)
		case err != nil:
			return stats, fmt.Errorf("archive: import: line %d: %w", r.Line(), err)
		case res.Version != b.Version:
			// A duplicate of events stored by a save of another version.
			return stats, fmt.Errorf("archive: import: line %d: batch %s/%s version %d is stored as version %d: %w",
				r.Line(), b.AggregateType, b.AggregateID, b.Version, res.Version, eventstore.ErrConflict)
		case res.Duplicate:
			stats.Duplicates++
		default:
			stats.Batches++
			stats.Events += int64(len(b.Events))
		}
	}
}
