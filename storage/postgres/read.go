package postgres

import (
	"context"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/jackc/pgx/v5"
)

// Load implements eventstore.Storage.
func (s *Storage) Load(ctx context.Context, q eventstore.LoadQuery) (eventstore.Aggregate, error) {
	aggregateType, aggregateID := q.AggregateType, q.AggregateID // TODO(contract): honour q.AfterVersion and q.Limit
	if err := s.check(ctx, "load"); err != nil {
		return eventstore.Aggregate{}, err
	}
	rows, err := s.pool.Query(ctx, s.sql.load, aggregateType, aggregateID)
	if err != nil {
		return eventstore.Aggregate{}, s.fail(ctx, "load", err)
	}
	events, err := scanEvents(rows)
	if err != nil {
		return eventstore.Aggregate{}, s.fail(ctx, "load", err)
	}
	if len(events) == 0 {
		return eventstore.Aggregate{}, fmt.Errorf("aggregate %s/%s: %w", aggregateType, aggregateID, eventstore.ErrNotFound)
	}
	return eventstore.Aggregate{
		Type:    aggregateType,
		ID:      aggregateID,
		Version: events[len(events)-1].Version,
		Events:  events,
	}, nil
}

// scanEvents reads rows of the event columns and closes rows.
func scanEvents(rows pgx.Rows) ([]eventstore.Event, error) {
	defer rows.Close()
	var events []eventstore.Event
	for rows.Next() {
		var e eventstore.Event
		var data []byte
		if err := rows.Scan(&e.Position, &e.AggregateType, &e.AggregateID, &e.ID, &e.Type,
			&data, &e.Version, &e.Sequence, &e.RecordedAt); err != nil {
			return nil, err
		}
		e.Data = data
		e.RecordedAt = e.RecordedAt.UTC()
		events = append(events, e)
	}
	return events, rows.Err()
}

// ReadFeed implements eventstore.Storage. Writers commit in position order
// (see runBatch), so every position up to the highest visible one is
// visible: a plain read in position order never skips an event.
func (s *Storage) ReadFeed(ctx context.Context, q eventstore.FeedQuery) (eventstore.FeedPage, error) {
	if err := s.check(ctx, "read feed"); err != nil {
		return eventstore.FeedPage{}, err
	}
	limit := max(q.Limit, 1)
	after := max(q.After, 0)
	if q.AggregateType == "" {
		rows, err := s.pool.Query(ctx, s.sql.feed, after, limit)
		if err != nil {
			return eventstore.FeedPage{}, s.fail(ctx, "read feed", err)
		}
		events, err := scanEvents(rows)
		if err != nil {
			return eventstore.FeedPage{}, s.fail(ctx, "read feed", err)
		}
		page := eventstore.FeedPage{Events: events, Head: after}
		if len(events) > 0 {
			page.Head = events[len(events)-1].Position
		}
		return page, nil
	}

	// The feed of one type: read the highest visible position in the same
	// statement, so that a quiet feed's Head keeps up with the store.
	rows, err := s.pool.Query(ctx, s.sql.feedType, after, limit, q.AggregateType)
	if err != nil {
		return eventstore.FeedPage{}, s.fail(ctx, "read feed", err)
	}
	defer rows.Close()
	var head int64
	var events []eventstore.Event
	for rows.Next() {
		var e eventstore.Event
		var data []byte
		if err := rows.Scan(&head, &e.Position, &e.AggregateType, &e.AggregateID, &e.ID, &e.Type,
			&data, &e.Version, &e.Sequence, &e.RecordedAt); err != nil {
			return eventstore.FeedPage{}, s.fail(ctx, "read feed", err)
		}
		if e.Position == 0 {
			continue // no event: the row only carries head
		}
		e.Data = data
		e.RecordedAt = e.RecordedAt.UTC()
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return eventstore.FeedPage{}, s.fail(ctx, "read feed", err)
	}
	page := eventstore.FeedPage{Events: events, Head: max(after, head)}
	if len(events) == limit {
		page.Head = events[len(events)-1].Position
	}
	return page, nil
}
