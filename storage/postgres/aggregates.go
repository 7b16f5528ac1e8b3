package postgres

import (
	"context"

	"github.com/eventkit-go/eventstore/storage"
)

// listAggregatesSQL returns the statement that answers ListAggregates, so the page
// and the total come from one snapshot: one row per aggregate of the page,
// each with the total, or a single row with the total and a NULL id when
// the page is empty. $1 is the type, $2 the skip, $3 the limit.
//
// The aggregates come from events_aggregates, a partial index holding the
// first event (sequence 1) of each aggregate in id byte order (COLLATE
// "C"), with its recorded_at: the total counts the type's entries of it,
// and a page skips and reads entries of it. Each aggregate of the page
// then finds its last event through events_aggregate_key (the key, then
// the sequence).
func listAggregatesSQL() string {
	return `
SELECT t.total, p.aggregate_id, coalesce(p.version, 0), coalesce(p.created_at, 'epoch'), coalesce(p.updated_at, 'epoch')
FROM (SELECT count(*) AS total FROM {{schema}}.events WHERE aggregate_type = $1 AND sequence = 1) t
LEFT JOIN LATERAL (
	SELECT f.aggregate_id, l.version, f.recorded_at AS created_at, l.recorded_at AS updated_at
	FROM (
		SELECT aggregate_id, recorded_at FROM {{schema}}.events
		WHERE aggregate_type = $1 AND sequence = 1
		ORDER BY aggregate_id COLLATE "C" OFFSET $2 LIMIT $3
	) f
	CROSS JOIN LATERAL (` + lastOfAggregate("version, recorded_at", "$1::text", "f.aggregate_id", "") + `) l
) p ON true
ORDER BY p.aggregate_id COLLATE "C"`
}

// ListAggregates implements storage.Storage with listAggregatesSQL: a
// page costs about Skip + Limit entries of an index with one entry per
// aggregate, and the total one pass over the type's entries of it;
// neither reads events.
func (s *store) ListAggregates(ctx context.Context, q storage.AggregateQuery) (storage.AggregateList, error) {
	if err := s.check(ctx, "list aggregates"); err != nil {
		return storage.AggregateList{}, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	rows, err := s.query(ctx, qualify(s.schema, listAggregatesSQL()), q.AggregateType, int64(max(q.Skip, 0)), int64(max(q.Limit, 0)))
	if err != nil {
		return storage.AggregateList{}, s.fail(ctx, "list aggregates", err)
	}
	defer rows.Close()
	list := storage.AggregateList{Aggregates: []storage.AggregateSummary{}}
	for rows.Next() {
		var (
			id *string
			a  storage.AggregateSummary
		)
		if err := rows.Scan(&list.Total, &id, &a.Version, &a.CreatedAt, &a.UpdatedAt); err != nil {
			return storage.AggregateList{}, s.fail(ctx, "list aggregates", err)
		}
		if id == nil {
			continue // the row only carries the total
		}
		a.ID = *id
		a.CreatedAt, a.UpdatedAt = a.CreatedAt.UTC(), a.UpdatedAt.UTC()
		list.Aggregates = append(list.Aggregates, a)
	}
	if err := rows.Err(); err != nil {
		return storage.AggregateList{}, s.fail(ctx, "list aggregates", err)
	}
	return list, nil
}
