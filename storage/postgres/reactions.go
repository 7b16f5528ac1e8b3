package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/internal/safetext"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
)

var _ storage.ReactionStorage = (*store)(nil)

// micros returns t in Unix microseconds, 0 for the zero time.
func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// fromMicros is the inverse of micros.
func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// text returns s as PostgreSQL text stores it: valid UTF-8 without NUL.
func text(s string) string { return strings.ReplaceAll(safetext.Clean(s), "\x00", "") }

// q qualifies a statement of this file with the schema.
func (s *store) q(sql string) string { return qualify(s.schema, sql) }

// CreateReactionDefinition implements storage.ReactionStorage.
func (s *store) CreateReactionDefinition(ctx context.Context, def storage.ReactionDefinitionRecord) error {
	if err := s.check(ctx, "create reaction definition"); err != nil {
		return err
	}
	_, err := s.exec(ctx, s.q(`INSERT INTO {{schema}}.reaction_definitions (name, spec, created_at, checkpoint) VALUES ($1, $2, $3, $4)`),
		def.Name, nonNil(def.Spec), micros(def.CreatedAt), def.Checkpoint)
	err = s.fail(ctx, "create reaction definition", err)
	if errors.Is(err, storage.ErrConflict) {
		return fmt.Errorf("reaction definition %q exists: %w", def.Name, storage.ErrConflict)
	}
	return err
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// exec runs one statement that must change a row; none is ErrNotFound
// for what.
func (s *store) execOne(ctx context.Context, op, what, sql string, args ...any) error {
	if err := s.check(ctx, op); err != nil {
		return err
	}
	tag, err := s.exec(ctx, s.q(sql), args...)
	if err != nil {
		return s.fail(ctx, op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", what, storage.ErrNotFound)
	}
	return nil
}

// UpdateReactionDefinition implements storage.ReactionStorage.
func (s *store) UpdateReactionDefinition(ctx context.Context, name string, spec []byte, checkpoint int64) error {
	return s.execOne(ctx, "update reaction definition", fmt.Sprintf("reaction definition %q", name),
		`UPDATE {{schema}}.reaction_definitions SET spec = $1,
		checkpoint = CASE WHEN $2::bigint >= 0 THEN $2::bigint ELSE checkpoint END WHERE name = $3`, nonNil(spec), checkpoint, name)
}

// ReactionDefinition implements storage.ReactionStorage.
func (s *store) ReactionDefinition(ctx context.Context, name string) (storage.ReactionDefinitionRecord, error) {
	defs, err := s.reactionDefs(ctx, name)
	if err != nil {
		return storage.ReactionDefinitionRecord{}, err
	}
	if len(defs) == 0 {
		return storage.ReactionDefinitionRecord{}, fmt.Errorf("reaction definition %q: %w", name, storage.ErrNotFound)
	}
	return defs[0], nil
}

// ReactionDefinitions implements storage.ReactionStorage.
func (s *store) ReactionDefinitions(ctx context.Context) ([]storage.ReactionDefinitionRecord, error) {
	return s.reactionDefs(ctx, "")
}

func (s *store) reactionDefs(ctx context.Context, name string) ([]storage.ReactionDefinitionRecord, error) {
	if err := s.check(ctx, "reaction definitions"); err != nil {
		return nil, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	rows, err := s.query(ctx, s.q(`SELECT name, spec, created_at, checkpoint FROM {{schema}}.reaction_definitions
		WHERE $1 = '' OR name = $1 ORDER BY name COLLATE "C"`), name)
	if err != nil {
		return nil, s.fail(ctx, "reaction definitions", err)
	}
	defer rows.Close()
	defs := []storage.ReactionDefinitionRecord{}
	for rows.Next() {
		var d storage.ReactionDefinitionRecord
		var created int64
		var spec []byte
		if err := rows.Scan(&d.Name, &spec, &created, &d.Checkpoint); err != nil {
			return nil, s.fail(ctx, "reaction definitions", err)
		}
		d.Spec, d.CreatedAt = spec, fromMicros(created)
		defs = append(defs, d)
	}
	return defs, s.fail(ctx, "reaction definitions", rows.Err())
}

// inTx runs fn in a read-committed transaction.
func (s *store) inTx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	if err := s.check(ctx, op); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.writeTimeout, errOwnDeadline)
	defer cancel()
	return s.fail(ctx, op, s.beginFunc(ctx, pgx.TxOptions{}, fn))
}

// DeleteReactionDefinition implements storage.ReactionStorage.
func (s *store) DeleteReactionDefinition(ctx context.Context, name string, at time.Time) error {
	return s.inTx(ctx, "delete reaction definition", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.q(`DELETE FROM {{schema}}.reaction_definitions WHERE name = $1`), name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("reaction definition %q: %w", name, storage.ErrNotFound)
		}
		_, err = tx.Exec(ctx, s.q(cancelPendingSQL+`definition = $2 AND state = 0`+cancelPendingEnd), micros(at), name)
		return err
	})
}

