package eventstore

import (
	"testing"

	"github.com/google/uuid"
)

// FuzzNormalizeUUID checks normalizeUUID against github.com/google/uuid:
// it accepts exactly the 36-character forms uuid.Parse accepts, and returns
// their canonical lower-case text.
func FuzzNormalizeUUID(f *testing.F) {
	for _, s := range []string{"123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000",
		"123e4567e89b12d3a456426614174000", "{123e4567-e89b-12d3-a456-426614174000}", "123e4567-e89b-12d3-a456-42661417400g", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := normalizeUUID(s)
		u, err := uuid.Parse(s)
		want := err == nil && len(s) == 36
		if ok != want {
			t.Fatalf("normalizeUUID(%q) ok = %v, uuid.Parse: %v", s, ok, err)
		}
		if ok && got != u.String() {
			t.Fatalf("normalizeUUID(%q) = %q, want %q", s, got, u.String())
		}
	})
}
