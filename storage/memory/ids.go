package memory

import (
	"fmt"
	"hash/maphash"
	"strings"

	"github.com/eventkit-go/eventstore"
)

// eventID is an event id of a request in canonical form (lower case), with
// its hash, both computed before the write lock is taken.
type eventID struct {
	text string
	hash uint32
}

// idClass classifies bytes of an event id: 0 for lower-case hex digits,
// idUpper for upper-case ones, idBad for anything else.
var idClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			t[c] = idUpper
		default:
			t[c] = idBad
		}
	}
	return t
}()

const (
	idUpper = 1
	idBad   = 2
)

// canonicalID returns s, a UUID in the 8-4-4-4-12 form, in lower case, or
// false when s is not one.
func canonicalID(s string) (string, bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return "", false
	}
	var acc uint8
	for _, part := range [...]string{s[0:8], s[9:13], s[14:18], s[19:23], s[24:36]} {
		for i := 0; i < len(part); i++ {
			acc |= idClass[part[i]]
		}
	}
	switch {
	case acc&idBad != 0:
		return "", false
	case acc&idUpper != 0:
		return strings.ToLower(s), true
	}
	return s, true
}

// eventIDs checks the event ids of req and appends them to buf, hashed
// with seed.
func eventIDs(buf []eventID, seed maphash.Seed, req *eventstore.AppendRequest) ([]eventID, error) {
	for _, e := range req.Events {
		id, ok := canonicalID(e.ID)
		if !ok {
			return nil, fmt.Errorf("event id %q: %w", e.ID, eventstore.ErrInvalid)
		}
		if len(e.EncryptedData) > eventstore.MaxEncryptedData {
			return nil, fmt.Errorf("event %s: %d bytes of encrypted data, more than %d: %w", e.ID, len(e.EncryptedData), eventstore.MaxEncryptedData, eventstore.ErrInvalid)
		}
		buf = append(buf, eventID{id, uint32(maphash.String(seed, id) >> 32)})
	}
	return buf, nil
}

// idIndex finds an aggregate's events by id. It is a hash table with
// linear probing whose slots are 8 bytes: the id's 32-bit hash above the
// event's index in the aggregate plus one (0 marks a free slot). Looking
// up an id that is not stored, the common case, reads one or two
// neighbouring cache lines and nothing else; the id itself is compared
// only when its full hash matches. The table holds no pointers.
type idIndex struct {
	slots []uint64 // a power of two long, at most 5/8 full
	n     int
}

// find returns the index of the event whose hash is h and for which isID
// returns true, if there is one.
func (x *idIndex) find(h uint32, isID func(idx int32) bool) (int32, bool) {
	if len(x.slots) == 0 {
		return 0, false
	}
	mask := uint32(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		e := x.slots[i]
		if e == 0 {
			return 0, false
		}
		if uint32(e>>32) == h {
			if idx := int32(uint32(e)) - 1; isID(idx) {
				return idx, true
			}
		}
	}
}

// add records that the event at idx has an id whose hash is h.
func (x *idIndex) add(h uint32, idx int32) {
	if (x.n+1)*8 > len(x.slots)*5 {
		x.grow()
	}
	x.put(uint64(h)<<32 | uint64(uint32(idx+1)))
	x.n++
}

// put stores entry e in the first free slot from its hash on.
func (x *idIndex) put(e uint64) {
	mask := uint32(len(x.slots) - 1)
	i := uint32(e>>32) & mask
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = e
}

// grow doubles the table (or makes its first 8 slots).
func (x *idIndex) grow() {
	old := x.slots
	x.slots = make([]uint64, max(8, 2*len(old)))
	for _, e := range old {
		if e != 0 {
			x.put(e)
		}
	}
}
