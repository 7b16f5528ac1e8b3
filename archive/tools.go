package archive

import (
	"context"
	"errors"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/eventkit-go/eventstore/internal/limits"
)

// exportPage is the feed entries Export reads at a time.
const exportPage = limits.MaxFeedLimit

// Export reads the feed in chunks of exportChunk positions, by pages of
// exportPage entries, exportReaders chunks at once (at least 2).
const (
	exportChunk   = 8 * exportPage
	exportReaders = 4
)

// Export writes the batches of st's feed of all types after the cursor
// after (0 for the start) to w, in feed order, page by page, and flushes
// w. It returns the cursor to export on from: with a nil error, the
// feed's end when Export read it; with an error, the end of the last page
// that reached w's underlying writer whole, so Export(ctx, st, w2, next)
// on a new archive goes on without losing a batch (the batches of the page
// that failed half-way written may be written again: Import counts them as
// duplicates). Deleted aggregates are not in the feed, so not in the
// archive.
//
// Export reads ahead while it writes: the feed up to its head when Export
// starts is cut into chunks of 8,000 positions, each read whole with as
// few storage reads as its events allow (not in pages of ReadFeed, each
// with the feed's head), by four goroutines at a time and written in
// order, so that Export holds at most four chunks; the batches after that
// head are read with ReadFeed after the last chunk.
func Export(ctx context.Context, st *eventstore.Store, w *Writer, after int64) (next int64, err error) {
	next = after
	head, err := st.FeedHead(ctx, "")
	if err != nil {
		return next, fmt.Errorf("archive: export after %d: %w", next, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	// The chunks after the one being written: exportReaders-2 of them
	// wait here, one more for its turn to.
	chunks := make(chan chan exportedPage, exportReaders-2)
	go func() { // start the chunks' readers, in order
		defer close(chunks)
		for start := after; ; {
			end := min(start+exportChunk, head)
			if start >= head {
				end = -1 // the last chunk: after the head, to the feed's end
			}
			pages := make(chan exportedPage, exportChunk/exportPage+1)
			go readChunk(ctx, st, start, end, pages)
			select {
			case chunks <- pages:
			case <-ctx.Done():
				for range pages { // wait for readChunk to end
				}
				return
			}
			if end < 0 {
				return
			}
			start = end
		}
	}()
	var cur chan exportedPage // the chunk being written
	var events []Event        // of the batch being written
	defer func() {
		cancel()
		if cur != nil {
			for range cur { // wait for its reader to end
			}
		}
		for pages := range chunks { // and for the others'
			for range pages {
			}
		}
	}()
	for cur = range chunks {
		for p := range cur {
			if errors.Is(p.err, eventstore.ErrNotFound) { // an empty store
				continue
			}
			if p.err != nil {
				return next, fmt.Errorf("archive: export after %d: %w", next, p.err)
			}
			for _, e := range p.entries {
				b := Batch{AggregateType: e.AggregateType, AggregateID: e.AggregateID, Version: e.Version,
					RecordedAt: e.RecordedAt, Events: events[:0]}
				for i := range e.Events {
					ev := &e.Events[i]
					b.Events = append(b.Events, Event{ID: ev.ID, Type: ev.Type, Data: ev.Data, EncryptedData: ev.EncryptedData, Metadata: ev.Metadata})
				}
				events = b.Events // writeBatch keeps nothing of b: reused
				if err := w.writeBatch(&b, true); err != nil {
					return next, fmt.Errorf("archive: export after %d: %w", next, err)
				}
			}
			if err := w.Flush(); err != nil {
				return next, fmt.Errorf("archive: export after %d: %w", next, err)
			}
			next = max(next, p.next)
		}
	}
	return next, w.Flush()
}

// exportedPage is a page of the feed read for Export: its entries and
// the cursor after them, or the error of reading it.
type exportedPage struct {
	entries []eventstore.FeedEntry
	next    int64
	err     error
}

// readChunk sends to pages the entries of st's feed of all types whose
// cursor is after start and at most end (-1 for no end), page by page,
// up to the first error, and closes pages. It stops early when ctx is
// done. A chunk with an end (at most the head Export started at) is read
// as one range (hooks.ReadFeedRange), the rest of the feed with ReadFeed.
func readChunk(ctx context.Context, st *eventstore.Store, start, end int64, pages chan<- exportedPage) {
	defer close(pages)
	if end >= 0 {
		readRange(ctx, st, start, end, pages)
		return
	}
	for at := start; ; {
		res, err := st.ReadFeed(ctx, "", at, &eventstore.FeedOptions{Limit: exportPage})
		select {
		case pages <- exportedPage{entries: res.Entries, next: res.Next, err: err}:
		case <-ctx.Done():
			return
		}
		if err != nil || !res.HasMore {
			return
		}
		at = res.Next
	}
}

// readRange sends to pages the entries of st's feed of all types whose
// cursor is in (start, end], end at most the feed's head, read at once,
// in pages of exportPage entries: the last one's cursor to go on from is
// end.
func readRange(ctx context.Context, st *eventstore.Store, start, end int64, pages chan<- exportedPage) {
	v, err := hooks.ReadFeedRange(ctx, st, start, end)
	entries, _ := v.([]eventstore.FeedEntry)
	for {
		p := exportedPage{entries: entries[:min(exportPage, len(entries))], next: end, err: err}
		entries = entries[len(p.entries):]
		if len(entries) > 0 {
			p.next = p.entries[len(p.entries)-1].Cursor
		}
		select {
		case pages <- p:
		case <-ctx.Done():
			return
		}
		if len(entries) == 0 {
			return
		}
	}
}

// Stats counts what Import did: Batches and Events saved, and Duplicates,
// the batches that were stored already (by an earlier, interrupted
// import) and were skipped.
type Stats struct {
	Batches, Events, Duplicates int64
}

// importGroup bounds the batches Import saves in one SaveImported (one
// transaction); limits.MaxSaveAllEvents bounds their events.
const importGroup = limits.MaxSaveAllBatches

// Import saves every batch of r into st, in order, keeping event ids,
// aggregate versions and recorded times (eventstore.Store.SaveImported):
// a batch is saved only if its aggregate is at the batch's version minus
// one. Runs of consecutive batches (up to 1,000 batches and 10,000
// events, several of one aggregate included) are saved together, each run
// atomically, and so each batch. Batches stored already are
// Duplicates, so an import interrupted and run again on the same archive
// ends with exactly one copy of every event. It stops at the first bad
// line or batch with an error naming the line, leaving every batch before
// it imported: a bad archive (see Reader.Next) wraps
// eventstore.ErrInvalid, a batch that st refuses (such as an event id or
// type it does not take, or a recorded time in the future) the error of
// SaveImported, and a batch whose version does not follow the aggregate's
// version in st wraps eventstore.ErrConflict. An archive with records
// (definitions, tenants) is refused at the first: use ImportProject.
func Import(ctx context.Context, st *eventstore.Store, r *Reader) (Stats, error) {
	return ImportProject(ctx, Project{Store: st}, r)
}

// importer gathers runs of consecutive batches and saves each run with
// one SaveImported, which takes several batches of one aggregate in order.
// A run is saved by a goroutine while the next is read; one save at a
// time, in order, so that a run is saved only after the one before it
// was.
type importer struct {
	st     *eventstore.Store
	stats  Stats // of the saves waited for
	group  []eventstore.ImportedBatch
	lines  []int // of group's batches
	events int   // in group
	// saving is the outcome of the save in flight (nil when none), whose
	// run is spare and spareLines, reused for the run after the next.
	saving     chan error
	spare      []eventstore.ImportedBatch
	spareLines []int
	// failed is set once a save failed: the batches after it are dropped.
	failed bool
}

// add adds b, read from line, to the run, saving the run first when b
// would not fit in it. An error is that of saving an earlier run.
func (im *importer) add(ctx context.Context, b Batch, line int) error {
	if len(im.group) >= importGroup || im.events+len(b.Events) > limits.MaxSaveAllEvents {
		if err := im.flush(ctx, false); err != nil {
			return err
		}
	}
	if im.failed {
		return nil
	}
	events := make([]eventstore.NewEvent, len(b.Events))
	for i, e := range b.Events {
		events[i] = eventstore.NewEvent{ID: e.ID, Type: e.Type, Data: e.Data, EncryptedData: e.EncryptedData, Metadata: e.Metadata}
	}
	im.group = append(im.group, eventstore.ImportedBatch{AggregateType: b.AggregateType, AggregateID: b.AggregateID,
		Events: events, ExpectedVersion: eventstore.ExpectVersion(b.Version - 1), RecordedAt: b.RecordedAt})
	im.lines = append(im.lines, line)
	im.events += len(b.Events)
	return nil
}

// flush waits for the save in flight, then starts saving the run, and
// with wait waits for that save too. It returns the first error of a
// save, after which the importer drops its run and saves nothing more.
func (im *importer) flush(ctx context.Context, wait bool) error {
	if err := im.wait(); err != nil || im.failed || len(im.group) == 0 {
		return err
	}
	group, lines := im.group, im.lines
	im.group, im.lines, im.events = im.spare[:0], im.spareLines[:0], 0
	im.spare, im.spareLines = group, lines
	done := make(chan error, 1)
	im.saving = done
	go func() { done <- im.save(ctx, group, lines) }()
	if wait {
		return im.wait()
	}
	return nil
}

// wait waits for the save in flight, if any, and returns its error.
func (im *importer) wait() error {
	if im.saving == nil {
		return nil
	}
	err := <-im.saving
	im.saving = nil
	if err != nil {
		im.failed = true
		im.group, im.lines, im.events = im.group[:0], im.lines[:0], 0
	}
	return err
}

// save saves the run group, read from lines. When the run is refused, it
// saves its batches one at a time, so that those before the bad one are
// imported and the error names the bad one's line.
func (im *importer) save(ctx context.Context, group []eventstore.ImportedBatch, lines []int) error {
	res, err := im.st.SaveImported(ctx, group)
	if err == nil {
		for i := range group {
			if err := im.count(group[i], res[i], lines[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if len(group) == 1 {
		return im.refused(group[0], lines[0], err)
	}
	for i := range group {
		res, err := im.st.SaveImported(ctx, group[i:i+1])
		if err != nil {
			return im.refused(group[i], lines[i], err)
		}
		if err := im.count(group[i], res[0], lines[i]); err != nil {
			return err
		}
	}
	return nil
}

// count adds the outcome of saving b to the stats.
func (im *importer) count(b eventstore.ImportedBatch, res eventstore.SaveResult, line int) error {
	version, _ := b.ExpectedVersion.Version()
	switch {
	case res.Version != version+1:
		// A duplicate of events stored by a save of another version.
		return fmt.Errorf("archive: import: line %d: batch %s/%s version %d is stored as version %d: %w",
			line, b.AggregateType, b.AggregateID, version+1, res.Version, eventstore.ErrConflict)
	case res.Duplicate:
		im.stats.Duplicates++
	default:
		im.stats.Batches++
		im.stats.Events += int64(len(b.Events))
	}
	return nil
}

// refused is the error of Import for batch b of line, refused with err.
func (im *importer) refused(b eventstore.ImportedBatch, line int, err error) error {
	version, _ := b.ExpectedVersion.Version()
	var ce *eventstore.ConflictError
	if errors.As(err, &ce) && ce.StoredIDs == 0 {
		return fmt.Errorf("archive: import: line %d: batch %s/%s version %d does not follow the stored version %d: %w",
			line, b.AggregateType, b.AggregateID, version+1, ce.Current, eventstore.ErrConflict)
	}
	return fmt.Errorf("archive: import: line %d: %w", line, err)
}
