package storagetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
)

// newID returns a new random event id in lower case.
func newID() string { return uuid.NewString() }

// ev returns a NewEvent with a fresh id; data is used as given (nil for
// none).
func ev(typ, data string) eventstore.NewEvent {
	e := eventstore.NewEvent{ID: newID(), Type: typ}
	if data != "" {
		e.Data = json.RawMessage(data)
	}
	return e
}

// evs returns n events of type typ with small distinct data objects.
func evs(typ string, n int) []eventstore.NewEvent {
	out := make([]eventstore.NewEvent, n)
	for i := range out {
		out[i] = ev(typ, fmt.Sprintf(`{"n":%d}`, i))
	}
	return out
}

// mustSave saves through the Store and fails the test on error.
func mustSave(t testing.TB, h *harness, typ, id string, events []eventstore.NewEvent, opts *eventstore.SaveOptions) eventstore.SaveResult {
	t.Helper()
	res, err := h.store.Save(t.Context(), typ, id, events, opts)
	if err != nil {
		t.Fatalf("Save %s/%s of %d events: %v", typ, id, len(events), err)
	}
	return res
}

// mustLoad loads through the Store and fails the test on error.
func mustLoad(t testing.TB, h *harness, typ, id string) storage.Aggregate {
	t.Helper()
	agg, err := h.store.Load(t.Context(), typ, id)
	if err != nil {
		t.Fatalf("Load %s/%s: %v", typ, id, err)
	}
	return agg
}

// mustReadAll reads the whole feed selected by q (q.After is the start) and
// fails the test on error or on a page that breaks the feed contract.
func mustReadAll(t testing.TB, h *harness, q storage.FeedQuery) ([]storage.Event, int64) {
	t.Helper()
	events, head, err := readFeed(t.Context(), h.s, q)
	if err != nil {
		t.Fatalf("reading the feed %+v: %v", q, err)
	}
	return events, head
}

// readFeed pages through the feed from q.After, continuing each read with
// After = Head, until a read returns no event and does not move Head. It
// returns the events read and the final Head. Pages that break the
// contract of ReadFeed are reported as errors.
func readFeed(ctx context.Context, s storage.Storage, q storage.FeedQuery) ([]storage.Event, int64, error) {
	var all []storage.Event
	for range 1_000_000 {
		page, err := s.ReadFeed(ctx, q)
		if err != nil {
			return all, q.After, err
		}
		if err := checkPage(q, page); err != nil {
			return all, q.After, err
		}
		all = append(all, page.Events...)
		if len(page.Events) == 0 && page.Head == q.After {
			return all, page.Head, nil
		}
		q.After = page.Head
	}
	return all, q.After, fmt.Errorf("the feed did not settle after a million reads (Head keeps moving)")
}

// checkPage checks one page against the contract of ReadFeed.
func checkPage(q storage.FeedQuery, page storage.FeedPage) error {
	if len(page.Events) > q.Limit {
		return fmt.Errorf("ReadFeed must return at most Limit events: got %d with Limit %d", len(page.Events), q.Limit)
	}
	if page.Head < q.After {
		return fmt.Errorf("ReadFeed must not move Head backwards: Head %d after %d", page.Head, q.After)
	}
	last := q.After
	for i, e := range page.Events {
		if e.Position <= last {
			return fmt.Errorf("ReadFeed must return events after After in strictly increasing position order: event %d has position %d after %d (After %d)", i, e.Position, last, q.After)
		}
		if q.AggregateType != "" && e.AggregateType != q.AggregateType {
			return fmt.Errorf("ReadFeed filtered on %q returned an event of aggregate type %q at position %d", q.AggregateType, e.AggregateType, e.Position)
		}
		last = e.Position
	}
	if page.Head < last {
		return fmt.Errorf("FeedPage.Head must be at least the last returned position: Head %d, last event at %d", page.Head, last)
	}
	if q.MaxBytes > 0 {
		var total int64
		for i := range page.Events {
			if total >= q.MaxBytes {
				return fmt.Errorf("ReadFeed with MaxBytes %d must stop after the event with which it reaches MaxBytes: %d bytes before event %d", q.MaxBytes, total, i)
			}
			total += storage.EventBytes(&page.Events[i])
		}
	}
	if page.Truncated && (q.MaxBytes <= 0 || len(page.Events) == 0 || page.Head != last) {
		return fmt.Errorf("FeedPage.Truncated may be set only with MaxBytes, on a page with events whose Head is its last position: MaxBytes %d, %d events, Head %d, last at %d",
			q.MaxBytes, len(page.Events), page.Head, last)
	}
	return nil
}

