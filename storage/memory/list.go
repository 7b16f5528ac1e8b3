package memory

import "math/bits"

// list is a sequence that grows in blocks, each twice as large as the one
// before (8, 16, 32, ... elements). Appending never moves what is stored:
// a slice that outgrows its capacity copies all of it, and for the log of a
// store holding millions of events that copy would run under the write lock
// on every growth, stalling every writer, and cost several copies of each
// element over the slice's life. Elements are reached by index in constant
// time.
type list[T any] struct {
	blocks [][]T
	n      int
}

// firstBlockBits is log2 of the size of a list's first block.
const firstBlockBits = 3

// locate returns the block of element i and its offset in the block.
func locate(i int) (block, off int) {
	j := uint(i) + 1<<firstBlockBits
	block = bits.Len(j) - 1 - firstBlockBits
	return block, int(j - 1<<(block+firstBlockBits))
}

// len returns the number of elements.
func (l *list[T]) len() int { return l.n }

// at returns element i, which must be below len.
func (l *list[T]) at(i int) *T {
	b, off := locate(i)
	return &l.blocks[b][off]
}

// last returns the last element; the list must not be empty.
func (l *list[T]) last() *T { return l.at(l.n - 1) }

// push appends v.
func (l *list[T]) push(v T) {
	b, off := locate(l.n)
	if b == len(l.blocks) {
		l.blocks = append(l.blocks, make([]T, 1<<(b+firstBlockBits)))
	}
	l.blocks[b][off] = v
	l.n++
}

// appendTo appends the elements [from, to) to dst and returns it.
func (l *list[T]) appendTo(dst []T, from, to int) []T {
	for from < to {
		b, off := locate(from)
		blk := l.blocks[b][off:]
		blk = blk[:min(len(blk), to-from)]
		dst = append(dst, blk...)
		from += len(blk)
	}
	return dst
}

// search returns the smallest index i in [0, len) at which f is true, or
// len when there is none; f must be false then true over the list, as for
// sort.Search.
func (l *list[T]) search(from int, f func(*T) bool) int {
	lo, hi := from, l.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if !f(l.at(m)) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// deleteFunc removes the elements for which del returns true, keeping the
// order of the others. Blocks no longer needed are released.
func (l *list[T]) deleteFunc(del func(*T) bool) {
	w := 0
	for r := range l.n {
		v := l.at(r)
		if del(v) {
			continue
		}
		if w != r {
			*l.at(w) = *v
		}
		w++
	}
	l.truncate(w)
}

// truncate shortens the list to n elements.
func (l *list[T]) truncate(n int) {
	var zero T
	for i := n; i < l.n; i++ {
		*l.at(i) = zero
	}
	l.n = n
	if n == 0 {
		l.blocks = nil
		return
	}
	b, _ := locate(n - 1)
	clear(l.blocks[b+1:])
	l.blocks = l.blocks[:b+1]
}
