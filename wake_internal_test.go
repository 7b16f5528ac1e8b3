package eventstore

import (
	"testing"
	"time"
)

// TestNextWatchBackoff checks the restart schedule of a failing append
// watcher: doubling while it fails at once, capped, and back to the
// minimum as soon as it had run for watcherSettle, however long it had
// been failing before.
func TestNextWatchBackoff(t *testing.T) {
	b := nextWatchBackoff(0, 0)
	if b != watchBackoffMin {
		t.Fatalf("first restart after %v, want %v", b, watchBackoffMin)
	}
	for range 20 {
		next := nextWatchBackoff(b, time.Millisecond)
		if next < b || next > watchBackoffMax {
			t.Fatalf("after %v: %v, want between it and %v", b, next, watchBackoffMax)
		}
		b = next
	}
	if b != watchBackoffMax {
		t.Fatalf("a watcher failing at once backs off to %v, want the cap %v", b, watchBackoffMax)
	}
	if got := nextWatchBackoff(b, watcherSettle); got != watchBackoffMin {
		t.Fatalf("after a healthy run of %v: %v, want %v", watcherSettle, got, watchBackoffMin)
	}
}
