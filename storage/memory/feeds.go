package memory

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/eventkit-go/eventstore/storage"
)

// FeedHead implements storage.Storage. A type whose events were all
// deleted keeps the FeedSequence of its latest batch as its head.
func (s *store) FeedHead(ctx context.Context, aggregateType string) (int64, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	if aggregateType == "" {
		return int64(s.log.len()), nil
	}
	f := s.byType[aggregateType]
	if f == nil {
		return 0, fmt.Errorf("feed %q: %w", aggregateType, storage.ErrNotFound)
	}
	return f.seq, nil
}

// Feeds implements storage.Storage.
func (s *store) Feeds(ctx context.Context) ([]storage.FeedInfo, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	out := make([]storage.FeedInfo, 0, len(s.byType))
	for typ, f := range s.byType {
		if n := f.positions.len(); n > 0 {
			out = append(out, storage.FeedInfo{AggregateType: typ, AggregateCount: f.aggCount, BatchCount: f.batches, EventCount: int64(n)})
		}
	}
	slices.SortFunc(out, func(a, b storage.FeedInfo) int { return strings.Compare(a.AggregateType, b.AggregateType) })
	return out, nil
}

// DeleteAggregate implements storage.Storage. It costs time in the
// number of events of the aggregate's type.
func (s *store) DeleteAggregate(ctx context.Context, aggregateType, aggregateID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	agg := s.lookup(aggregateType, aggregateID)
	if agg == nil {
		return fmt.Errorf("aggregate %s/%s: %w", aggregateType, aggregateID, storage.ErrNotFound)
	}
	// Both lists are ascending: drop the aggregate's positions in one pass.
	f, k := agg.feed, 0
	f.positions.deleteFunc(func(p *int64) bool {
		if k < agg.events.len() && agg.events.at(k).position == *p {
			k++
			return true
		}
		return false
	})
	s.drop(agg.index)
	return nil
}

// DeleteAggregateType implements storage.Storage.
func (s *store) DeleteAggregateType(ctx context.Context, aggregateType string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	f := s.byType[aggregateType]
	if f == nil || f.positions.len() == 0 {
		return fmt.Errorf("aggregate type %q: %w", aggregateType, storage.ErrNotFound)
	}
	for i := range f.positions.len() {
		if r := *s.log.at(int(*f.positions.at(i)) - 1); r.agg >= 0 && *s.aggList.at(int(r.agg)) != nil {
			s.drop(r.agg)
		}
	}
	f.positions.truncate(0)
	return nil
}

// drop deletes the aggregate at ai, except for its type's positions: its
// events leave the log, and it leaves the directory, marked dead for the
// writers that found it there before (see append.go). s.mu is held.
func (s *store) drop(ai int32) {
	agg := *s.aggList.at(int(ai))
	for i := range agg.events.len() {
		*s.log.at(int(agg.events.at(i).position) - 1) = ref{agg: -1}
	}
	s.deleted += agg.events.len()
	agg.feed.aggCount--
	agg.feed.batches -= int64(agg.seqs.len())
	agg.dead.Store(true)
	s.dir.remove(aggKey{agg.typ, agg.id})
	*s.aggList.at(int(ai)) = nil
}
