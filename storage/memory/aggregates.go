package memory

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// ListAggregates implements storage.Storage. The in-memory backend keeps
// no index by id: it collects the type's live aggregates and sorts them,
// which costs time in the number of aggregates of every type (and
// nothing per event).
func (s *store) ListAggregates(ctx context.Context, q storage.AggregateQuery) (storage.AggregateList, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.check(ctx); err != nil {
		return storage.AggregateList{}, err
	}
	list := storage.AggregateList{Aggregates: []storage.AggregateSummary{}}
	var aggs []*aggregate
	for i := range s.aggList.len() {
		a := *s.aggList.at(i)
		if a != nil && a.typ == q.AggregateType && a.events.len() > 0 {
			aggs = append(aggs, a)
		}
	}
	list.Total = int64(len(aggs))
	skip := max(q.Skip, 0)
	if q.Limit <= 0 || skip >= len(aggs) {
		return list, nil
	}
	slices.SortFunc(aggs, func(a, b *aggregate) int { return strings.Compare(a.id, b.id) })
	for _, a := range aggs[skip:min(skip+q.Limit, len(aggs))] {
		first, last := a.events.at(0), a.events.last()
		list.Aggregates = append(list.Aggregates, storage.AggregateSummary{
			ID: a.id, Version: last.version,
			CreatedAt: time.UnixMicro(first.recorded).UTC(), UpdatedAt: time.UnixMicro(last.recorded).UTC(),
		})
	}
	return list, nil
}
