package eventstore

import (
	"context"
	"fmt"

	"github.com/eventkit-go/eventstore/storage"
)

// RewindMetrics is implemented by a Metrics that also counts rewinds:
// the times the Store found its storage behind what it had handed out or
// read (a failover that lost the last commits, a restored backup).
type RewindMetrics interface {
	Rewound()
}

// Rewinds returns how many times the Store found its storage behind what
// it had seen (see storage.Rewinder): each time it logged the figures,
// dropped what it held in memory of the feed, and its projectors rebuilt
// the projections that had applied events the storage no longer has. A
// storage that cannot tell (memory, SQLite) never counts one.
func (s *Store) Rewinds() int64 {
	return s.rewinds.Load()
}

// watchRewinds makes the Store hear of the rewinds its storage finds, and
// finds its WriteProber.
func (s *Store) watchRewinds(raw storage.Storage) {
	if r, ok := raw.(storage.Rewinder); ok {
		s.rewinder = r
		r.OnRewind(s.rewound)
	}
	s.prober, _ = raw.(storage.WriteProber)
}

// rewound is called when the storage was found behind what this Store had
// seen: lastPos (read-your-writes) goes back to 0 (projections catch up to
// the feed's head) unless a save after the rewind moved it past r.Seen, the deletion count moves on (so
// that no projector's memory of a stored checkpoint or instances, and no
// page cache, outlives it), running projectors forget how far they had
// applied, and the next catch-up of each projection checks its stored
// checkpoint against the storage (catchUp). It does no I/O: the storage
// may call it in the middle of an append.
func (s *Store) rewound(r storage.Rewind) {
	s.lastRewind.Store(&r)
	n := s.rewinds.Add(1)
	for {
		// A save numbered after the rewind is past r.Seen: it stays.
		cur := s.lastPos.Load()
		if cur > r.Seen || cur == 0 || s.lastPos.CompareAndSwap(cur, 0) {
			break
		}
	}
	s.deletions.Add(2)
	s.log.Error("eventstore: the storage went back: positions it handed out are gone from it "+
		"(a failover to a replica that had not received the last commits, or a restored backup); "+
		"new saves are numbered after what was handed out, projections that applied lost events are rebuilt",
		"seen", r.Seen, "found", r.Found, "resumed", r.Resumed, "rewinds", n)
	if m, ok := s.metrics().(RewindMetrics); ok {
		m.Rewound()
	}
	for _, p := range s.runningProjectors() {
		p.forgetRewound()
		p.wake()
	}
	s.mu.Lock()
	if s.watched.Load() {
		close(s.changed)
		s.changed = make(chan struct{})
		s.watched.Store(false)
	}
	s.mu.Unlock()
}

// forgetRewound drops p's record of how far each of its projections was
// applied, without taking their locks (rewound may run within a
// catch-up); a catch-up in progress records no progress, since the
// deletion count moved.
func (p *Projector) forgetRewound() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.projs {
		if c := pr.checkpoint.Swap(0); c > 0 {
			pr.beforeRewind.Store(c)
		}
	}
}

// checkRewound runs in a catch-up of pr (pr.mu held) after a rewind the
// Store has not yet checked pr against: when the projection's stored
// checkpoint is in the positions the rewind lost (past where the store
// was found, up to what had been seen), it applied events that are gone,
// and it is reset to be rebuilt from the feed. It returns whether it reset
// it.
func (p *Projector) checkRewound(ctx context.Context, pr *proj, stored int64) (bool, error) {
	n := p.store.rewinds.Load()
	r := p.store.lastRewind.Load()
	if pr.rewinds == n || r == nil {
		return false, nil
	}
	pr.rewinds = n
	before := max(pr.beforeRewind.Swap(0), pr.checkpoint.Load())
	if stored <= r.Found || stored > r.Seen {
		if stored <= r.Found && before > r.Found && before <= r.Seen {
			// Reset by another process: this one had seen it applied
			// past where the storage was found.
			p.noteRebuild(pr.name, before, r)
		}
		return false, nil
	}
	if err := p.storage.ResetProjection(ctx, pr.name); err != nil && !isNotFound(err) {
		pr.rewinds = 0 // try again
		return false, fmt.Errorf("projection %q: reset after the storage went back: %w", pr.name, err)
	}
	pr.checkpoint.Store(0)
	pr.storedOK, pr.recent = false, nil
	p.noteRebuild(pr.name, stored, r)
	p.log.Error("eventstore: projection rebuilt: it had applied events the storage no longer has",
		"projection", pr.name, "checkpoint", stored, "storage at", r.Found)
	return true, nil
}

