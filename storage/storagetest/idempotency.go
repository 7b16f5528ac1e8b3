package storagetest

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func idempotencyCases() []testCase {
	return []testCase{
		{"RetryIsIdempotent", "a retried batch whose events are all stored succeeds with Duplicate set and the original Version and Position, and stores nothing", testRetry},
		{"MixedBatchConflicts", "a batch mixing stored and new event ids fails with ErrConflict and stores nothing", testMixedBatch},
		{"SameIDTwiceInBatch", "the same event id twice in one batch is invalid (ErrInvalid) and stores nothing", testSameIDTwice},
		{"ReusedIDConflicts", "saving an event id already stored in the aggregate with another type, data, encrypted data or metadata fails with a *ConflictError wrapping ErrConflict that names the id, through Append, AppendAll and with a version check that would fail, and stores nothing; an exact retry (data differing only in whitespace included) stays a Duplicate", testReusedID},
		{"IdenticalBatchesRace", "two identical batches saved concurrently both succeed, exactly one is stored and exactly one is not a Duplicate", testIdenticalRace},
	}
}

func testRetry(t *testing.T, h *harness) {
	batch := evs("Placed", 3)
	first := mustSave(t, h, "order", "o", batch, nil)
	second := mustSave(t, h, "order", "o", evs("Shipped", 2), nil)
	mustSave(t, h, "other", "o", evs("Noise", 1), nil)

	retry := mustSave(t, h, "order", "o", batch, nil)
	if !retry.Duplicate {
		t.Errorf("a retry of a stored batch must report Duplicate")
	}
	if retry.Version != first.Version || retry.Position != first.Position {
		t.Errorf("a retry must return the original batch's Version and Position: got %d/%d, want %d/%d", retry.Version, retry.Position, first.Version, first.Position)
	}
	// Ids are compared in their stored, lower-case form.
	upper := make([]eventstore.NewEvent, len(batch))
	copy(upper, batch)
	for i := range upper {
		upper[i].ID = strings.ToUpper(upper[i].ID)
	}
	if res := mustSave(t, h, "order", "o", upper, nil); !res.Duplicate || res.Version != first.Version {
		t.Errorf("a retry with the ids in upper case is the same batch: got %+v, want Duplicate at version %d", res, first.Version)
	}
	// A retry with an expected version that no longer matches is still a
	// duplicate: the client is asking whether its earlier save landed.
	opts := &eventstore.SaveOptions{ExpectedVersion: storage.ExpectVersion(1)}
	again := mustSave(t, h, "order", "o", batch[1:2], opts)
	if !again.Duplicate || again.Version != first.Version {
		t.Errorf("a retry of part of a stored batch (all its ids stored) must be a Duplicate at the original version: got %+v", again)
	}
	agg := mustLoad(t, h, "order", "o")
	if agg.Version != second.Version || len(agg.Events) != 5 {
		t.Errorf("a retried batch must store nothing: aggregate at version %d with %d events, want %d and 5", agg.Version, len(agg.Events), second.Version)
	}
	if n := len(feedEvents(t, h)); n != 6 {
		t.Errorf("a retried batch must add nothing to the feed: it holds %d events, want 6", n)
	}
	// The same id in another aggregate is another event.
	other := mustSave(t, h, "order", "o2", batch, nil)
	if other.Duplicate || other.Version != 1 {
		t.Errorf("event ids are unique per aggregate: saving the batch to order/o2 must store it at version 1, got %+v", other)
	}
}

func testMixedBatch(t *testing.T, h *harness) {
	batch := evs("A", 2)
	mustSave(t, h, "m", "x", batch, nil)
	mixed := []eventstore.NewEvent{ev("B", `{"new":true}`), batch[1]}
	_, err := h.store.Save(t.Context(), "m", "x", mixed, nil)
	if !errors.Is(err, storage.ErrConflict) {
		t.Errorf("a batch mixing a stored and a new id must fail with ErrConflict, got %v", err)
	}
	agg := mustLoad(t, h, "m", "x")
	if agg.Version != 1 || len(agg.Events) != 2 {
		t.Errorf("a batch mixing stored and new ids must store nothing: version %d with %d events, want 1 and 2", agg.Version, len(agg.Events))
	}
	if n := len(feedEvents(t, h)); n != 2 {
		t.Errorf("a refused mixed batch must add nothing to the feed: it holds %d events, want 2", n)
	}
}

func testSameIDTwice(t *testing.T, h *harness) {
	a := ev("A", "")
	twin := eventstore.NewEvent{ID: strings.ToUpper(a.ID), Type: "B"}
	for _, batch := range [][]eventstore.NewEvent{{a, a}, {a, twin}} {
		_, err := h.store.Save(t.Context(), "t", "x", batch, nil)
		if !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("the same id twice in one batch must fail with ErrInvalid, got %v", err)
			continue
		}
		var ve *eventstore.ValidationError
		if !errors.As(err, &ve) || len(ve.Fields) == 0 || ve.Fields[0].Field != "events[1].eventId" {
			t.Errorf("the ValidationError for a repeated id must name events[1].eventId, got %v", err)
		}
	}
	if _, err := h.store.Load(t.Context(), "t", "x"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a batch with a repeated id must store nothing: Load returned %v", err)
	}
}

func testIdenticalRace(t *testing.T, h *harness) {
	const rounds, racers = 20, 2
	type outcome struct {
		res eventstore.SaveResult
		err error
	}
	for round := range rounds {
		id := "agg-" + newID()
		batch := evs("Raced", 1+round%3)
		out := make(chan outcome, racers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range racers {
			wg.Go(func() {
				<-start
				res, err := h.store.Save(t.Context(), "race", id, batch, nil)
				out <- outcome{res, err}
			})
		}
		close(start)
		wg.Wait()
		close(out)
		fresh := 0
		for o := range out {
			if o.err != nil {
				t.Errorf("round %d: identical concurrent batches must both succeed, one failed: %v", round, o.err)
				continue
			}
			if !o.res.Duplicate {
				fresh++
			}
			if o.res.Version != 1 {
				t.Errorf("round %d: both saves must report the stored batch's version 1, got %d", round, o.res.Version)
			}
		}
		if fresh != 1 {
			t.Errorf("round %d: exactly one of two identical concurrent saves must store the batch (Duplicate false), %d did", round, fresh)
		}
		agg := mustLoad(t, h, "race", id)
		if agg.Version != 1 || len(agg.Events) != len(batch) {
			t.Fatalf("round %d: identical concurrent batches must be stored once: version %d with %d events, want 1 and %d", round, agg.Version, len(agg.Events), len(batch))
		}
	}
}
