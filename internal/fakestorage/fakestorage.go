// Package fakestorage gives tests the in-memory backend with what it lacks
// to stand in for a database shared by several processes: Watching reports
// every append through storage.AppendWatcher, as PostgreSQL's
// LISTEN/NOTIFY does, and Shared lets several Stores use one storage.
package fakestorage

import (
	"context"
	"errors"
	"sync"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// New returns an empty in-memory Storage.
func New() storage.Storage { return memory.New() }

// Watching is an in-memory Storage that reports every append through
// AppendWatcher. Several Stores may share it through Shared, as processes
// share a database.
type Watching struct {
	storage.Storage
	mu       sync.Mutex
	watchers map[int]func()
	next     int
	// Failures is how many calls of WatchAppends fail at once before one
	// watches; set it before use.
	Failures int
	calls    int
}

var _ storage.AppendWatcher = (*Watching)(nil)

// NewWatching returns an empty Watching storage.
func NewWatching() *Watching {
	return &Watching{Storage: memory.New(), watchers: map[int]func(){}}
}

// Append implements storage.Storage and notifies the watchers.
func (w *Watching) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	res, err := w.Storage.Append(ctx, req)
	if err == nil && !res.Duplicate {
		w.fire()
	}
	return res, err
}

// AppendAll implements storage.Storage and notifies the watchers.
func (w *Watching) AppendAll(ctx context.Context, reqs []storage.AppendRequest) ([]storage.AppendResult, error) {
	res, err := w.Storage.AppendAll(ctx, reqs)
	if err == nil {
		w.fire()
	}
	return res, err
}

func (w *Watching) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.watchers {
		n()
	}
}

// WatchAppends implements storage.AppendWatcher.
func (w *Watching) WatchAppends(ctx context.Context, notify func()) error {
	w.mu.Lock()
	w.calls++
	if w.calls <= w.Failures {
		w.mu.Unlock()
		return errors.New("watch: connection refused")
	}
	id := w.next
	w.next++
	w.watchers[id] = notify
	w.mu.Unlock()
	<-ctx.Done()
	w.mu.Lock()
	delete(w.watchers, id)
	w.mu.Unlock()
	return nil
}

// Watchers returns how many WatchAppends calls are watching.
func (w *Watching) Watchers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watchers)
}

// Shared is one "process" on a Watching storage: its Close leaves the
// shared storage open.
type Shared struct{ *Watching }

// Close implements storage.Storage without closing the shared storage.
func (Shared) Close() error { return nil }
