package memory

import (
	"slices"
	"testing"
)

// TestList checks the list against a slice through growth across many
// blocks, ranged copies, searches, deletion and truncation.
func TestList(t *testing.T) {
	var l list[int]
	var want []int
	for i := range 5000 {
		l.push(i * 2)
		want = append(want, i*2)
	}
	check := func(what string) {
		t.Helper()
		if l.len() != len(want) {
			t.Fatalf("%s: len %d, want %d", what, l.len(), len(want))
		}
		for i, w := range want {
			if got := *l.at(i); got != w {
				t.Fatalf("%s: at(%d) = %d, want %d", what, i, got, w)
			}
		}
		if got := l.appendTo(nil, 0, l.len()); !slices.Equal(got, want) {
			t.Fatalf("%s: appendTo the whole list differs", what)
		}
	}
	check("after push")
	if *l.last() != 9998 {
		t.Fatalf("last = %d, want 9998", *l.last())
	}
	for _, r := range [][2]int{{0, 0}, {0, 8}, {7, 9}, {5, 100}, {23, 24}, {1000, 4999}} {
		got := l.appendTo([]int{-1}, r[0], r[1])
		if !slices.Equal(got[1:], want[r[0]:r[1]]) || got[0] != -1 {
			t.Fatalf("appendTo(%d, %d) = %v…, want %v…", r[0], r[1], got[:min(len(got), 4)], want[r[0]:min(r[1], r[0]+3)])
		}
	}
	for _, v := range []int{-5, 0, 1, 2, 777, 9998, 9999, 20000} {
		got := l.search(0, func(x *int) bool { return *x >= v })
		w, _ := slices.BinarySearch(want, v)
		if got != w {
			t.Fatalf("search(>= %d) = %d, want %d", v, got, w)
		}
	}
	if got := l.search(100, func(x *int) bool { return *x >= 0 }); got != 100 {
		t.Fatalf("search from 100 = %d, want 100", got)
	}

	del := func(x int) bool { return x%3 == 0 || (x > 4000 && x < 6000) }
	l.deleteFunc(func(x *int) bool { return del(*x) })
	want = slices.DeleteFunc(want, del)
	check("after deleteFunc")

	l.truncate(10)
	want = want[:10]
	check("after truncate")
	l.push(-7)
	want = append(want, -7)
	check("after push past truncate")
	l.truncate(0)
	want = nil
	check("after truncate to 0")
	l.push(3)
	want = append(want, 3)
	check("after push on empty")
}

// TestLocate checks that blocks double in size and follow each other.
func TestLocate(t *testing.T) {
	block, off := 0, 0
	for i := range 1 << 16 {
		b, o := locate(i)
		if b != block || o != off {
			t.Fatalf("locate(%d) = %d, %d, want %d, %d", i, b, o, block, off)
		}
		off++
		if off == 1<<(block+firstBlockBits) {
			block, off = block+1, 0
		}
	}
}
