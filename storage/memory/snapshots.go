package memory

import (
	"context"
	"fmt"

	"github.com/eventkit-go/eventstore/storage"
)

// SaveSnapshot implements storage.Storage. The snapshot is kept with the
// aggregate, so deleting the aggregate deletes it.
func (s *store) SaveSnapshot(ctx context.Context, snap storage.Snapshot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	agg := s.lookup(snap.AggregateType, snap.AggregateID)
	if agg == nil {
		return fmt.Errorf("snapshot of %s/%s at version %d: the aggregate has no events: %w",
			snap.AggregateType, snap.AggregateID, snap.Version, storage.ErrConflict)
	}
	if current := int64(agg.seqs.len()); current < snap.Version {
		return fmt.Errorf("snapshot of %s/%s at version %d: the aggregate is at version %d: %w",
			snap.AggregateType, snap.AggregateID, snap.Version, current, storage.ErrConflict)
	}
	if agg.snap != nil && agg.snap.Version > snap.Version {
		return nil // older than the stored one
	}
	snap.Data = append(make([]byte, 0, len(snap.Data)), snap.Data...)
	agg.snap = &snap
	return nil
}

// LoadSnapshot implements storage.Storage.
func (s *store) LoadSnapshot(ctx context.Context, aggregateType, aggregateID string) (storage.Snapshot, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return storage.Snapshot{}, err
	}
	agg := s.lookup(aggregateType, aggregateID)
	if agg == nil || agg.snap == nil {
		return storage.Snapshot{}, fmt.Errorf("snapshot of %s/%s: %w", aggregateType, aggregateID, storage.ErrNotFound)
	}
	snap := *agg.snap
	snap.Data = append(make([]byte, 0, len(snap.Data)), snap.Data...)
	return snap, nil
}
