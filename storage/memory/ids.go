package memory

import (
	"fmt"
	"hash/maphash"

	"github.com/eventkit-go/eventstore/storage"
)

// eventID is an event id of a request with its hash, computed before the
// write lock is taken.
type eventID struct {
	text string
	hash uint32
}

// idLen is the length of an event id: the Store passes on ids in the
// canonical lower-case text of a UUID, which the arena keeps in 36 bytes.
const idLen = 36

// eventIDs appends the event ids of req to buf, hashed with seed. The
// Store has checked and lower-cased them already: they are not parsed
// again, only their length is checked, on which the arena relies.
func eventIDs(buf []eventID, seed maphash.Seed, req *storage.AppendRequest) ([]eventID, error) {
	for i := range req.Events {
		e := &req.Events[i]
		if len(e.ID) != idLen {
			return nil, fmt.Errorf("event id %q: not a UUID: %w", e.ID, storage.ErrInvalid)
		}
		if len(e.EncryptedData) > storage.MaxEncryptedData {
			return nil, fmt.Errorf("event %s: %d bytes of encrypted data, more than %d: %w", e.ID, len(e.EncryptedData), storage.MaxEncryptedData, storage.ErrInvalid)
		}
		buf = append(buf, eventID{e.ID, uint32(maphash.String(seed, e.ID) >> 32)})
	}
	return buf, nil
}

// encodeMetadata returns the metadata of req's events as
// storage.AppendMetadata encodes it, one slice per event (nil for none),
// or nil when no event has any, which is the common case and allocates
// nothing.
func encodeMetadata(req *storage.AppendRequest) ([][]byte, error) {
	var metas [][]byte
	var buf []byte
	for i := range req.Events {
		e := &req.Events[i]
		if e.Metadata.IsZero() {
			continue
		}
		if metas == nil {
			metas = make([][]byte, len(req.Events))
			buf = make([]byte, 0, 256*(len(req.Events)-i))
		}
		start := len(buf)
		buf = storage.AppendMetadata(buf, e.Metadata)
		if n := len(buf) - start; n > storage.MaxMetadataBytes {
			return nil, fmt.Errorf("event %s: %d bytes of metadata, more than %d: %w", e.ID, n, storage.MaxMetadataBytes, storage.ErrInvalid)
		}
		metas[i] = buf[start:len(buf):len(buf)]
	}
	return metas, nil
}

// metaAt returns the encoded metadata of event i of metas (see
// encodeMetadata).
func metaAt(metas [][]byte, i int) []byte {
	if metas == nil {
		return nil
	}
	return metas[i]
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

// has reports whether an event whose id has the hash h may be stored: the
// ids themselves are not compared, so it may be a false positive (with odds
// of one in 2^32 for each stored id probed), never a false negative.
func (x *idIndex) has(h uint32) bool {
	if len(x.slots) == 0 {
		return false
	}
	mask := uint32(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		e := x.slots[i]
		if e == 0 {
			return false
		}
		if uint32(e>>32) == h {
			return true
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
