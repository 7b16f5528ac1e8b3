package storagetest

import (
	"errors"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func testReusedID(t *testing.T, h *harness) {
	meta := storage.Metadata{CorrelationID: "c-1", Values: map[string]string{"tenant": "acme"}}
	batch := evs("Placed", 3)
	batch[1].Data = []byte(`{"total": 12.5, "sku": "A-1"}`)
	batch[1].EncryptedData = "c2VjcmV0"
	batch[1].Metadata = meta
	batch[2].Data = nil
	first := mustSave(t, h, "order", "o", batch, nil)
	mustSave(t, h, "order", "o", evs("Shipped", 1), nil)
	head := mustFeedHead(t, h, "")

	changed := func(f func(e *eventstore.NewEvent)) []eventstore.NewEvent {
		out := append([]eventstore.NewEvent(nil), batch...)
		f(&out[1])
		return out
	}
	cases := []struct {
		name, differs string
		events        []eventstore.NewEvent
	}{
		{"another type", "type", changed(func(e *eventstore.NewEvent) { e.Type = "Cancelled" })},
		{"other data", "data", changed(func(e *eventstore.NewEvent) { e.Data = []byte(`{"total": 13, "sku": "A-1"}`) })},
		{"no data", "data", changed(func(e *eventstore.NewEvent) { e.Data = nil })},
		{"other encrypted data", "encrypted data", changed(func(e *eventstore.NewEvent) { e.EncryptedData = "b3RoZXI=" })},
		{"no metadata", "metadata", changed(func(e *eventstore.NewEvent) { e.Metadata = storage.Metadata{} })},
		{"other metadata", "metadata", changed(func(e *eventstore.NewEvent) {
			e.Metadata = storage.Metadata{CorrelationID: "c-1", Values: map[string]string{"tenant": "other"}}
		})},
		{"a causation id more", "metadata", changed(func(e *eventstore.NewEvent) {
			e.Metadata = storage.Metadata{CorrelationID: "c-1", CausationID: "x", Values: map[string]string{"tenant": "acme"}}
		})},
	}
	id := batch[1].ID
	check := func(what string, err error, differs string) {
		t.Helper()
		var ce *storage.ConflictError
		switch {
		case !errors.Is(err, storage.ErrConflict) || !errors.As(err, &ce):
			t.Errorf("%s: reusing a stored event id must fail with a *ConflictError wrapping ErrConflict, got %T %v", what, err, err)
		case ce.ReusedID != id || ce.Differs != differs:
			t.Errorf("%s: the ConflictError must name the id %s and what differs (%s), got ReusedID %q Differs %q", what, id, differs, ce.ReusedID, ce.Differs)
		}
	}
	for _, c := range cases {
		_, err := h.store.Save(t.Context(), "order", "o", c.events, nil)
		check("Save with "+c.name, err, c.differs)
		_, err = h.store.Save(t.Context(), "order", "o", c.events[1:2], &eventstore.SaveOptions{ExpectedVersion: storage.ExpectVersion(0)})
		check("Save of the one event with "+c.name+" and a failing version check", err, c.differs)
		_, err = h.s.AppendAll(t.Context(), []storage.AppendRequest{
			request("order", "fresh", evs("Placed", 1), storage.VersionCheck{}),
			request("order", "o", c.events, storage.VersionCheck{}),
		})
		var be *storage.BatchError
		if !errors.As(err, &be) || be.Index != 1 {
			t.Errorf("AppendAll with %s: the error must be a *BatchError naming batch 1, got %v", c.name, err)
		}
		check("AppendAll with "+c.name, err, c.differs)
	}
	if h2 := mustFeedHead(t, h, ""); h2 != head {
		t.Errorf("refused saves must store nothing: the feed's head moved from %d to %d", head, h2)
	}
	if _, err := h.store.Load(t.Context(), "order", "fresh"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("an AppendAll refused for a reused id must store none of its batches: order/fresh: %v", err)
	}

	// Exact retries, and data that differs in whitespace only, stay
	// duplicates.
	retry := mustSave(t, h, "order", "o", batch, nil)
	spaced := changed(func(e *eventstore.NewEvent) { e.Data = []byte("{\"total\":12.5,\n \"sku\":\"A-1\"}") })
	again := mustSave(t, h, "order", "o", spaced, nil)
	for _, r := range []eventstore.SaveResult{retry, again} {
		if !r.Duplicate || r.Version != first.Version || r.Position != first.Position {
			t.Errorf("a retry must be a Duplicate of the first save (%+v), got %+v", first, r)
		}
	}
	results := mustAppendAll(t, h, []storage.AppendRequest{request("order", "o", batch, storage.VersionCheck{})})
	if !results[0].Duplicate {
		t.Errorf("an AppendAll retry must be a Duplicate, got %+v", results[0])
	}
}
