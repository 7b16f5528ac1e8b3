package httpapi

import (
	"bytes"
	"encoding/json"
	"maps"
	"mime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore"
)

// eventsJSON converts events to eventJSON, the form encoding/json wrote
// before appendEventJSON, against which it is compared.
func eventsJSON(events []eventstore.Event) []eventJSON {
	out := make([]eventJSON, len(events))
	for i, e := range events {
		out[i] = eventJSON{
			EventID: e.ID, EventType: e.Type, Data: e.Data, EncryptedData: e.EncryptedData,
			Metadata: metadataMap(e.Metadata), Version: e.Version, Sequence: e.Sequence, Position: e.Position,
			RecordedAt: e.RecordedAt.UnixMilli(),
		}
	}
	return out
}

// metadataMap is m as one map, the form of eventJSON.Metadata; nil for
// none.
func metadataMap(m eventstore.Metadata) map[string]string {
	if m.IsZero() {
		return nil
	}
	out := maps.Clone(m.Values)
	if out == nil {
		out = map[string]string{}
	}
	if m.CorrelationID != "" {
		out["correlationId"] = m.CorrelationID
	}
	if m.CausationID != "" {
		out["causationId"] = m.CausationID
	}
	return out
}

// stdJSON encodes v as the handler did with encoding/json: HTML escaping
// off, without the trailing newline.
func stdJSON(t testing.TB, v any) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// trickyStrings hold every class of byte encoding/json treats apart.
var trickyStrings = []string{
	"", "plain", `quote " and backslash \ and slash /`, "<script>&amp;</script>",
	"\x00\x01\x07\b\t\n\v\f\r\x1b\x1f\x7f", "é ü 日本 🎉", "\u2028 and \u2029", "\u2027\u202a",
	"\xff", "a\xc3", "\xe2\x80", "\xe2\x80\xa8\xe2\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf",
	"\ufffd", strings.Repeat("x", 1000) + "\n",
}

// trickyData is valid JSON as a save may store it: with whitespace,
// escapes, HTML characters, line separators and non-UTF-8 bytes in
// strings, which a RawMessage keeps.
var trickyData = []string{
	`{}`, `{"a":1}`, ` {"a" : 1 } `, "{\n\t\"a\": [1, 2,\r\n 3]\n}", `{"s":"a b  c"}`,
	`{"s":"quote \" space"}`, `{"s":"\\"  }`, `{"s":"\\\" x"  ,"t" : "\\\\"}`,
	`{"h":"<b>&</b>"}`, "{\"ls\":\"\u2028\u2029\"}", "{\"ls\" : \"\u2028\"}", "{\"bad\":\"\xff\xfe\"}",
	`{"u":"\u00e9\ud83c\udf89"}`, `{"n":1.50e+10,"z":-0,"x":null,"b":[true,false]}`,
	`{"deep":[[[{"a":[{}]}]]]}`, `[1, {"a" :"b"} ]`, `"str"`, `12`, `null`,
}

// trickyMetadata returns metadata of tricky strings for the i-th tricky
// event, none for every third.
func trickyMetadata(i int) eventstore.Metadata {
	n := len(trickyStrings)
	switch i % 3 {
	case 0:
		return eventstore.Metadata{}
	case 1:
		return eventstore.Metadata{CorrelationID: trickyStrings[(i+3)%n], Values: map[string]string{
			"zeta": trickyStrings[(i+4)%n], "alpha": trickyStrings[(i+5)%n], "causationIdx": "x", "Z": "upper"}}
	}
	return eventstore.Metadata{CausationID: trickyStrings[(i+6)%n]}
}

func trickyEvents() []eventstore.Event {
	var evs []eventstore.Event
	at := time.UnixMilli(1_700_000_000_123).Add(456 * time.Microsecond)
	for i, s := range trickyStrings {
		d := trickyData[i%len(trickyData)]
		evs = append(evs, eventstore.Event{
			ID: s, Type: trickyStrings[(i+1)%len(trickyStrings)], Data: json.RawMessage(d),
			EncryptedData: trickyStrings[(i+2)%len(trickyStrings)],
			Metadata:      trickyMetadata(i),
			Version:       int64(i), Sequence: int64(-i), Position: 1 << 62, RecordedAt: at,
		})
	}
	for _, d := range trickyData {
		evs = append(evs, eventstore.Event{ID: "id", Type: "T", Data: json.RawMessage(d), RecordedAt: time.Unix(-5, 0)})
	}
	evs = append(evs, eventstore.Event{ID: "no-data"}, eventstore.Event{ID: "empty-data", Data: json.RawMessage{}})
	return evs
}

