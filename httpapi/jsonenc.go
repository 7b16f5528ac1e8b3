package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/eventkit-go/eventstore"
)

// The append functions below write the bodies of loads and feeds without
// reflection and without allocating per event. Their output is byte for
// byte what a json.Encoder with SetEscapeHTML(false) writes for
// eventJSON and feedEntryJSON (minus its newline), which the tests and
// the fuzz test compare.

// hexDigits are the digits of \u escapes, lower case as encoding/json's.
const hexDigits = "0123456789abcdef"

// plainASCII marks the bytes below utf8.RuneSelf that a JSON string holds
// unescaped when HTML escaping is off: every printable byte but '"' and
// '\\'.
var plainASCII = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendJSONString appends s as a JSON string exactly as encoding/json
// does with HTML escaping off: '"', '\\' and control bytes escaped (\b,
// \f, \n, \r, \t short, others as \u00XX), U+2028 and U+2029 as \u2028
// and \u2029, each byte of invalid UTF-8 as \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plainASCII[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendRawJSON appends JSON text as encoding/json encodes a
// json.RawMessage with HTML escaping off: compacted, every other byte
// kept. Event data is valid JSON (the Store checks it on save) and
// usually compact already, which one pass over it finds; only data with
// whitespace between tokens goes through json.Compact, which also
// validates it. Compact data is not validated again.
func appendRawJSON(dst, raw []byte) ([]byte, error) {
	if isCompact(raw) {
		return append(dst, raw...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, raw); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

// isCompact reports whether raw holds no whitespace outside strings.
func isCompact(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		switch raw[i] {
		case ' ', '\t', '\n', '\r':
			return false
		case '"':
			// Skip the string: to its closing quote, past escapes.
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		}
	}
	return true
}

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
