package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// readyWatch polls GET /readyz of a server every 100 ms, on connections of
// its own (readyStatus), and records its answers, for the failover tests'
// timings.
type readyWatch struct {
	s    *server
	mu   sync.Mutex
	seen []readyChange // every answer
	stop chan struct{}
	done chan struct{}
}

// readyChange is one answer of a server's /readyz (0: none within 3 s),
// at the time it came.
type readyChange struct {
	at     time.Time
	status int
}

// watchReady starts a readyWatch of s, stopped when the test ends.
func watchReady(t *testing.T, s *server) *readyWatch {
	w := &readyWatch{s: s, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			status := readyStatus(s)
			w.mu.Lock()
			w.seen = append(w.seen, readyChange{at: time.Now(), status: status})
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(w.end)
	return w
}

// end stops the watch; it is idempotent.
func (w *readyWatch) end() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

// changes returns the first answer and each that differs from the one
// before it.
func (w *readyWatch) changes() []readyChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []readyChange
	for i, c := range w.seen {
		if i == 0 || c.status != w.seen[i-1].status {
			out = append(out, c)
		}
	}
	return out
}

// firstAfter returns when the first answer status came at or after from,
// and whether one did.
func (w *readyWatch) firstAfter(from time.Time, status int) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.seen {
		if !c.at.Before(from) && c.status == status {
			return c.at, true
		}
	}
	return time.Time{}, false
}

// report describes the changes relative to the named moments, as
// "200; 503 at crash+0.41s; 200 at promotion+1.93s": each change is given
// after the latest moment before it, or before the first moment.
func (w *readyWatch) report(moments ...moment) string {
	var parts []string
	for i, c := range w.changes() {
		if i == 0 {
			parts = append(parts, fmt.Sprint(c.status))
			continue
		}
		ref := moments[0]
		for _, m := range moments {
			if !m.at.After(c.at) {
				ref = m
			}
		}
		parts = append(parts, fmt.Sprintf("%d at %s%+.2fs", c.status, ref.name, c.at.Sub(ref.at).Seconds()))
	}
	return strings.Join(parts, "; ")
}

// moment is a named time of a failover test (the crash, the promotion).
type moment struct {
	name string
	at   time.Time
}
