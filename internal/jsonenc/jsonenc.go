// Package jsonenc appends JSON strings to byte slices exactly as
// encoding/json writes them with HTML escaping off, without reflection or
// allocation. The event store's projection states, the HTTP adapter's
// bodies and archives use it, so a string reads the same in all of them;
// AppendRaw appends event data as encoding/json does.
package jsonenc

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

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

// AppendString appends s as a JSON string exactly as encoding/json
// does with HTML escaping off: '"', '\\' and control bytes escaped (\b,
// \f, \n, \r, \t short, others as \u00XX), U+2028 and U+2029 as \u2028
// and \u2029, each byte of invalid UTF-8 as \ufffd.
func AppendString(dst []byte, s string) []byte {
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

// AppendRaw appends the JSON text raw as encoding/json encodes a
// json.RawMessage with HTML escaping off: compacted, every other byte
// kept. raw must be valid JSON, as event data is (the Store checks it on
// save), and is usually compact already, which one pass over it finds and
// appends as it is, without validating it again; only text with
// whitespace between tokens goes through json.Compact, which also
// validates it.
func AppendRaw(dst, raw []byte) ([]byte, error) {
	if IsCompact(raw) {
		return append(dst, raw...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, raw); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

// IsCompact reports whether raw holds no whitespace outside strings.
func IsCompact(raw []byte) bool {
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
