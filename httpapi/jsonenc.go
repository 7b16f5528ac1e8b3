package httpapi

import (
	"strconv"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/jsonenc"
	"github.com/eventkit-go/eventstore/storage"
)

// The append functions below write the bodies of loads and feeds without
// reflection and without allocating per event. Their output is byte for
// byte what a json.Encoder with SetEscapeHTML(false) writes for
// eventJSON and feedEntryJSON (minus its newline), which the tests and
// the fuzz test compare.

// appendJSONString appends s as a JSON string, as encoding/json does
// with HTML escaping off.
func appendJSONString(dst []byte, s string) []byte { return jsonenc.AppendString(dst, s) }

// appendRawJSON appends event data as encoding/json encodes a
// json.RawMessage with HTML escaping off (jsonenc.AppendRaw): compact data
// is appended as it is, without validating it again (the Store checks
// data on save); other data goes through json.Compact.
func appendRawJSON(dst, raw []byte) ([]byte, error) { return jsonenc.AppendRaw(dst, raw) }

// appendEventJSON appends e in the form of eventJSON.
func appendEventJSON(dst []byte, e *eventstore.Event) ([]byte, error) {
	dst = append(dst, `{"eventId":`...)
	dst = appendJSONString(dst, e.ID)
	dst = append(dst, `,"eventType":`...)
	dst = appendJSONString(dst, e.Type)
	if len(e.Data) > 0 {
		dst = append(dst, `,"data":`...)
		var err error
		if dst, err = appendRawJSON(dst, e.Data); err != nil {
			return dst, err
		}
	}
	if e.EncryptedData != "" {
		dst = append(dst, `,"encryptedData":`...)
		dst = appendJSONString(dst, e.EncryptedData)
	}
	if !e.Metadata.IsZero() {
		dst = append(dst, `,"metadata":`...)
		dst = storage.AppendMetadata(dst, e.Metadata)
	}
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, e.Version, 10)
	dst = append(dst, `,"sequence":`...)
	dst = strconv.AppendInt(dst, e.Sequence, 10)
	dst = append(dst, `,"position":`...)
	dst = strconv.AppendInt(dst, e.Position, 10)
	dst = append(dst, `,"recordedAt":`...)
	dst = strconv.AppendInt(dst, e.RecordedAt.UnixMilli(), 10)
	return append(dst, '}'), nil
}

// appendEventsJSON appends events as a comma-separated list of
// appendEventJSON, without brackets.
func appendEventsJSON(dst []byte, events []eventstore.Event) ([]byte, error) {
	for i := range events {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendEventJSON(dst, &events[i]); err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// appendFeedEntryJSON appends e in the form of feedEntryJSON.
func appendFeedEntryJSON(dst []byte, e *eventstore.FeedEntry) ([]byte, error) {
	dst = append(dst, `{"sequenceNumber":`...)
	dst = strconv.AppendInt(dst, e.Cursor, 10)
	dst = append(dst, `,"aggregateId":`...)
	dst = appendJSONString(dst, e.AggregateID)
	dst = append(dst, `,"aggregateType":`...)
	dst = appendJSONString(dst, e.AggregateType)
	dst = append(dst, `,"feedName":`...)
	dst = appendJSONString(dst, e.AggregateType)
	dst = append(dst, `,"timestamp":`...)
	dst = strconv.AppendInt(dst, e.RecordedAt.UnixMilli(), 10)
	dst = append(dst, `,"events":[`...)
	dst, err := appendEventsJSON(dst, e.Events)
	if err != nil {
		return dst, err
	}
	return append(dst, ']', '}'), nil
}
