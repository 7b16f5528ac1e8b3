package httpapi

import (
	"testing"
	"time"
)

// TestSaveRateWindow: counts land in the bucket of their time, the window
// ends with the current bucket, and buckets older than the window are
// dropped, also when their ring slot is reused.
func TestSaveRateWindow(t *testing.T) {
	var s saveRate
	t0 := time.Unix(1_000_000_000, 0) // a bucket start
	s.add(t0, 1, 2)
	s.add(t0.Add(9*time.Second), 1, 1)
	s.add(t0.Add(10*time.Second), 2, 5)
	b, e, end := s.window(t0.Add(15 * time.Second))
	if !end.Equal(t0.Add(20 * time.Second)) {
		t.Errorf("end %v, want %v", end, t0.Add(20*time.Second))
	}
	if b[58] != 2 || e[58] != 3 || b[59] != 2 || e[59] != 5 || sum64(b) != 4 {
		t.Errorf("batches %v events %v", b, e)
	}
	// Ten minutes on, the first two buckets are out of the window, and
	// a save reusing the first one's slot does not add to its old count.
	later := t0.Add(saveBuckets * saveBucketSeconds * time.Second)
	s.add(later, 1, 1)
	b, e, _ = s.window(later)
	if b[59] != 1 || e[59] != 1 || sum64(b) != 3 {
		t.Errorf("after ten minutes: batches %v events %v", b, e)
	}
	b, _, _ = s.window(later.Add(time.Hour))
	if sum64(b) != 0 {
		t.Errorf("an hour on: %v", b)
	}
}

func sum64(xs []int64) (n int64) {
	for _, x := range xs {
		n += x
	}
	return n
}
