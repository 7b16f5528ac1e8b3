package storagetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
)

func metadataCases() []testCase {
	return []testCase{
		{"MetadataRoundTrips", "Metadata (correlation and causation ids and the caller's keys, up to MaxMetadataKeys keys and MaxMetadataBytes encoded) is stored with each event by Append and AppendAll and returned equal by Load and ReadFeed (whole feed, a type's feed, after a FeedSequence); an event saved without metadata comes back with the zero Metadata", testMetadataRoundTrip},
		{"MetadataBoundsRefused", "the Store refuses metadata past its bounds (keys, encoded bytes, key form, reserved keys, invalid UTF-8) with a *ValidationError naming the event's field, and stores nothing of the batch", testMetadataBounds},
	}
}

// sampleMetadata returns metadata of every shape the suite round-trips,
// the zero Metadata first.
func sampleMetadata() []storage.Metadata {
	many := make(map[string]string, storage.MaxMetadataKeys)
	for i := range storage.MaxMetadataKeys {
		many[fmt.Sprintf("key-%02d", i)] = fmt.Sprintf("value %d", i)
	}
	// A value that makes the encoding exactly MaxMetadataBytes long.
	big := storage.Metadata{CorrelationID: "corr", Values: map[string]string{"big": ""}}
	big.Values["big"] = strings.Repeat("x", storage.MaxMetadataBytes-len(storage.AppendMetadata(nil, big)))
	return []storage.Metadata{
		{},
		{CorrelationID: "3f1c2a9e-4b7d-4e8a-9c1f-2d3e4f5a6b7c"},
		{CausationID: "cmd-17"},
		{CorrelationID: "c", CausationID: "d", Values: map[string]string{
			"tenant":      "acme",
			"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
			"note":        "ünïcödé ✓ \"quoted\" back\\slash\nnew line\ttab \x01 <&>",
			"empty":       "",
		}},
		{Values: many},
		big,
	}
}

func testMetadataRoundTrip(t *testing.T, h *harness) {
	metas := sampleMetadata()
	if n := len(storage.AppendMetadata(nil, metas[len(metas)-1])); n != storage.MaxMetadataBytes {
		t.Fatalf("the suite's largest metadata encodes to %d bytes, want %d", n, storage.MaxMetadataBytes)
	}
	withMeta := func(typ string) []eventstore.NewEvent {
		out := evs(typ, len(metas))
		for i := range out {
			out[i].Metadata = metas[i]
		}
		return out
	}
	first := withMeta("Noted")
	mustSave(t, h, "ledger", "a1", first[:2], nil)
	mustSave(t, h, "plain", "p1", evs("Plain", 2), nil)
	mustSave(t, h, "ledger", "a1", first[2:], nil)
	one := ev("Single", `{"x":1}`)
	one.Metadata = metas[3]
	mustSave(t, h, "ledger", "a2", []eventstore.NewEvent{one}, nil)
	// AppendAll: straight to the Storage, and through Store.SaveAll.
	mustAppendAll(t, h, []storage.AppendRequest{
		request("ledger", "a3", withMeta("Bulk"), storage.VersionCheck{}),
		request("plain", "p2", evs("Plain", 1), storage.VersionCheck{}),
	})
	if _, err := h.store.SaveAll(t.Context(), "ledger", []eventstore.Batch{
		{AggregateID: "a4", Events: withMeta("All")},
		{AggregateID: "a5", Events: []eventstore.NewEvent{ev("All", "")}},
	}); err != nil {
		t.Fatalf("SaveAll: %v", err)
	}

	want := map[string][]storage.Metadata{
		"a1": metas, "a2": {metas[3]}, "a3": metas, "a4": metas, "a5": {{}},
	}
	var loaded []storage.Event
	for _, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
		agg := mustLoad(t, h, "ledger", id)
		if len(agg.Events) != len(want[id]) {
			t.Fatalf("Load ledger/%s must return %d events, got %d", id, len(want[id]), len(agg.Events))
		}
		for i, e := range agg.Events {
			if !e.Metadata.Equal(want[id][i]) {
				t.Errorf("Load ledger/%s event %d: Metadata %+v, want %+v", id, i, e.Metadata, want[id][i])
			}
			if want[id][i].IsZero() && (!e.Metadata.IsZero() || e.Metadata.Values != nil) {
				t.Errorf("Load ledger/%s event %d: saved without metadata, it must come back as the zero Metadata, got %#v", id, i, e.Metadata)
			}
		}
		loaded = append(loaded, agg.Events...)
	}
	slices.SortFunc(loaded, func(a, b storage.Event) int { return int(a.Position - b.Position) })
	feed, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 3})
	typed, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 3, AggregateType: "ledger"})
	after := loaded[0].FeedSequence
	var later []storage.Event
	for _, e := range loaded {
		if e.FeedSequence > after {
			later = append(later, e)
		}
	}
	bySeq, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 3, AggregateType: "ledger", AfterFeedSequence: after})
	for name, got := range map[string][]storage.Event{
		"the whole feed":                        filterType(feed, "ledger"),
		"the ledger feed":                       typed,
		"the ledger feed after its first batch": bySeq,
	} {
		w := loaded
		if strings.Contains(name, "after") {
			w = later
		}
		if msg := sameEvents(got, w); msg != "" {
			t.Errorf("%s must carry each event's Metadata as Load does: %s", name, msg)
		}
	}
	for _, e := range filterType(feed, "plain") {
		if !e.Metadata.IsZero() || e.Metadata.Values != nil {
			t.Errorf("an event saved without metadata must have the zero Metadata in the feed, got %#v", e.Metadata)
		}
	}
}