// ScheduleReactions implements storage.ReactionStorage.
func (s *store) ScheduleReactions(ctx context.Context, sc storage.ReactionSchedule) error {
	return s.inTx(ctx, "schedule reactions", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.q(`UPDATE {{schema}}.reaction_definitions SET checkpoint = $1
			WHERE name = $2 AND checkpoint = $3 AND spec = $4`), sc.To, sc.Definition, sc.From, nonNil(sc.Spec))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var one int
			if err := tx.QueryRow(ctx, s.q(`SELECT 1 FROM {{schema}}.reaction_definitions WHERE name = $1`), sc.Definition).Scan(&one); errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("reaction definition %q: %w", sc.Definition, storage.ErrNotFound)
			}
			return fmt.Errorf("reaction definition %q moved on: %w", sc.Definition, storage.ErrConflict)
		}
		if len(sc.Cancel) > 0 {
			if _, err := tx.Exec(ctx, s.q(cancelPendingSQL+`definition = $2 AND aggregate_id = ANY ($3) AND state = 0`+cancelPendingEnd),
				micros(sc.At), sc.Definition, sc.Cancel); err != nil {
				return err
			}
		}
		if len(sc.Insert) == 0 {
			return nil
		}
		var b pgx.Batch
		insert := s.q(`INSERT INTO {{schema}}.reactions (` + reactionCols + `, payload)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`)
		var ids, defs, aggs []string
		var states []int16
		var dues []int64
		for _, r := range sc.Insert {
			b.Queue(insert, r.ID, r.Definition, r.AggregateType, r.AggregateID, r.EventID, r.EventType, int16(r.State),
				micros(r.CreatedAt), micros(r.TriggerAt), micros(r.DueAt), micros(r.FinishedAt), int32(r.Attempts), r.Claim,
				text(r.LastError), nonNil(r.Payload))
			if queued(r.State) {
				ids, defs, aggs = append(ids, r.ID), append(defs, r.Definition), append(aggs, r.AggregateID)
				states, dues = append(states, int16(r.State)), append(dues, micros(r.DueAt))
			}
		}
		if len(ids) > 0 {
			b.Queue(s.q(`INSERT INTO {{schema}}.reaction_queue (id, definition, aggregate_id, state, due_at)
				SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int2[], $5::bigint[])`), ids, defs, aggs, states, dues)
		}
		return tx.SendBatch(ctx, &b).Close()
	})
}

// queued reports whether a reaction in state st has a row in the queue.
func queued(st storage.ReactionState) bool {
	return st == storage.ReactionPending || st == storage.ReactionOngoing
}

// cancelPendingSQL and cancelPendingEnd, around a condition on the queue
// ($2 on), make a statement that cancels the pending reactions it
// selects, at $1: it locks their rows of the queue in the order of their
// ids (as outcome records do, so that two statements locking several
// rows never wait for each other in a cycle), takes them out of the
// queue, then marks them cancelled, found by primary key.
const (
	cancelPendingSQL = `WITH q AS (DELETE FROM {{schema}}.reaction_queue WHERE id = ANY (ARRAY(
		SELECT id FROM {{schema}}.reaction_queue WHERE `
	cancelPendingEnd = ` ORDER BY id FOR UPDATE)) RETURNING id)
	UPDATE {{schema}}.reactions SET state = 3, finished_at = $1 WHERE id = ANY (ARRAY(SELECT id FROM q))`
)

const reactionCols = `id, definition, aggregate_type, aggregate_id, event_id, event_type, state, created_at, trigger_at, due_at, finished_at, attempts, claim, last_error`

