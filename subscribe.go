package eventstore

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Subscribe calls handle, in the calling goroutine, with the entries of
// the feed of aggregateType ("" for all types) after the cursor after,
// then with each new one as it is saved, once and in order; opts selects
// as for ReadFeed. Store each entry's Cursor to resume from it. Subscribe
// returns nil once ctx is done, handle's error unchanged (that entry
// counts as not delivered), or ReadFeed's errors; ErrUnavailable is
// retried.
func (s *Store) Subscribe(ctx context.Context, aggregateType string, after int64, opts *FeedOptions, handle func(ctx context.Context, e FeedEntry) error) error {
	q, err := s.feedQuery(aggregateType, after, opts)
	if err != nil {
		return err
	}
	if handle == nil {
		return &ValidationError{Op: "subscribe", Fields: []FieldError{{Field: "handle", Message: "is required"}}}
	}
	backoff := 10 * time.Millisecond
	for {
		changed := s.watch()
		if ctx.Err() != nil {
			return nil
		}
		res, err := s.readFeed(ctx, q)
		switch {
		case err == nil:
			backoff = 10 * time.Millisecond
		case ctx.Err() != nil:
			return nil
		case isNotFound(err):
			// The feed has no events yet: wait for some.
		case errors.Is(err, ErrUnavailable):
			s.log.Warn("eventstore: subscription: reading the feed failed, retrying", "feed", aggregateType, "err", err, "retry", backoff)
			if !s.sleep(ctx, backoff) {
				return s.subscribeEnd(ctx, q)
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		default:
			return fmt.Errorf("subscribe: %w", err)
		}
		for _, e := range res.Entries {
			if err := handle(ctx, e); err != nil {
				if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
					return nil
				}
				return err
			}
			q.after = e.Cursor
		}
		q.after = max(q.after, res.Next)
		if res.HasMore {
			continue
		}
		if !s.waitChange(ctx, changed, nil, 0, time.Time{}) {
			return s.subscribeEnd(ctx, q)
		}
	}
}

// subscribeEnd is Subscribe's result when waiting stopped.
func (s *Store) subscribeEnd(ctx context.Context, q feedQuery) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("subscribe: %s: %w", feedName(q.typ), ErrClosed)
}

// sleep waits for d, and reports false when ctx is done or the Store
// closes first.
func (s *Store) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.closingChan():
		return false
	case <-t.C:
		return !s.closed.Load()
	}
}