// contiguous reports, for the events of one aggregate in order, whether
// their sequences run 1, 2, 3, ... and their versions start at 1 and rise
// by at most one from event to event. It returns "" when they do.
func contiguous(events []storage.Event) string {
	var version int64
	for i, e := range events {
		if e.Sequence != int64(i)+1 {
			return fmt.Sprintf("event %d (id %s) has Sequence %d, want %d", i, e.ID, e.Sequence, i+1)
		}
		if i == 0 && e.Version != 1 {
			return fmt.Sprintf("the first event (id %s) has Version %d, want 1", e.ID, e.Version)
		}
		if e.Version != version && e.Version != version+1 {
			return fmt.Sprintf("event %d (id %s) has Version %d after %d", i, e.ID, e.Version, version)
		}
		version = e.Version
	}
	return ""
}

// sameEvents compares two lists of stored events field by field and
// describes the first difference, or returns "".
func sameEvents(got, want []storage.Event) string {
	if len(got) != len(want) {
		return fmt.Sprintf("got %d events, want %d", len(got), len(want))
	}
	for i := range got {
		if msg := diffEvent(got[i], want[i]); msg != "" {
			return fmt.Sprintf("event %d: %s", i, msg)
		}
	}
	return ""
}

// diffEvent describes how two stored events differ, or returns "".
func diffEvent(got, want storage.Event) string {
	switch {
	case got.ID != want.ID:
		return fmt.Sprintf("ID %q, want %q", got.ID, want.ID)
	case got.Type != want.Type:
		return fmt.Sprintf("Type %q, want %q", got.Type, want.Type)
	case (got.Data == nil) != (want.Data == nil) || !bytes.Equal(got.Data, want.Data):
		return fmt.Sprintf("Data %s, want %s", showData(got.Data), showData(want.Data))
	case got.AggregateType != want.AggregateType || got.AggregateID != want.AggregateID:
		return fmt.Sprintf("aggregate %s/%s, want %s/%s", got.AggregateType, got.AggregateID, want.AggregateType, want.AggregateID)
	case got.Version != want.Version:
		return fmt.Sprintf("Version %d, want %d", got.Version, want.Version)
	case got.Sequence != want.Sequence:
		return fmt.Sprintf("Sequence %d, want %d", got.Sequence, want.Sequence)
	case got.Position != want.Position:
		return fmt.Sprintf("Position %d, want %d", got.Position, want.Position)
	case got.FeedSequence != want.FeedSequence:
		return fmt.Sprintf("FeedSequence %d, want %d", got.FeedSequence, want.FeedSequence)
	case got.EncryptedData != want.EncryptedData:
		return fmt.Sprintf("EncryptedData %q, want %q", clipText(got.EncryptedData), clipText(want.EncryptedData))
	case !got.Metadata.Equal(want.Metadata):
		return fmt.Sprintf("Metadata %+v, want %+v", got.Metadata, want.Metadata)
	case !got.RecordedAt.Equal(want.RecordedAt):
		return fmt.Sprintf("RecordedAt %v, want %v", got.RecordedAt, want.RecordedAt)
	}
	return ""
}