// scanReaction reads reactionCols (and payload when withPayload).
func scanReaction(row pgx.Row, withPayload bool) (storage.Reaction, error) {
	var r storage.Reaction
	var state int16
	var attempts int32
	var created, trigger, due, finished int64
	var payload []byte
	dest := []any{&r.ID, &r.Definition, &r.AggregateType, &r.AggregateID, &r.EventID, &r.EventType, &state,
		&created, &trigger, &due, &finished, &attempts, &r.Claim, &r.LastError}
	if withPayload {
		dest = append(dest, &payload)
	}
	if err := row.Scan(dest...); err != nil {
		return r, err
	}
	r.State, r.Attempts, r.Payload = storage.ReactionState(state), int(attempts), payload
	r.CreatedAt, r.TriggerAt, r.DueAt, r.FinishedAt = fromMicros(created), fromMicros(trigger), fromMicros(due), fromMicros(finished)
	return r, nil
}

// Reaction implements storage.ReactionStorage.
func (s *store) Reaction(ctx context.Context, id string) (storage.Reaction, error) {
	if err := s.check(ctx, "reaction"); err != nil {
		return storage.Reaction{}, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	r, err := scanReaction(s.queryRow(ctx, s.q(`SELECT `+reactionCols+`, payload FROM {{schema}}.reactions WHERE id = $1`), id), true)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("reaction %s: %w", id, storage.ErrNotFound)
	}
	return r, s.fail(ctx, "reaction", err)
}

// ListReactions implements storage.ReactionStorage.
func (s *store) ListReactions(ctx context.Context, q storage.ReactionQuery) (storage.ReactionList, error) {
	if err := s.check(ctx, "list reactions"); err != nil {
		return storage.ReactionList{}, err
	}
	var where []string
	var args []any
	add := func(cond string, a any) {
		args = append(args, a)
		where = append(where, strings.ReplaceAll(cond, "$", "$"+strconv.Itoa(len(args))))
	}
	if len(q.States) > 0 {
		states := make([]int16, len(q.States))
		for i, st := range q.States {
			states[i] = int16(st)
		}
		add("state = ANY($)", states)
		if !slices.ContainsFunc(q.States, func(st storage.ReactionState) bool { return !queued(st) }) {
			// Active reactions only: found through the queue (a few,
			// usually, among many finished ones), by primary key.
			add("id = ANY (ARRAY(SELECT id FROM {{schema}}.reaction_queue WHERE state = ANY ($)))", states)
		}
	}
	if !q.DueBefore.IsZero() {
		add("due_at <= $", micros(q.DueBefore))
	}
	if !q.DueAfter.IsZero() {
		add("due_at > $", micros(q.DueAfter))
	}
	if q.Definition != "" {
		add("definition = $", q.Definition)
	}
	if q.AggregateID != "" {
		add("aggregate_id = $", q.AggregateID)
	}
	if q.EventID != "" {
		add("event_id = $", q.EventID)
	}
	if !q.From.IsZero() {
		add("trigger_at >= $", micros(q.From))
	}
	if !q.To.IsZero() {
		add("trigger_at <= $", micros(q.To))
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	list := storage.ReactionList{Reactions: []storage.Reaction{}}
	err := s.beginFunc(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, s.q(`SELECT count(*) FROM {{schema}}.reactions`+cond), args...).Scan(&list.Total); err != nil {
			return err
		}
		if q.Limit <= 0 {
			return nil
		}
		n := len(args)
		rows, err := tx.Query(ctx, s.q(`SELECT `+reactionCols+` FROM {{schema}}.reactions`+cond+
			` ORDER BY trigger_at, id COLLATE "C" LIMIT $`+strconv.Itoa(n+1)+` OFFSET $`+strconv.Itoa(n+2)), append(args, q.Limit, q.Skip)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanReaction(rows, false)
			if err != nil {
				return err
			}
			list.Reactions = append(list.Reactions, r)
		}
		return rows.Err()
	})
	return list, s.fail(ctx, "list reactions", err)
}

// CancelReaction implements storage.ReactionStorage.
func (s *store) CancelReaction(ctx context.Context, id string, at time.Time) error {
	return s.inTx(ctx, "cancel reaction", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.q(cancelPendingSQL+`id = $2 AND state = 0`+cancelPendingEnd), micros(at), id)
		if err != nil || tag.RowsAffected() == 1 {
			return err
		}
		return s.missingOr(ctx, tx, id, fmt.Errorf("reaction %s is not pending: %w", id, storage.ErrConflict))
	})
}

