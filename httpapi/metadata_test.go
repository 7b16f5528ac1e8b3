package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore/internal/limits"
)

// TestMetadataHTTP: an event's "metadata" object is saved (single and
// bulk forms), returned by loads and feeds as given, omitted for an event
// without, and refused with 422 naming the field past its bounds.
func TestMetadataHTTP(t *testing.T) {
	e := newFeedEnv(t, nil)
	meta := `{"correlationId":"corr-1","causationId":"cmd-9","tenant":"acme","note":"ünï \"q\""}`
	body := `{"events":[{"eventId":"` + id1 + `","eventType":"Noted","data":{"a":1},"metadata":` + meta + `},` +
		ev(id2, "Plain", `{"b":2}`) + `]}`
	e.must(200, "POST", "/aggregates/ledger/l-1/events", body)
	bulk := `{"batches":[{"aggregateId":"l-2","events":[{"eventId":"` + id3 + `","eventType":"Noted","metadata":{"correlationId":"corr-2"}}]}]}`
	e.must(200, "POST", "/aggregates/ledger/events", bulk)

	want := map[string]string{"correlationId": "corr-1", "causationId": "cmd-9", "tenant": "acme", "note": `ünï "q"`}
	var agg struct {
		Events []map[string]json.RawMessage `json:"events"`
	}
	raw := readBody(t, e.must(200, "GET", "/aggregates/ledger/l-1", ""))
	if err := json.Unmarshal([]byte(raw), &agg); err != nil || len(agg.Events) != 2 {
		t.Fatalf("load: %v %s", err, raw)
	}
	var got map[string]string
	if err := json.Unmarshal(agg.Events[0]["metadata"], &got); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("load must return the metadata saved: got %s (%v), want %v", agg.Events[0]["metadata"], err, want)
	}
	if m, ok := agg.Events[1]["metadata"]; ok {
		t.Errorf("an event without metadata must have no metadata field, got %s", m)
	}
	// Compact, keys in byte order, as the Go and JS clients' JSON parsers
	// take any object.
	if !strings.Contains(raw, `"metadata":{"causationId":"cmd-9","correlationId":"corr-1","note":"ünï \"q\"","tenant":"acme"}`) {
		t.Errorf("load body: %s", raw)
	}

	var feed struct {
		Entries []struct {
			Events []struct {
				EventID  string            `json:"eventId"`
				Metadata map[string]string `json:"metadata"`
			} `json:"events"`
		} `json:"entries"`
	}
	raw = readBody(t, e.must(200, "GET", "/feeds/ledger", ""))
	if err := json.Unmarshal([]byte(raw), &feed); err != nil || len(feed.Entries) != 2 {
		t.Fatalf("feed: %v %s", err, raw)
	}
	if m := feed.Entries[0].Events[0].Metadata; fmt.Sprint(m) != fmt.Sprint(want) {
		t.Errorf("feed must return the metadata saved: got %v", m)
	}
	if m := feed.Entries[0].Events[1].Metadata; m != nil {
		t.Errorf("feed: an event without metadata must have none, got %v", m)
	}
	if m := feed.Entries[1].Events[0].Metadata; len(m) != 1 || m["correlationId"] != "corr-2" {
		t.Errorf("feed: the bulk save's metadata: got %v", m)
	}
	agg2, err := e.st.Load(t.Context(), "ledger", "l-1")
	if err != nil || agg2.Events[0].Metadata.CorrelationID != "corr-1" || agg2.Events[0].Metadata.CausationID != "cmd-9" ||
		agg2.Events[0].Metadata.Values["tenant"] != "acme" || len(agg2.Events[0].Metadata.Values) != 2 {
		t.Errorf("the library must see the metadata saved over HTTP: %+v %v", agg2.Events[0].Metadata, err)
	}

	tooMany := make([]string, limits.MaxMetadataKeys+3)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	for _, c := range []struct {
		meta, field string
	}{
		{`"not an object"`, "events[0].metadata"},
		{`{"n":5}`, `events[0].metadata["n"]`},
		{`{"nested":{"a":"b"}}`, `events[0].metadata["nested"]`},
		{`{"a":"1","a":"2"}`, `events[0].metadata["a"]`},
		{`{` + strings.Join(tooMany, ",") + `}`, "events[0].metadata"},
		{`{"big":"` + strings.Repeat("x", limits.MaxMetadataBytes) + `"}`, "events[0].metadata"},
		{`{"bad key":"v"}`, `events[0].metadata["bad key"]`},
		{`{"eventId":"v"}`, `events[0].metadata["eventId"]`},
	} {
		body := `{"events":[{"eventId":"` + id1 + `","eventType":"Noted","metadata":` + c.meta + `}]}`
		b := mustErr(t, e.do("POST", "/aggregates/ledger/l-9/events", body), 422, "invalid")
		if !hasField(b.Errors, c.field) {
			t.Errorf("metadata %.60s: the error must name %s, got %+v", c.meta, c.field, b.Errors)
		}
	}
	e.must(404, "GET", "/aggregates/ledger/l-9", "")
}

