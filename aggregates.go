package eventstore

import (
	"context"
	"fmt"

	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
)

// AggregateSummary is an aggregate's ID and current Version, and
// CreatedAt and UpdatedAt, the RecordedAt of its first and last events.
type AggregateSummary = storage.AggregateSummary

// AggregateListOptions page Store.Aggregates; nil lists the first 100.
type AggregateListOptions struct {
	Skip, Limit int // Skip at most 1<<30; Limit 0 means 100, at most 1000
}

// AggregatePage is one page of Store.Aggregates.
type AggregatePage struct {
	Aggregates []AggregateSummary // in id order
	Total      int64              // every aggregate of the type
	HasMore    bool               // aggregates follow this page
}

// Aggregates lists the aggregates of aggregateType, by id, without
// events; page on with Skip while HasMore. A type without aggregates is
// ErrNotFound.
func (s *Store) Aggregates(ctx context.Context, aggregateType string, opts *AggregateListOptions) (AggregatePage, error) {
	var o AggregateListOptions
	if opts != nil {
		o = *opts
	}
	v := validation{op: "list aggregates"}
	checkName(&v, "aggregateType", aggregateType)
	switch {
	case o.Limit < 0 || o.Limit > limits.MaxListLimit:
		v.add("limit", "must be between 1 and %d, got %d", limits.MaxListLimit, o.Limit)
	case o.Limit == 0:
		o.Limit = limits.DefaultListLimit
	}
	if o.Skip < 0 || o.Skip > maxListSkip {
		v.add("skip", "must be between 0 and %d, got %d", maxListSkip, o.Skip)
	}
	if err := v.err(); err != nil {
		return AggregatePage{}, err
	}
	if s.closed.Load() {
		return AggregatePage{}, fmt.Errorf("list aggregates %s: %w", aggregateType, ErrClosed)
	}
	list, err := s.storage.ListAggregates(ctx, storage.AggregateQuery{AggregateType: aggregateType, Skip: o.Skip, Limit: o.Limit})
	if err != nil {
		return AggregatePage{}, fmt.Errorf("list aggregates %s: %w", aggregateType, err)
	}
	if list.Total == 0 {
		return AggregatePage{}, fmt.Errorf("list aggregates %s: %w", aggregateType, ErrNotFound)
	}
	return AggregatePage{
		Aggregates: list.Aggregates,
		Total:      list.Total,
		HasMore:    int64(o.Skip+len(list.Aggregates)) < list.Total,
	}, nil
}
