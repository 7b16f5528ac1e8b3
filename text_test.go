package eventstore

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClipCutsOnRuneBoundaries(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("é", 40), "x" + strings.Repeat("é", 40), "xx" + strings.Repeat("€", 40),
		"bad \xff\xfe" + strings.Repeat("a", 80),
	} {
		got := clip(s)
		if !utf8.ValidString(got) || len(got) > 64+len("…") || !strings.HasSuffix(got, "…") {
			t.Errorf("clip(%q) = %q: want valid UTF-8, at most 64 bytes and …", s, got)
		}
	}
	if got := clip("short é"); got != "short é" {
		t.Errorf("clip of a short string = %q", got)
	}
}

func TestSanitizeMessage(t *testing.T) {
	for _, s := range []string{"bad \xff\xfe text \x00", strings.Repeat("é", 10_000), "x" + strings.Repeat("é", 10_000)} {
		got := sanitizeMessage(s)
		if !utf8.ValidString(got) || len(got) > maxMessageLen || strings.Contains(got, "\x00") {
			t.Errorf("sanitizeMessage(%.20q) = %.40q (%d bytes): want valid UTF-8 without NUL within %d bytes", s, got, len(got), maxMessageLen)
		}
	}
	if got := sanitizeMessage("cannot add: é"); got != "cannot add: é" {
		t.Errorf("a short valid message must be unchanged, got %q", got)
	}
}
