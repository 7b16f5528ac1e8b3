package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// The statements of ListAggregates. sequence = 1 is written out, not
// bound, so that the planner can use the partial index events_aggregates.
// aggregatePageSQL takes the type, the limit and the skip.
const (
	aggregateCountSQL = `SELECT count(*) FROM events WHERE aggregate_type = ? AND sequence = 1`
	aggregatePageSQL  = `SELECT f.aggregate_id, f.recorded_at, l.version, l.recorded_at
FROM (
	SELECT aggregate_id, recorded_at FROM events
	WHERE aggregate_type = ?1 AND sequence = 1
	ORDER BY aggregate_id LIMIT ?2 OFFSET ?3
) f
JOIN events l ON l.aggregate_type = ?1 AND l.aggregate_id = f.aggregate_id
	AND l.sequence = (SELECT max(m.sequence) FROM events m WHERE m.aggregate_type = ?1 AND m.aggregate_id = f.aggregate_id)
ORDER BY f.aggregate_id`
)

// ListAggregates implements storage.Storage with two statements on one
// snapshot, both served by events_aggregates, a partial index holding the
// first event (sequence 1) of each aggregate by type and id (byte order)
// with its recorded_at: the total counts the type's entries of it, the
// page skips and reads entries of it, and each aggregate of the page finds
// its last event through the (aggregate_type, aggregate_id, sequence)
// index. Neither reads the events of aggregates outside the page.
func (s *store) ListAggregates(ctx context.Context, q storage.AggregateQuery) (storage.AggregateList, error) {
	if err := s.check(ctx, "list aggregates"); err != nil {
		return storage.AggregateList{}, err
	}
	list := storage.AggregateList{Aggregates: []storage.AggregateSummary{}}
	err := s.readTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, aggregateCountSQL, q.AggregateType).Scan(&list.Total); err != nil {
			return err
		}
		skip := int64(max(q.Skip, 0))
		if q.Limit <= 0 || skip >= list.Total {
			return nil
		}
		rows, err := tx.QueryContext(ctx, aggregatePageSQL, q.AggregateType, q.Limit, skip)
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				a                storage.AggregateSummary
				created, updated int64
			)
			if err := rows.Scan(&a.ID, &created, &a.Version, &updated); err != nil {
				rows.Close()
				return err
			}
			a.CreatedAt, a.UpdatedAt = time.UnixMicro(created).UTC(), time.UnixMicro(updated).UTC()
			list.Aggregates = append(list.Aggregates, a)
		}
		return closeRows(rows)
	})
	if err != nil {
		return storage.AggregateList{}, s.fail(ctx, "list aggregates", err)
	}
	return list, nil
}