// clipText shortens long texts for messages.
func clipText(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%s... (%d bytes)", s[:40], len(s))
	}
	return s
}

func showData(d json.RawMessage) string {
	if d == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", d)
}

// request builds the AppendRequest that the Store builds for a save of
// events (ids already in lower case), for tests that call Append or
// AppendAll directly.
func request(typ, id string, events []eventstore.NewEvent, expected storage.VersionCheck) storage.AppendRequest {
	now := time.Now().UTC().Truncate(time.Microsecond)
	req := storage.AppendRequest{AggregateType: typ, AggregateID: id, ExpectedVersion: expected, Events: make([]storage.Event, len(events))}
	for i, e := range events {
		req.Events[i] = storage.Event{
			ID: strings.ToLower(e.ID), Type: e.Type, Data: e.Data, EncryptedData: e.EncryptedData, Metadata: e.Metadata,
			AggregateType: typ, AggregateID: id, RecordedAt: now,
		}
	}
	return req
}

// loadBatch loads the events of aggregate typ/id stored at version v (one
// batch), and fails the test on error or when there are none.
func loadBatch(t testing.TB, h *harness, typ, id string, v int64) []storage.Event {
	t.Helper()
	agg, err := h.s.Load(t.Context(), storage.LoadQuery{AggregateType: typ, AggregateID: id, AfterVersion: v - 1, Limit: 1})
	if err != nil {
		t.Fatalf("Load %s/%s version %d: %v", typ, id, v, err)
	}
	if len(agg.Events) == 0 {
		t.Fatalf("Load %s/%s version %d returned no event", typ, id, v)
	}
	return agg.Events
}

// mustFeedHead calls FeedHead and fails the test on error.
func mustFeedHead(t testing.TB, h *harness, typ string) int64 {
	t.Helper()
	head, err := h.s.FeedHead(t.Context(), typ)
	if err != nil {
		t.Fatalf("FeedHead(%q): %v", typ, err)
	}
	return head
}

// batchKey identifies one stored batch: an aggregate and a version.
type batchKey struct {
	typ, id string
	version int64
}

func keyOf(e storage.Event) batchKey { return batchKey{e.AggregateType, e.AggregateID, e.Version} }

// checkBatches checks the events of a feed in position order (the whole
// feed or part of it, as long as no batch is cut off at the start) for the
// numbering of batches: the events of one batch are adjacent with
// consecutive positions and share a FeedSequence, and each aggregate
// type's FeedSequences rise strictly from batch to batch. It returns ""
// when they do.
func checkBatches(events []storage.Event) string {
	lastSeq := make(map[string]int64)
	for i, e := range events {
		if e.FeedSequence < 1 {
			return fmt.Sprintf("event %d (%s/%s v%d at %d) has FeedSequence %d, want at least 1", i, e.AggregateType, e.AggregateID, e.Version, e.Position, e.FeedSequence)
		}
		if i > 0 && keyOf(events[i-1]) == keyOf(e) {
			p := events[i-1]
			if e.Position != p.Position+1 {
				return fmt.Sprintf("the events of batch %s/%s v%d must have consecutive positions: %d follows %d", e.AggregateType, e.AggregateID, e.Version, e.Position, p.Position)
			}
			if e.FeedSequence != p.FeedSequence {
				return fmt.Sprintf("the events of batch %s/%s v%d must share one FeedSequence: %d at position %d, %d at %d", e.AggregateType, e.AggregateID, e.Version, p.FeedSequence, p.Position, e.FeedSequence, e.Position)
			}
			continue
		}
		if last := lastSeq[e.AggregateType]; e.FeedSequence <= last {
			return fmt.Sprintf("FeedSequences of type %q must rise strictly from batch to batch: batch %s v%d at position %d has %d after %d", e.AggregateType, e.AggregateID, e.Version, e.Position, e.FeedSequence, last)
		}
		lastSeq[e.AggregateType] = e.FeedSequence
	}
	return ""
}
