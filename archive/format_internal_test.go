package archive

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
)

// metadataObject is the metadata of an event as the map that
// encoding/json encodes as storage.AppendMetadata does.
func metadataObject(m eventstore.Metadata) map[string]string {
	if m.IsZero() {
		return nil
	}
	o := make(map[string]string, len(m.Values)+2)
	for k, v := range m.Values {
		o[k] = v
	}
	if m.CorrelationID != "" {
		o[keyCorrelation] = m.CorrelationID
	}
	if m.CausationID != "" {
		o[keyCausation] = m.CausationID
	}
	return o
}

// TestAppendBatchIsEncodingJSON checks that appendBatch writes, byte for
// byte, what encoding/json makes of the batch's batchLine with
// SetEscapeHTML(false): escapes, invalid UTF-8, data with space (inside
// strings too), metadata keys in order, fractional seconds and time zones,
// for a batch given to WriteBatch and one read from a Store.
func TestAppendBatchIsEncodingJSON(t *testing.T) {
	odd := "q\"b\\s/<>&\b\f\n\r\t\x00\x1f\x7f é \u2028\u2029 \xff\xfe 😀"
	at := time.Date(2026, 12, 6, 22, 0, 0, 123_456_000, time.FixedZone("x", 3600))
	batches := []Batch{
		{AggregateType: "order", AggregateID: "o-1", Version: 1, RecordedAt: at,
			Events: []Event{{ID: "5b0e7c1a-3f0d-4c1e-9a59-1d2f3e4a5b01", Type: "Placed", Data: json.RawMessage(`{"a": 1,  "b" : ["x", {"c":null}], "d":"<&>"}`)}}},
		{AggregateType: odd, AggregateID: odd, Version: 1 << 40, RecordedAt: time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
			Events: []Event{
				{ID: odd, Type: odd, EncryptedData: odd, Metadata: eventstore.Metadata{CorrelationID: odd, CausationID: "c",
					Values: map[string]string{"z": "1", "a": odd, odd: "", "correlationId": "shadowed", "M": "m"}}},
				{ID: "2", Type: "t", Metadata: eventstore.Metadata{Values: map[string]string{"causationId": "kept"}}},
				{ID: "3", Type: "t", Data: json.RawMessage("{}"), Metadata: eventstore.Metadata{CausationID: "only"}},
			}},
		{AggregateType: "a", AggregateID: "b", Version: 7, RecordedAt: time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
			Events: []Event{{ID: "x", Type: "y", Data: json.RawMessage("\n{ \"n\" :\t1.50e3 }\n")},
				{ID: "z", Type: "y", Data: json.RawMessage(`{"s":"a b \" c\\","n":[1,{"x":" y\u0020z "}],"<":"&"}`)}}},
	}
	for i, b := range batches {
		l := batchLine{AggregateType: b.AggregateType, AggregateID: b.AggregateID, Version: b.Version,
			RecordedAt: b.RecordedAt.UTC(), Events: make([]eventLine, len(b.Events))}
		for j, e := range b.Events {
			l.Events[j] = eventLine{ID: e.ID, Type: e.Type, Data: e.Data, EncryptedData: e.EncryptedData,
				Metadata: metadataObject(e.Metadata)}
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&l); err != nil {
			t.Fatal(err)
		}
		for _, stored := range []bool{false, true} {
			got, err := appendBatch(nil, &b, stored)
			if err != nil || string(got) != want.String() {
				t.Errorf("batch %d, stored %v: appendBatch =\n%s, %v; encoding/json:\n%s", i, stored, got, err, want.Bytes())
			}
		}
	}
	bad := func(data string) *Batch {
		return &Batch{AggregateType: "a", AggregateID: "b", Version: 1, RecordedAt: at,
			Events: []Event{{ID: "x", Type: "y", Data: json.RawMessage(data)}}}
	}
	if _, err := appendBatch(nil, bad(`{"a":`), false); err == nil {
		t.Error("appendBatch of data that is not JSON must fail")
	}
	// Data from a Store is valid JSON: only data with space is checked.
	if _, err := appendBatch(nil, bad(`{"a": }`), true); err == nil {
		t.Error("appendBatch of stored data with space that is not JSON must fail")
	}
}
