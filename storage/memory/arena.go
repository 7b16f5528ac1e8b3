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

// add copies s, then b, then c, then d into the arena, contiguously.
func (a *arena) add(s string, b []byte, c string, d []byte) span {
	n := len(s) + len(b) + len(c) + len(d)
	last := len(a.chunks) - 1
	if last < 0 || len(a.chunks[last])+n > cap(a.chunks[last]) {
		a.chunks = append(a.chunks, make([]byte, 0, max(chunkSize, n)))
		last++
	}
	ch := a.chunks[last]
	sp := span{chunk: uint32(last), off: uint32(len(ch)), n: uint32(n)}
	a.chunks[last] = append(append(append(append(ch, s...), b...), c...), d...)
	return sp
}

// get returns the bytes of sp, aliasing the arena: callers copy them.
func (a *arena) get(sp span) []byte {
	return a.chunks[sp.chunk][sp.off : sp.off+sp.n]
}