// rewindRebuild is a projection being rebuilt because it had applied
// events that a rewind lost (Status.RebuildReason).
type rewindRebuild struct {
	checkpoint int64  // how far it had been applied
	found      int64  // where the storage was found: rebuilt once past it
	noted      uint64 // p.rebuildsNoted when it was noted
}

// noteRebuild records that projection name, applied up to checkpoint, is
// rebuilt after rewind r, for Status until it caught up.
func (p *Projector) noteRebuild(name string, checkpoint int64, r *storage.Rewind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rebuilds == nil {
		p.rebuilds = make(map[string]rewindRebuild)
	}
	p.rebuildsNoted++
	p.rebuilds[name] = rewindRebuild{checkpoint: checkpoint, found: r.Found, noted: p.rebuildsNoted}
}

// rebuildMark returns a mark to take before reading a projection's stored
// progress for rebuildReason: a rebuild noted after it is newer than what
// was read.
func (p *Projector) rebuildMark() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rebuildsNoted
}

// rebuildReason returns Status.RebuildReason of projection name at
// checkpoint, behind positions behind the feed's head, both read after
// mark (rebuildMark): why it is rebuilt, or "" once it has caught up (it
// then forgets the rebuild). A rebuild noted after mark is shown whatever
// was read: the reading may predate the reset (the old checkpoint).
func (p *Projector) rebuildReason(name string, checkpoint, behind int64, mark uint64) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	rb, ok := p.rebuilds[name]
	if !ok {
		return ""
	}
	if rb.noted <= mark && (behind == 0 || checkpoint > rb.found) {
		delete(p.rebuilds, name)
		return ""
	}
	return fmt.Sprintf("the storage went back to position %d (a failover that lost the last commits, or a restored backup) "+
		"after the projection had applied events up to position %d: it is rebuilt from the start of the feed", rb.found, rb.checkpoint)
}

// rewindCheck is called by a catch-up of pr that has waited for target
// (this process's saves) and sees the feed still below it: when the
// storage holds nothing at target any more, the storage went back; the
// Store learns of it (rewound) and the catch-up's target becomes what the
// storage holds. It returns the target to wait for.
func (p *Projector) rewindCheck(ctx context.Context, target int64) (int64, error) {
	if p.store.rewinder == nil {
		return target, nil
	}
	last, err := p.store.rewinder.LastPosition(ctx)
	if err != nil {
		return target, err
	}
	if last >= target {
		return target, nil
	}
	if r := p.store.lastRewind.Load(); r == nil || target > r.Seen || target <= r.Found {
		// Not reported yet (the storage had already been moved on by
		// another process, or found it while target was waited for).
		p.store.rewound(storage.Rewind{Seen: target, Found: last, Resumed: last})
	}
	return last, nil
}

// ProbeWrite reports, for a readiness check, whether the storage durably
// commits writes now: nil, or an error wrapping ErrUnavailable (such as a
// read-only standby). Memory and SQLite answer nil.
func (s *Store) ProbeWrite(ctx context.Context) error {
	if s.closed.Load() {
		return fmt.Errorf("probe write: %w", ErrClosed)
	}
	if s.prober == nil {
		return nil
	}
	if err := s.prober.ProbeWrite(ctx); err != nil {
		return fmt.Errorf("probe write: %w", err)
	}
	return nil
}
