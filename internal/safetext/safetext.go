// Package safetext makes arbitrary bytes safe to record as text: valid
// UTF-8, without NUL bytes (which PostgreSQL refuses in text), and, when
// shortened, cut on a rune boundary.
package safetext

import (
	"strings"
	"unicode/utf8"
)

// Ellipsis marks text that Clip shortened.
const Ellipsis = "…"

// Clean returns s as valid UTF-8 without NUL bytes: each run of invalid
// bytes becomes U+FFFD and NUL bytes are dropped. Valid text without NUL
// is returned unchanged, without copying.
func Clean(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

// Clip returns Clean(s) if it is at most n bytes long; otherwise it cuts it
// on a rune boundary and appends Ellipsis, within n bytes in all. n must be
// at least len(Ellipsis).
func Clip(s string, n int) string {
	s = Clean(s)
	if len(s) <= n {
		return s
	}
	cut := n - len(Ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + Ellipsis
}
