package eventstore

import (
	"context"
	"fmt"

	"github.com/eventkit-go/eventstore/storage"
)

// AggregateSummary describes one aggregate without its events: its ID,
// current Version, and CreatedAt and UpdatedAt, the RecordedAt times of its
// first and last events.
type AggregateSummary = storage.AggregateSummary

// AggregateListOptions page the aggregates Store.Aggregates returns. The
// zero value (or nil) returns the first DefaultListLimit.
type AggregateListOptions struct {
	// Skip leaves out that many aggregates of the id order (at most
	// 1<<30); Limit returns at most that many (0 means DefaultListLimit;
	// at most MaxListLimit).
	Skip, Limit int
}

// AggregatePage is one page of Store.Aggregates.
type AggregatePage struct {
	// Aggregates are the aggregates of the page, in id order.
	Aggregates []AggregateSummary
	// Total counts every aggregate of the type, not only this page's.
	Total int64
	// HasMore reports that aggregates follow this page.
	HasMore bool
}

// Aggregates lists the aggregates of aggregateType that have events, in
// the byte order of their ids, without their events: each with its
// current version and the times of its first and last save. opts pages
// the list; a reader pages on with Skip += len(page.Aggregates) while
// HasMore is true (aggregates created or deleted meanwhile shift the
// pages). Deleted aggregates are not listed.
//
// A type without aggregates (none saved, or all deleted) fails with an
// error wrapping ErrNotFound, as ReadFeed does; a page past the last
// aggregate of a type that has some is empty. Bad options fail with a
// *ValidationError.
func (s *Store) Aggregates(ctx context.Context, aggregateType string, opts *AggregateListOptions) (AggregatePage, error) {
	var o AggregateListOptions
	if opts != nil {
		o = *opts
	}
	v := validation{op: "list aggregates"}
	checkName(&v, "aggregateType", aggregateType)
	switch {
	case o.Limit < 0 || o.Limit > MaxListLimit:
		v.add("limit", "must be between 1 and %d, got %d", MaxListLimit, o.Limit)
	case o.Limit == 0:
		o.Limit = DefaultListLimit
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
