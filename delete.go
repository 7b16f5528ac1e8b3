package eventstore

import (
	"context"
	"errors"
	"fmt"
)

// DeleteAggregate removes every event of the aggregate from loads and
// feeds (ErrNotFound when it has none), and resets the projections of its
// feed, to be rebuilt without them; its id can be used again.
func (s *Store) DeleteAggregate(ctx context.Context, aggregateType, aggregateID string) error {
	v := validation{op: "delete"}
	checkName(&v, "aggregateType", aggregateType)
	checkName(&v, "aggregateId", aggregateID)
	if err := v.err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return fmt.Errorf("delete %s/%s: %w", aggregateType, aggregateID, ErrClosed)
	}
	if err := s.storage.DeleteAggregate(ctx, aggregateType, aggregateID); err != nil {
		return wrapNotFound(fmt.Sprintf("delete aggregate %s/%s", aggregateType, aggregateID), err)
	}
	if err := s.forgetProjections(ctx, aggregateType); err != nil {
		return fmt.Errorf("delete aggregate %s/%s: events deleted, %w", aggregateType, aggregateID, err)
	}
	return nil
}

// DeleteAggregateType removes every aggregate of aggregateType, as
// DeleteAggregate does for one, or fails with an error wrapping
// ErrNotFound when the type has no events.
func (s *Store) DeleteAggregateType(ctx context.Context, aggregateType string) error {
	v := validation{op: "delete"}
	checkName(&v, "aggregateType", aggregateType)
	if err := v.err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return fmt.Errorf("delete %s: %w", aggregateType, ErrClosed)
	}
	if err := s.storage.DeleteAggregateType(ctx, aggregateType); err != nil {
		return wrapNotFound(fmt.Sprintf("delete aggregate type %s", aggregateType), err)
	}
	if err := s.forgetProjections(ctx, aggregateType); err != nil {
		return fmt.Errorf("delete aggregate type %s: events deleted, %w", aggregateType, err)
	}
	return nil
}

// forgetProjections resets, in the storage, every projection that reads
// the feed aggregateType, and makes every running Projector of this Store
// forget what it knew of them.
func (s *Store) forgetProjections(ctx context.Context, aggregateType string) error {
	// Counted before (feed pages read before are stale) and after (a
	// catch-up that overlapped the resets must not record its progress:
	// catchUp).
	s.deleting.Add(1)
	s.deletions.Add(1)
	defer func() {
		s.deletions.Add(1)
		s.deleting.Add(-1)
	}()
	ps := s.runningProjectors()
	first := NewProjector(s, nil)
	if len(ps) > 0 {
		first = ps[0]
	}
	errs := []error{first.forgetFeed(ctx, aggregateType, true)}
	for _, p := range ps {
		if p != first {
			errs = append(errs, p.forgetFeed(ctx, aggregateType, false))
		}
	}
	return errors.Join(errs...)
}