func testMetadataBounds(t *testing.T, h *harness) {
	tooMany := make(map[string]string, storage.MaxMetadataKeys+1)
	for i := range storage.MaxMetadataKeys + 1 {
		tooMany[fmt.Sprintf("k%d", i)] = "v"
	}
	big := storage.Metadata{Values: map[string]string{"big": ""}}
	big.Values["big"] = strings.Repeat("x", storage.MaxMetadataBytes+1-len(storage.AppendMetadata(nil, big)))
	cases := []struct {
		name  string
		meta  storage.Metadata
		field string
	}{
		{"too many keys", storage.Metadata{Values: tooMany}, "events[1].metadata"},
		{"one byte too many", big, "events[1].metadata"},
		{"a key with a space", storage.Metadata{Values: map[string]string{"bad key": "v"}}, `events[1].metadata["bad key"]`},
		{"an empty key", storage.Metadata{Values: map[string]string{"": "v"}}, `events[1].metadata[""]`},
		{"a key starting with a digit", storage.Metadata{Values: map[string]string{"1st": "v"}}, `events[1].metadata["1st"]`},
		{"a key too long", storage.Metadata{Values: map[string]string{strings.Repeat("k", limits.MaxMetadataKeyLen+1): "v"}},
			`events[1].metadata["kkkkkkkkkkkkkkkk*`},
		{"correlationId as a key", storage.Metadata{Values: map[string]string{"correlationId": "c"}}, `events[1].metadata["correlationId"]`},
		{"causationId as a key", storage.Metadata{Values: map[string]string{"causationId": "c"}}, `events[1].metadata["causationId"]`},
		{"a $.metadata field as a key", storage.Metadata{Values: map[string]string{"eventType": "x"}}, `events[1].metadata["eventType"]`},
		{"another $.metadata field as a key", storage.Metadata{Values: map[string]string{"aggregateId": "x"}}, `events[1].metadata["aggregateId"]`},
		{"invalid UTF-8 in a value", storage.Metadata{Values: map[string]string{"note": "a\xffb"}}, "events[1].metadata.note"},
		{"invalid UTF-8 in the correlation id", storage.Metadata{CorrelationID: "\xc3"}, "events[1].metadata.correlationId"},
		{"invalid UTF-8 in the causation id", storage.Metadata{CausationID: "\xc3("}, "events[1].metadata.causationId"},
	}
	// check checks err names field (a prefix of it when it ends with *).
	check := func(what string, err error, field string) {
		t.Helper()
		var ve *eventstore.ValidationError
		switch {
		case !errors.Is(err, eventstore.ErrInvalid) || !errors.As(err, &ve):
			t.Errorf("%s: the error must be a *ValidationError wrapping ErrInvalid, got %T %v", what, err, err)
		case !slices.ContainsFunc(ve.Fields, func(f eventstore.FieldError) bool {
			prefix, ok := strings.CutSuffix(field, "*") // a clipped name
			return f.Field == field || ok && strings.HasPrefix(f.Field, prefix)
		}):
			t.Errorf("%s: the ValidationError must name the field %s, got %+v", what, field, ve.Fields)
		}
	}
	for _, c := range cases {
		events := evs("Noted", 2)
		events[1].Metadata = c.meta
		_, err := h.store.Save(t.Context(), "ledger", "a1", events, nil)
		check("Save with "+c.name, err, c.field)
		_, err = h.store.SaveAll(t.Context(), "ledger", []eventstore.Batch{
			{AggregateID: "a2", Events: evs("Noted", 1)},
			{AggregateID: "a3", Events: events},
		})
		check("SaveAll with "+c.name, err, "batches[1]."+c.field)
	}
	if head := mustFeedHead(t, h, ""); head != 0 {
		t.Errorf("refused saves must store nothing: the feed's head is %d, want 0", head)
	}
}