// TestReusedIDHTTP: a save that reuses a stored event id for another event
// is 409 naming the id; an exact retry is 200 again.
func TestReusedIDHTTP(t *testing.T) {
	e := newFeedEnv(t, nil)
	body := events(ev(id1, "Placed", `{"total":1}`))
	e.must(200, "POST", "/aggregates/order/o-1/events", body)
	e.must(200, "POST", "/aggregates/order/o-1/events", body)
	b := mustErr(t, e.do("POST", "/aggregates/order/o-1/events", events(ev(id1, "Placed", `{"total":2}`))), 409, "conflict")
	if !strings.Contains(b.Message, id1) || !strings.Contains(b.Message, "different data") {
		t.Errorf("the conflict must name the reused id and what differs: %q", b.Message)
	}
	bulk := `{"batches":[{"aggregateId":"o-2","events":[` + ev(id2, "Placed", "") + `]},{"aggregateId":"o-1","events":[` + ev(id1, "Cancelled", `{"total":1}`) + `]}]}`
	b = mustErr(t, e.do("POST", "/aggregates/order/events", bulk), 409, "conflict")
	if !strings.Contains(b.Message, "batch 1") || !strings.Contains(b.Message, "different type") {
		t.Errorf("bulk: %q", b.Message)
	}
	e.must(404, "GET", "/aggregates/order/o-2", "")
}

// TestAllFeedReservedHTTP: saves to the aggregate type _all and projection
// definitions reading feed _all are 422, with a message that says what
// _all is; GET /feeds/_all stays the feed of all types.
func TestAllFeedReservedHTTP(t *testing.T) {
	e := newFeedEnv(t, nil)
	for _, c := range []struct{ path, body string }{
		{"/aggregates/_all/a-1/events", events(ev(id1, "Placed", ""))},
		{"/aggregates/_all/events", `{"batches":[{"aggregateId":"a-1","events":[` + ev(id1, "Placed", "") + `]}]}`},
	} {
		b := mustErr(t, e.do("POST", c.path, c.body), 422, "invalid")
		if !hasField(b.Errors, "aggregateType") || !strings.Contains(b.Errors[0].Message, "feed of all aggregate types") {
			t.Errorf("POST %s: %+v", c.path, b.Errors)
		}
	}
	def := `{"projectionName":"all","feedName":"_all","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.n"}]}]}`
	b := mustErr(t, e.do("POST", "/projections/definitions", def), 422, "invalid")
	if !hasField(b.Errors, "feedName") || !strings.Contains(b.Errors[0].Message, "feed of all aggregate types") {
		t.Errorf("definition: %+v", b.Errors)
	}
	e.must(200, "POST", "/aggregates/order/o-1/events", events(ev(id2, "Placed", "")))
	if f := e.feed("/feeds/_all"); len(f.Entries) != 1 {
		t.Errorf("GET /feeds/_all must read the feed of all types: %+v", f)
	}
}
