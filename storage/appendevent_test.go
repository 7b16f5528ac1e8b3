package storage_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/eventkit-go/eventstore/storage"
)

// TestAppendEvent checks the room AppendEvent makes: 256 events first,
// then the whole limit at once, at most 16,384; 256 when the limit is not
// known; no more than the limit for a small read.
func TestAppendEvent(t *testing.T) {
	fill := func(limit, n int) (caps []int) {
		var events []storage.Event
		for i := range n {
			events = storage.AppendEvent(events, storage.Event{Version: int64(i + 1)}, limit)
			if len(caps) == 0 || caps[len(caps)-1] != cap(events) {
				caps = append(caps, cap(events))
			}
		}
		assert.Len(t, events, n)
		assert.Equal(t, int64(n), events[n-1].Version)
		return caps
	}
	// (Allocation rounds a capacity up to a size class: bounds, not
	// exact values.)
	caps := fill(1000, 1000)
	if assert.Len(t, caps, 2, "256 first, then the whole limit: %v", caps) {
		assert.True(t, caps[0] >= 256 && caps[0] < 512, "first room %d", caps[0])
		assert.True(t, caps[1] >= 1000 && caps[1] < 1200, "then %d", caps[1])
	}
	caps = fill(10, 10)
	assert.True(t, len(caps) == 1 && caps[0] < 64, "a small read's room: %v", caps)
	caps = fill(0, 200)
	assert.True(t, len(caps) == 1 && caps[0] >= 256, "an unknown limit's room: %v", caps)
	caps = fill(100_000, 16_385)
	if assert.Len(t, caps, 3, "256, 16,384, then append's doubling: %v", caps) {
		assert.True(t, caps[1] >= 16_384 && caps[1] < 20_000, "at most 16,384 at once: %d", caps[1])
	}
}
