package names

import (
	"fmt"
	"testing"
	"unicode/utf8"
)

// problemReference is the rule problem implements, written plainly: the
// fast path for printable ASCII must not change a single verdict.
func problemReference(s string, path bool) string {
	switch {
	case s == "":
		return "is required"
	case len(s) > MaxLen:
		return fmt.Sprintf("must be at most %d bytes long", MaxLen)
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	}
	for _, r := range s {
		if (path && r == '/') || r < 0x20 || r == 0x7f {
			return fmt.Sprintf("must not contain %q", r)
		}
	}
	return ""
}

func FuzzProblem(f *testing.F) {
	for _, s := range []string{"order", "a/b", "", ".", "é", "a\x7fb", "a\nb", "\xff", "ok\x00", "Order-1_x.y~z", "日本/語"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, path := range []bool{false, true} {
			if got, want := problem(s, path), problemReference(s, path); got != want {
				t.Fatalf("problem(%q, %v) = %q, want %q", s, path, got, want)
			}
		}
	})
}
