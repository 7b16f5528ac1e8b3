package memory

import (
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestCanonicalID(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-426614174000"},
		{"123E4567-E89B-12D3-A456-42661417400F", "123e4567-e89b-12d3-a456-42661417400f"},
		{"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000"},
	} {
		if got, ok := canonicalID(c.in); !ok || got != c.want {
			t.Errorf("canonicalID(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
	for _, s := range []string{
		"",
		"123e4567e89b12d3a456426614174000",
		"{123e4567-e89b-12d3-a456-426614174000}",
		"urn:uuid:123e4567-e89b-12d3-a456-426614174000",
		"123e4567-e89b-12d3-a456-42661417400g",
		"123e4567-e89b-12d3-a456_426614174000",
		"g23e4567-e89b-12d3-a456-426614174000",
		"123e4567-e89b-12d3-a456-4266141740 0",
		"123e4567-e89b-12d3-a456-4266141740é",
	} {
		if id, ok := canonicalID(s); ok {
			t.Errorf("canonicalID(%q) = %q, accepted", s, id)
		}
	}
}

// FuzzCanonicalID checks canonicalID against github.com/google/uuid: it
// accepts exactly the 36-character forms uuid.Parse accepts and returns
// their lower-case text.
func FuzzCanonicalID(f *testing.F) {
	for _, s := range []string{"123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000", "123e4567-e89b-12d3-a456-42661417400g", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := canonicalID(s)
		u, err := uuid.Parse(s)
		if want := err == nil && len(s) == 36; ok != want {
			t.Fatalf("canonicalID(%q) ok = %v, uuid.Parse: %v", s, ok, err)
		}
		if ok && got != u.String() {
			t.Fatalf("canonicalID(%q) = %q, want %q", s, got, u.String())
		}
	})
}

// TestIDIndex checks the index against a map, with real hashes and with
// hashes forced to collide, through many growths.
func TestIDIndex(t *testing.T) {
	seed := maphash.MakeSeed()
	hashes := map[string]func(string) uint32{
		"maphash":    func(id string) uint32 { return uint32(maphash.String(seed, id) >> 32) },
		"few values": func(id string) uint32 { return uint32(maphash.String(seed, id)>>32) % 7 },
	}
	for name, hash := range hashes {
		t.Run(name, func(t *testing.T) {
			var x idIndex
			var ids []string
			want := map[string]int32{}
			n := 5000
			if name == "few values" {
				n = 600 // every lookup probes long runs
			}
			for i := range n {
				id := uuid.NewString()
				if _, ok := x.find(hash(id), func(j int32) bool { return ids[j] == id }); ok {
					t.Fatalf("found %s before it was added", id)
				}
				x.add(hash(id), int32(i))
				ids = append(ids, id)
				want[id] = int32(i)
			}
			for _, k := range rand.Perm(n) {
				id := ids[k]
				got, ok := x.find(hash(id), func(j int32) bool { return ids[j] == id })
				if !ok || got != want[id] {
					t.Fatalf("find(%s) = %d, %v; want %d", id, got, ok, want[id])
				}
				other := strings.ToUpper(id) // a different string, the same hash
				if _, ok := x.find(hash(id), func(j int32) bool { return ids[j] == other }); ok {
					t.Fatalf("find with a matching hash but another id found an event")
				}
			}
			if x.n != n || x.n*8 > len(x.slots)*5 {
				t.Fatalf("%d ids in %d slots", x.n, len(x.slots))
			}
			if len(x.slots)&(len(x.slots)-1) != 0 {
				t.Fatalf("%d slots, not a power of two", len(x.slots))
			}
		})
	}
}
