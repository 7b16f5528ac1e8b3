package eventstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// Wake-ups. Everything that waits for new events (Subscribe, ReadFeed with
// a Wait, Projector.Run) waits the same way: it takes s.watch() before
// reading, reads, and, when there is nothing new, waits on that channel.
// The channel is closed
//
//   - at once by every save through this Store (observe);
//   - by the Store's append watcher when the Storage implements
//     AppendWatcher, for saves by other processes;
//   - at Close.
//
// A fallback timer covers saves by other processes that no watcher
// reports: the poll interval when the Storage has no AppendWatcher or its
// watcher is down or only just (re)started, and safetyPoll while the
// watcher runs.

const (
	// defaultPollInterval is the fallback poll interval of Options.
	defaultPollInterval = time.Second
	// safetyPoll is how often waiters look anyway while the append watcher
	// runs: it only matters if a notification got lost.
	safetyPoll = 30 * time.Second
	// watcherSettle is how long a (re)started watcher must have run before
	// waiters trust it: appends made while it was starting may be missed.
	watcherSettle = 2 * time.Second
	// Backoff between attempts of a failing watcher. While it is down,
	// waiters poll at the configured interval; a watcher that had run for
	// watcherSettle before it failed is retried after watchBackoffMin.
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 5 * time.Second
)

// nextWatchBackoff returns how long to wait before restarting a watcher
// that ran for ran and failed, after a previous wait of prev (0 for
// none): watchBackoffMin after a healthy run, else twice prev up to
// watchBackoffMax.
func nextWatchBackoff(prev, ran time.Duration) time.Duration {
	if prev <= 0 || ran >= watcherSettle {
		return watchBackoffMin
	}
	return min(2*prev, watchBackoffMax)
}

func (o *Options) pollInterval() time.Duration {
	if o == nil || o.PollInterval <= 0 {
		return defaultPollInterval
	}
	return o.PollInterval
}

// background is the Store's state for wake-ups across processes and for
// the Projectors that Store.Delete* must reach. Its zero value is ready.
type background struct {
	poll time.Duration // fallback poll interval; 0 means the default

	started atomic.Bool  // the watcher goroutine was started
	since   atomic.Int64 // unix nanoseconds since WatchAppends runs, 0 when it does not

	mu      sync.Mutex
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the watcher goroutine has returned
	closing chan struct{} // closed by Close; nil until first asked for

	projectors map[*Projector]int // running Projectors (Run), with a count
}

// closingChan returns a channel closed by Close.
func (s *Store) closingChan() <-chan struct{} {
	b := &s.bg
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing == nil {
		b.closing = make(chan struct{})
		if b.stopped {
			close(b.closing)
		}
	}
	return b.closing
}

// startWatcher starts the append watcher goroutine once, if the Storage
// implements AppendWatcher and the Store is open.
func (s *Store) startWatcher() {
	if s.bg.started.Load() {
		return
	}
	w, ok := s.storage.(storage.AppendWatcher)
	if !ok {
		return
	}
	b := &s.bg
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped || b.started.Load() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.done = make(chan struct{})
	b.started.Store(true)
	go s.watchLoop(ctx, w, b.done)
}

// watchLoop runs WatchAppends until ctx is done, restarting it with
// exponential backoff after errors.
func (s *Store) watchLoop(ctx context.Context, w storage.AppendWatcher, done chan<- struct{}) {
	defer close(done)
	var backoff time.Duration
	for {
		start := time.Now()
		s.bg.since.Store(start.UnixNano())
		// Appends made while nobody watched may have gone unreported.
		s.wakeAll()
		err := w.WatchAppends(ctx, s.wakeAll)
		s.bg.since.Store(0)
		if ctx.Err() != nil {
			return
		}
		backoff = nextWatchBackoff(backoff, time.Since(start))
		s.log.Warn("eventstore: watching appends failed; polling until it is back", "err", err, "retry", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// stopBackground stops the watcher and wakes every waiter; Close calls it.
// It returns when the watcher goroutine has returned.
func (s *Store) stopBackground() {
	b := &s.bg
	b.mu.Lock()
	b.stopped = true
	if b.closing != nil {
		select {
		case <-b.closing:
		default:
			close(b.closing)
		}
	}
	cancel, done := b.cancel, b.done
	b.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	s.wakeAll()
}

// wakeAll wakes every waiter; the append watcher calls it. It does not
// block for long.
func (s *Store) wakeAll() {
	if !s.watched.Load() {
		return
	}
	s.mu.Lock()
	if s.watched.Load() {
		close(s.changed)
		s.changed = make(chan struct{})
		s.watched.Store(false)
	}
	s.mu.Unlock()
}

// fallback returns how long a waiter may sleep without news before it
// looks again, given the caller's poll interval.
func (s *Store) fallback(poll time.Duration) time.Duration {
	if since := s.bg.since.Load(); since != 0 && time.Since(time.Unix(0, since)) >= watcherSettle {
		return max(poll, safetyPoll)
	}
	return poll
}

// waitChange waits until changed is closed (a save, a watcher
// notification or Close), kick receives, the fallback poll interval
// elapses, deadline passes (when not zero) or ctx is done. poll 0 means
// the Store's poll interval. It reports false when ctx is done or the
// Store closed.
func (s *Store) waitChange(ctx context.Context, changed <-chan struct{}, kick <-chan struct{}, poll time.Duration, deadline time.Time) bool {
	s.startWatcher()
	if poll <= 0 {
		poll = s.bg.poll
	}
	d := s.fallback(poll)
	if !deadline.IsZero() {
		d = min(d, time.Until(deadline))
	}
	if d <= 0 {
		return ctx.Err() == nil && !s.closed.Load()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.closingChan():
		return false
	case <-changed:
	case <-kick:
	case <-t.C:
	}
	return ctx.Err() == nil && !s.closed.Load()
}

// addProjector records that p runs (Projector.Run), so that deletions
// reach it; the returned function undoes it.
func (s *Store) addProjector(p *Projector) func() {
	b := &s.bg
	b.mu.Lock()
	if b.projectors == nil {
		b.projectors = make(map[*Projector]int)
	}
	b.projectors[p]++
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		if b.projectors[p]--; b.projectors[p] <= 0 {
			delete(b.projectors, p)
		}
		b.mu.Unlock()
	}
}

// runningProjectors returns the Projectors of this Store that are running.
func (s *Store) runningProjectors() []*Projector {
	b := &s.bg
	b.mu.Lock()
	defer b.mu.Unlock()
	ps := make([]*Projector, 0, len(b.projectors))
	for p := range b.projectors {
		ps = append(ps, p)
	}
	return ps
}
