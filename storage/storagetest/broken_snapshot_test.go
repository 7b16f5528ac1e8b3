package storagetest_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// ownSnapshots keeps snapshots in a map of its own beside the memory
// backend, for the broken variants below. It checks the aggregate's
// version with a Load before it writes, holding its lock, which deletions
// take too, from the check to the write; with racy set it checks before
// taking the lock and sleeps in between (check, then act), the window a
// database without a lock has.
type ownSnapshots struct {
	storage.Storage
	mu         sync.Mutex
	snaps      map[[2]string]storage.Snapshot
	lastWins   bool // replace even with an older snapshot
	keepOnDrop bool // deletions leave the snapshots
	racy       bool
}

func newOwnSnapshots(s storage.Storage) *ownSnapshots {
	return &ownSnapshots{Storage: s, snaps: map[[2]string]storage.Snapshot{}}
}

func (s *ownSnapshots) SaveSnapshot(ctx context.Context, snap storage.Snapshot) error {
	if !s.racy {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	agg, err := s.Storage.Load(ctx, storage.LoadQuery{AggregateType: snap.AggregateType, AggregateID: snap.AggregateID, AfterVersion: 1 << 62})
	if err != nil || agg.Version < snap.Version {
		return fmt.Errorf("version %d: %v: %w", agg.Version, err, storage.ErrConflict)
	}
	if s.racy {
		time.Sleep(2 * time.Millisecond)
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	k := [2]string{snap.AggregateType, snap.AggregateID}
	if old, ok := s.snaps[k]; ok && old.Version > snap.Version && !s.lastWins {
		return nil
	}
	snap.Data = append([]byte{}, snap.Data...)
	s.snaps[k] = snap
	return nil
}

func (s *ownSnapshots) LoadSnapshot(ctx context.Context, typ, id string) (storage.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, ok := s.snaps[[2]string{typ, id}]
	if !ok {
		return storage.Snapshot{}, storage.ErrNotFound
	}
	snap.Data = append([]byte{}, snap.Data...)
	return snap, nil
}

func (s *ownSnapshots) DeleteAggregate(ctx context.Context, typ, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.keepOnDrop {
		delete(s.snaps, [2]string{typ, id})
	}
	return s.Storage.DeleteAggregate(ctx, typ, id)
}

func (s *ownSnapshots) DeleteAggregateType(ctx context.Context, typ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.keepOnDrop {
		for k := range s.snaps {
			if k[0] == typ {
				delete(s.snaps, k)
			}
		}
	}
	return s.Storage.DeleteAggregateType(ctx, typ)
}
