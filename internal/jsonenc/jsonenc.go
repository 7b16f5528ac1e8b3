// Package jsonenc appends JSON strings to byte slices exactly as
// encoding/json writes them with HTML escaping off, without reflection or
// allocation. The event store's projection states and the HTTP adapter's
// bodies both use it, so a string reads the same in both.
package jsonenc

import "unicode/utf8"

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
