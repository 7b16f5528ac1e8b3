package safetext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"plain é ✓":        "plain é ✓",
		"bad \xff\xfe end": "bad \uFFFD end",
		"nul\x00byte":      "nulbyte",
		"cut é\xc3":        "cut é\uFFFD",
		"\x00\xff\x00":     "\uFFFD",
	} {
		if got := Clean(in); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven byte", 10, "eleven " + Ellipsis},
		{long, 67, strings.Repeat("é", 32) + Ellipsis},             // 64 bytes of é
		{"x" + long, 67, "x" + strings.Repeat("é", 31) + Ellipsis}, // a cut inside é backs off
		{"a\xffb" + long, 8, "a\uFFFDb" + Ellipsis},
	} {
		got := Clip(c.in, c.n)
		if got != c.want {
			t.Errorf("Clip(%.20q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
		if !utf8.ValidString(got) || len(got) > c.n {
			t.Errorf("Clip(%.20q, %d) = %q: not valid UTF-8 within %d bytes", c.in, c.n, got, c.n)
		}
	}
}

func FuzzClip(f *testing.F) {
	f.Add("bad \xff\xfe text \x00", 10)
	f.Add(strings.Repeat("é", 50), 67)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = len(Ellipsis) + abs(n)%200
		got := Clip(s, n)
		if !utf8.ValidString(got) || len(got) > n || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("Clip(%q, %d) = %q: want valid UTF-8 without NUL within %d bytes", s, n, got, n)
		}
		if c := Clean(s); len(c) <= n && got != c {
			t.Fatalf("Clip(%q, %d) = %q: text that fits must be kept whole (%q)", s, n, got, c)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -(n + 1)
	}
	return n
}