// TestAppendJSONMatchesEncodingJSON: the hand-written encoder writes the
// bytes encoding/json wrote for events, feed entries and strings.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	for _, s := range append(trickyStrings, string(bytes.Repeat([]byte{0xe2, 0x80, 0xa9, 'a', 0x80}, 50))) {
		want, err := stdJSON(t, s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONString([]byte("prefix"), s); !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Errorf("string %q:\n got %s\nwant prefix%s", s, got, want)
		}
	}
	evs := trickyEvents()
	for i := range evs {
		want, err := stdJSON(t, eventsJSON(evs[i : i+1])[0])
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendEventJSON(nil, &evs[i])
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("event %d: err %v\n got %s\nwant %s", i, err, got, want)
		}
	}
	entries := []eventstore.FeedEntry{
		{Cursor: 7, AggregateType: "order<&>", AggregateID: "o-\u2028\xff", RecordedAt: time.UnixMilli(99), Events: evs},
		{Cursor: 0, AggregateType: "", AggregateID: ""},
		{Cursor: 1 << 60, AggregateType: "t", AggregateID: "\"", Events: evs[:1]},
	}
	for i := range entries {
		e := &entries[i]
		want, err := stdJSON(t, feedEntryJSON{
			SequenceNumber: e.Cursor, AggregateID: e.AggregateID, AggregateType: e.AggregateType,
			FeedName: e.AggregateType, Timestamp: e.RecordedAt.UnixMilli(), Events: eventsJSON(e.Events),
		})
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendFeedEntryJSON([]byte(`x`), e)
		if err != nil || !bytes.Equal(got[1:], want) {
			t.Errorf("entry %d: err %v\n got %s\nwant %s", i, err, got[1:], want)
		}
	}
}

// TestAppendRawJSONInvalid: data with whitespace goes through
// json.Compact, which refuses invalid JSON as encoding/json did.
func TestAppendRawJSONInvalid(t *testing.T) {
	for _, d := range []string{`{"a": }`, `{ "a"`, ` `} {
		if _, err := appendRawJSON(nil, []byte(d)); err == nil {
			t.Errorf("%q: no error", d)
		}
		ev := eventstore.Event{Data: json.RawMessage(d)}
		if _, err := appendEventJSON(nil, &ev); err == nil {
			t.Errorf("event with data %q: no error", d)
		}
	}
}

// FuzzAppendEventJSON compares the hand-written encoder with
// encoding/json on arbitrary strings and on arbitrary data that is valid
// JSON (the Store stores no other).
func FuzzAppendEventJSON(f *testing.F) {
	for i, s := range trickyStrings {
		f.Add(s, trickyStrings[(i+3)%len(trickyStrings)], []byte(trickyData[i%len(trickyData)]), int64(i)*1e11)
	}
	for _, d := range trickyData {
		f.Add("id", "", []byte(d), int64(-1))
	}
	f.Fuzz(func(t *testing.T, id, enc string, data []byte, ms int64) {
		if len(data) > 0 && !json.Valid(data) {
			data = nil
		}
		e := eventstore.Event{ID: id, Type: enc + id, Data: data, EncryptedData: enc,
			Version: ms, Sequence: ms / 3, Position: -ms, RecordedAt: time.UnixMilli(ms % (1 << 50))}
		want, err := stdJSON(t, eventsJSON([]eventstore.Event{e})[0])
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendEventJSON(nil, &e)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("err %v\n got %q\nwant %q", err, got, want)
		}
		entry := eventstore.FeedEntry{Cursor: ms, AggregateType: enc, AggregateID: id, RecordedAt: e.RecordedAt, Events: []eventstore.Event{e, e}}
		want, err = stdJSON(t, feedEntryJSON{SequenceNumber: ms, AggregateID: id, AggregateType: enc, FeedName: enc,
			Timestamp: e.RecordedAt.UnixMilli(), Events: eventsJSON(entry.Events)})
		if err != nil {
			t.Fatal(err)
		}
		got, err = appendFeedEntryJSON(nil, &entry)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("entry: err %v\n got %q\nwant %q", err, got, want)
		}
		if !utf8.Valid(got) && utf8.ValidString(id+enc) && utf8.Valid(data) {
			t.Fatalf("invalid UTF-8 out of valid input: %q", got)
		}
	})
}

// TestCheckJSONType: the spellings accepted without parsing are ones the
// parser accepts, and others are still parsed.
func TestCheckJSONType(t *testing.T) {
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "application/json; charset=UTF-8",
		"application/json;charset=utf-8", "Application/JSON", `application/json; charset="utf-8"`} {
		if err := checkJSONType(ct); err != nil {
			t.Errorf("%q: %v", ct, err)
		}
		if mt, params, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" || (params["charset"] != "" && !strings.EqualFold(params["charset"], "utf-8")) {
			t.Errorf("%q: the parser says %q %v %v", ct, mt, params, err)
		}
	}
	for _, ct := range []string{"", "text/plain", "application/json; charset=latin1", "application/jsonx"} {
		if err := checkJSONType(ct); err == nil {
			t.Errorf("%q accepted", ct)
		}
	}
}

// TestReadAll reads as io.ReadAll does, whatever the starting capacity.
func TestReadAll(t *testing.T) {
	for _, n := range []int{0, 1, 511, 512, 513, 5000} {
		src := strings.Repeat("x", n)
		for _, c := range []int{0, 1, n, n + 1} {
			got, err := readAll(make([]byte, 0, c), strings.NewReader(src))
			if err != nil || string(got) != src {
				t.Errorf("n %d cap %d: %d bytes, %v", n, c, len(got), err)
			}
		}
	}
}
