package httpapi

import (
	"net/http"
	"runtime/debug"
	"sync"
	"time"
)

// The save-rate window of GET /status: saveBuckets buckets of
// saveBucketSeconds each, the last one the current (partial) bucket.
const (
	saveBucketSeconds = 10
	saveBuckets       = 60
)

// modulePath is this library's module, whose version GET /status names
// when Options.Version is empty.
const modulePath = "github.com/eventkit-go/eventstore"

// saveRate counts the batches and events a handler stored, per
// saveBucketSeconds, over the last saveBuckets buckets. It is safe for
// concurrent use.
type saveRate struct {
	mu      sync.Mutex
	buckets [saveBuckets]saveBucket
}

// saveBucket is the count of one interval, numbered n (Unix seconds /
// saveBucketSeconds); a slot whose n is not the one asked for counts 0.
type saveBucket struct {
	n               int64
	batches, events int64
}

// add counts batches holding events, saved at now.
func (s *saveRate) add(now time.Time, batches, events int) {
	n := now.Unix() / saveBucketSeconds
	s.mu.Lock()
	b := &s.buckets[n%saveBuckets]
	if b.n != n {
		*b = saveBucket{n: n}
	}
	b.batches += int64(batches)
	b.events += int64(events)
	s.mu.Unlock()
}

// window returns the counts of the saveBuckets buckets up to now, oldest
// first, and the end of the last one.
func (s *saveRate) window(now time.Time) (batches, events []int64, end time.Time) {
	cur := now.Unix() / saveBucketSeconds
	batches, events = make([]int64, saveBuckets), make([]int64, saveBuckets)
	s.mu.Lock()
	for i := range saveBuckets {
		n := cur - saveBuckets + 1 + int64(i)
		if n < 0 {
			continue
		}
		if b := s.buckets[n%saveBuckets]; b.n == n {
			batches[i], events[i] = b.batches, b.events
		}
	}
	s.mu.Unlock()
	return batches, events, time.Unix((cur+1)*saveBucketSeconds, 0)
}

// moduleVersion is the version of this library in the running binary's
// build information, or "(devel)".
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if bi.Main.Path == modulePath && bi.Main.Version != "" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == modulePath {
			if d.Replace != nil && d.Replace.Version != "" {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "(devel)"
}

// statusJSON is the body of GET /status.
type statusJSON struct {
	Version   string        `json:"version"`
	Storage   string        `json:"storage,omitempty"`
	Ready     bool          `json:"ready"`
	Tenants   bool          `json:"tenants"`
	Reactions bool          `json:"reactions"`
	Console   bool          `json:"console"`
	Saves     savesRateJSON `json:"saves"`
}

// savesRateJSON is the save counts of GET /status.
type savesRateJSON struct {
	IntervalSeconds int     `json:"intervalSeconds"`
	Until           int64   `json:"until"`
	Batches         []int64 `json:"batches"`
	Events          []int64 `json:"events"`
}

// status serves GET /status: the server's version, storage, readiness,
// what it serves, and the saves it stored over the last ten minutes.
func (h *handler) status(w http.ResponseWriter, r *http.Request) {
	if q, err := parseQuery(r); err != nil {
		h.fail(w, r, err)
		return
	} else if err := q.only(); err != nil {
		h.fail(w, r, err)
		return
	}
	batches, events, end := h.saves.window(time.Now())
	w.Header().Set("Cache-Control", "no-store")
	h.sendValue(w, r, statusJSON{
		Version:   h.version,
		Storage:   h.storageName,
		Ready:     h.notReady(r.Context()) == "",
		Tenants:   h.tenants != nil,
		Reactions: h.reactions != nil,
		Console:   h.console,
		Saves: savesRateJSON{IntervalSeconds: saveBucketSeconds, Until: end.UnixMilli(),
			Batches: batches, Events: events},
	})
}