// ExecuteReaction implements storage.ReactionStorage.
func (s *store) ExecuteReaction(ctx context.Context, id string, now time.Time) error {
	return s.inTx(ctx, "execute reaction", func(tx pgx.Tx) error {
		// The queue's row first (when the reaction is queued), then the
		// reaction's, then the queue's again: updated, or inserted for
		// a finished reaction.
		if _, err := tx.Exec(ctx, s.q(lockQueuedSQL), []string{id}); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, s.q(`UPDATE {{schema}}.reactions SET state = 0, due_at = $1, attempts = 0, finished_at = 0,
			claim = '', last_error = '' WHERE id = $2 AND NOT (state = 1 AND due_at > $1)`), micros(now), id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			tag, err := tx.Exec(ctx, s.q(`UPDATE {{schema}}.reaction_queue SET state = 0, due_at = $1 WHERE id = $2`), micros(now), id)
			if err != nil || tag.RowsAffected() == 1 {
				return err
			}
			_, err = tx.Exec(ctx, s.q(`INSERT INTO {{schema}}.reaction_queue (id, definition, aggregate_id, state, due_at)
				SELECT id, definition, aggregate_id, 0, $1 FROM {{schema}}.reactions WHERE id = $2`), micros(now), id)
			return err
		}
		return s.missingOr(ctx, tx, id, fmt.Errorf("reaction %s is being attempted: %w", id, storage.ErrConflict))
	})
}

// DeleteAggregateReactions implements storage.ReactionStorage in one
// transaction that never waits while it holds a reaction's row, so that
// it cannot deadlock with the statements that lock a reaction's row of
// the queue first and then its row of reactions (claims, outcome records,
// executes, cancels). It locks the rows of the queue of the aggregate's
// reactions in the order of their ids, waiting for them as the others
// do; then, without waiting (NOWAIT), the reactions and the rows of the
// queue that appeared meanwhile (an Execute that queued a finished
// reaction again); then deletes both. When a row it does not wait for is
// locked, it starts again (lockAttempts times at most): the holder, a
// claim of a reaction queued again, would otherwise wait for it while it
// waits for the holder (the deadlock TestConformance/ReactionsRace
// found once in about a hundred runs).
func (s *store) DeleteAggregateReactions(ctx context.Context, aggregateType, aggregateID string) error {
	return s.inTxRetrying(ctx, "delete aggregate reactions", func(tx pgx.Tx) error {
		const which = `aggregate_type = $1 AND ($2 = '' OR aggregate_id = $2)`
		if _, err := tx.Exec(ctx, s.q(`SELECT count(*) FROM (SELECT 1 FROM {{schema}}.reaction_queue
			WHERE id = ANY (ARRAY(SELECT id FROM {{schema}}.reactions WHERE `+which+`)) ORDER BY id FOR UPDATE) l`),
			aggregateType, aggregateID); err != nil {
			return err
		}
		var ids []string
		if err := tx.QueryRow(ctx, s.q(`SELECT coalesce(array_agg(id), '{}') FROM (
			SELECT id FROM {{schema}}.reactions WHERE `+which+` ORDER BY id FOR UPDATE NOWAIT) r`),
			aggregateType, aggregateID).Scan(&ids); err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		if _, err := tx.Exec(ctx, s.q(`SELECT count(*) FROM (SELECT 1 FROM {{schema}}.reaction_queue
			WHERE id = ANY ($1::text[]) ORDER BY id FOR UPDATE NOWAIT) l`), ids); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.q(`WITH q AS (DELETE FROM {{schema}}.reaction_queue WHERE id = ANY ($1::text[]))
			DELETE FROM {{schema}}.reactions WHERE id = ANY ($1::text[])`), ids)
		return err
	})
}

// NextReactionDue implements storage.ReactionStorage.
func (s *store) NextReactionDue(ctx context.Context) (time.Time, bool, error) {
	if err := s.check(ctx, "next reaction due"); err != nil {
		return time.Time{}, false, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	var due *int64
	if err := s.queryRow(ctx, s.q(`SELECT min(due_at) FROM {{schema}}.reaction_queue`)).Scan(&due); err != nil {
		return time.Time{}, false, s.fail(ctx, "next reaction due", err)
	}
	if due == nil {
		return time.Time{}, false, nil
	}
	return fromMicros(*due), true, nil
}
