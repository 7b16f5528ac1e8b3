package memory

import (
	"context"
	"errors"
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
)

// An id that is not 36 bytes long cannot be a UUID the Store passed on:
// it is refused, and nothing is stored.
func TestAppendRefusesIDsOfAnotherLength(t *testing.T) {
	ctx := context.Background()
	s := newStore()
	defer s.Close()
	for _, id := range []string{"", "123e4567e89b12d3a456426614174000", "{123e4567-e89b-12d3-a456-426614174000}"} {
		req := storage.AppendRequest{AggregateType: "t", AggregateID: "a", Events: []storage.Event{
			{ID: uuid.NewString(), Type: "E", RecordedAt: time.Now()},
			{ID: id, Type: "E", RecordedAt: time.Now()},
		}}
		if _, err := s.Append(ctx, req); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("Append with event id %q: got %v, want ErrInvalid", id, err)
		}
	}
	if _, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: "a"}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("after refused appends, Load: got %v, want ErrNotFound", err)
	}
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
