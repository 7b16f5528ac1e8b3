package memory

// arena keeps event data in large append-only chunks, so that stored events
// refer to it by offsets instead of pointers.
type arena struct {
	chunks [][]byte
}

// chunkSize is the capacity of an arena chunk; larger data gets a chunk of
// its own.
const chunkSize = 1 << 20

// span locates bytes in an arena.
type span struct {
	chunk, off, n uint32
}

// add copies s and then b into the arena, contiguously.
func (a *arena) add(s string, b []byte) span {
	n := len(s) + len(b)
	last := len(a.chunks) - 1
	if last < 0 || len(a.chunks[last])+n > cap(a.chunks[last]) {
		a.chunks = append(a.chunks, make([]byte, 0, max(chunkSize, n)))
		last++
	}
	c := a.chunks[last]
	sp := span{chunk: uint32(last), off: uint32(len(c)), n: uint32(n)}
	a.chunks[last] = append(append(c, s...), b...)
	return sp
}

// get returns the bytes of sp, aliasing the arena: callers copy them.
func (a *arena) get(sp span) []byte {
	return a.chunks[sp.chunk][sp.off : sp.off+sp.n]
}
