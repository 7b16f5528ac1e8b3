package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/internal/safetext"
	"github.com/eventkit-go/eventstore/storage"
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

// CreateReactionDefinition implements storage.ReactionStorage.
func (s *store) CreateReactionDefinition(ctx context.Context, def storage.ReactionDefinitionRecord) error {
	if err := s.check(ctx, "create reaction definition"); err != nil {
		return err
	}
	_, err := s.writeDB.ExecContext(ctx, `INSERT INTO reaction_definitions (name, spec, created_at, checkpoint) VALUES (?, ?, ?, ?)`,
		def.Name, blob(def.Spec), micros(def.CreatedAt), def.Checkpoint)
	if isConstraint(err) {
		return fmt.Errorf("sqlite: reaction definition %q exists: %w", def.Name, storage.ErrConflict)
	}
	return s.fail(ctx, "create reaction definition", err)
}

// UpdateReactionDefinition implements storage.ReactionStorage.
func (s *store) UpdateReactionDefinition(ctx context.Context, name string, spec []byte, checkpoint int64) error {
	if err := s.check(ctx, "update reaction definition"); err != nil {
		return err
	}
	r, err := s.writeDB.ExecContext(ctx, `UPDATE reaction_definitions SET spec = ?,
		checkpoint = CASE WHEN ? >= 0 THEN ? ELSE checkpoint END WHERE name = ?`, blob(spec), checkpoint, checkpoint, name)
	return s.one(ctx, "update reaction definition", r, err, fmt.Sprintf("reaction definition %q", name))
}

// one checks that a statement changed a row: none is ErrNotFound for what.
func (s *store) one(ctx context.Context, op string, r sql.Result, err error, what string) error {
	if err != nil {
		return s.fail(ctx, op, err)
	}
	if n, err := r.RowsAffected(); err != nil {
		return s.fail(ctx, op, err)
	} else if n == 0 {
		return fmt.Errorf("%s: %w", what, storage.ErrNotFound)
	}
	return nil
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
	rows, err := s.readDB.QueryContext(ctx, `SELECT name, spec, created_at, checkpoint FROM reaction_definitions
		WHERE ? = '' OR name = ? ORDER BY name`, name, name)
	if err != nil {
		return nil, s.fail(ctx, "reaction definitions", err)
	}
	defer rows.Close()
	defs := []storage.ReactionDefinitionRecord{}
	for rows.Next() {
		var d storage.ReactionDefinitionRecord
		var created int64
		if err := rows.Scan(&d.Name, &d.Spec, &created, &d.Checkpoint); err != nil {
			return nil, s.fail(ctx, "reaction definitions", err)
		}
		d.CreatedAt = fromMicros(created)
		defs = append(defs, d)
	}
	return defs, s.fail(ctx, "reaction definitions", rows.Err())
}

// DeleteReactionDefinition implements storage.ReactionStorage.
func (s *store) DeleteReactionDefinition(ctx context.Context, name string, at time.Time) error {
	if err := s.check(ctx, "delete reaction definition"); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx *txn) error {
		n, err := tx.affected(ctx, `DELETE FROM reaction_definitions WHERE name = ?`, name)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("reaction definition %q: %w", name, storage.ErrNotFound)
		}
		tx.exec(ctx, `UPDATE reactions SET state = 3, finished_at = ? WHERE definition = ? AND state = 0`, micros(at), name)
		return tx.err
	})
	return s.fail(ctx, "delete reaction definition", err)
}

// ScheduleReactions implements storage.ReactionStorage.
func (s *store) ScheduleReactions(ctx context.Context, sc storage.ReactionSchedule) error {
	if err := s.check(ctx, "schedule reactions"); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx *txn) error {
		n, err := tx.affected(ctx, `UPDATE reaction_definitions SET checkpoint = ? WHERE name = ? AND checkpoint = ? AND spec = ?`,
			sc.To, sc.Definition, sc.From, blob(sc.Spec))
		if err != nil {
			return err
		}
		if n == 0 {
			var one int
			if err := tx.QueryRowContext(ctx, `SELECT 1 FROM reaction_definitions WHERE name = ?`, sc.Definition).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("reaction definition %q: %w", sc.Definition, storage.ErrNotFound)
			}
			return fmt.Errorf("reaction definition %q moved on: %w", sc.Definition, storage.ErrConflict)
		}
		for _, agg := range sc.Cancel {
			tx.exec(ctx, `UPDATE reactions SET state = 3, finished_at = ? WHERE definition = ? AND aggregate_id = ? AND state = 0`,
				micros(sc.At), sc.Definition, agg)
		}
		for _, r := range sc.Insert {
			tx.exec(ctx, `INSERT INTO reactions (id, definition, aggregate_type, aggregate_id, event_id, event_type, state,
				created_at, trigger_at, due_at, finished_at, attempts, claim, last_error, payload)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				r.ID, r.Definition, r.AggregateType, r.AggregateID, r.EventID, r.EventType, int(r.State),
				micros(r.CreatedAt), micros(r.TriggerAt), micros(r.DueAt), micros(r.FinishedAt), r.Attempts, r.Claim,
				safetext.Clean(r.LastError), blob(r.Payload))
		}
		if isConstraint(tx.err) {
			return fmt.Errorf("a reaction id exists: %w", storage.ErrConflict)
		}
		return tx.err
	})
	return s.fail(ctx, "schedule reactions", err)
}

const reactionCols = `id, definition, aggregate_type, aggregate_id, event_id, event_type, state, created_at, trigger_at,
	due_at, finished_at, attempts, claim, last_error`

// scanReaction reads reactionCols (and payload when withPayload).
func scanReaction(rows interface{ Scan(...any) error }, withPayload bool) (storage.Reaction, error) {
	var r storage.Reaction
	var state, created, trigger, due, finished int64
	dest := []any{&r.ID, &r.Definition, &r.AggregateType, &r.AggregateID, &r.EventID, &r.EventType, &state,
		&created, &trigger, &due, &finished, &r.Attempts, &r.Claim, &r.LastError}
	if withPayload {
		dest = append(dest, &r.Payload)
	}
	if err := rows.Scan(dest...); err != nil {
		return r, err
	}
	r.State = storage.ReactionState(state)
	r.CreatedAt, r.TriggerAt, r.DueAt, r.FinishedAt = fromMicros(created), fromMicros(trigger), fromMicros(due), fromMicros(finished)
	return r, nil
}

// ClaimReactions implements storage.ReactionStorage in one transaction
// of two prepared statements: the ids due, read from the index of the
// active reactions, then one UPDATE of them all. It holds the write
// connection, which saves wait for, as briefly as it can.
func (s *store) ClaimReactions(ctx context.Context, c storage.ReactionClaim) ([]storage.Reaction, error) {
	if err := s.check(ctx, "claim reactions"); err != nil {
		return nil, err
	}
	due, claim, _, err := s.reacts.get(ctx, s.writeDB)
	if err != nil {
		return nil, s.fail(ctx, "claim reactions", err)
	}
	var out []storage.Reaction
	err = s.inTx(ctx, func(tx *txn) error {
		out = out[:0]
		rows, err := tx.StmtContext(ctx, due).QueryContext(ctx, micros(c.Now), c.Limit)
		if err != nil {
			return err
		}
		var ids []string
		order := make(map[string]int)
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			order[id] = len(ids)
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(ids) == 0 {
			return err
		}
		list, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		rows, err = tx.StmtContext(ctx, claim).QueryContext(ctx, micros(c.Until), c.Claim, string(list))
		if err != nil {
			return err
		}
		defer rows.Close()
		out = make([]storage.Reaction, len(ids))
		for rows.Next() {
			r, err := scanReaction(rows, true)
			if err != nil {
				return err
			}
			out[order[r.ID]] = r
		}
		return rows.Err()
	})
	if err != nil {
		return nil, s.fail(ctx, "claim reactions", err)
	}
	return out, nil
}

// finishChunk bounds the outcomes one statement of FinishReactions
// updates.
const finishChunk = 256

// FinishReactions implements storage.ReactionStorage in one transaction,
// one prepared UPDATE statement for up to finishChunk outcomes of
// distinct reactions: the ids it returns are those applied. (An outcome
// for a reaction that another outcome of the batch names too, which takes
// an Execute between two attempts, is applied by a statement of its own.)
func (s *store) FinishReactions(ctx context.Context, outcomes []storage.ReactionOutcome) ([]error, error) {
	if err := s.check(ctx, "finish reactions"); err != nil {
		return nil, err
	}
	_, _, finish, err := s.reacts.get(ctx, s.writeDB)
	if err != nil {
		return nil, s.fail(ctx, "finish reactions", err)
	}
	var errs []error
	err = s.inTx(ctx, func(tx *txn) error {
		errs = make([]error, len(outcomes))
		applied := make([]bool, len(outcomes))
		var alone []int
		for lo := 0; lo < len(outcomes); {
			byID := make(map[string]int, min(finishChunk, len(outcomes)))
			var list []any
			for ; lo < len(outcomes) && len(byID) < finishChunk; lo++ {
				o := outcomes[lo]
				if _, dup := byID[o.ID]; dup {
					alone = append(alone, lo)
					continue
				}
				byID[o.ID] = lo
				due, finished := finishTimes(o)
				list = append(list, [6]any{o.ID, o.Claim, int(o.State), due, finished, safetext.Clean(o.Error)})
			}
			if len(byID) == 0 {
				continue
			}
			arg, err := json.Marshal(list)
			if err != nil {
				return err
			}
			rows, err := tx.StmtContext(ctx, finish).QueryContext(ctx, string(arg))
			if err != nil {
				return err
			}
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				applied[byID[id]] = true
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		for _, i := range alone {
			o := outcomes[i]
			due, finished := finishTimes(o)
			n, err := tx.affected(ctx, `UPDATE reactions SET state = ?, due_at = CASE WHEN ? >= 0 THEN ? ELSE due_at END,
				finished_at = ?, last_error = ?, claim = '' WHERE id = ? AND state = 1 AND claim = ?`,
				int(o.State), due, due, finished, safetext.Clean(o.Error), o.ID, o.Claim)
			if err != nil {
				return err
			}
			applied[i] = n > 0
		}
		for i, o := range outcomes {
			if applied[i] {
				continue
			}
			errs[i] = s.missingOr(ctx, tx.Tx, o.ID, fmt.Errorf("reaction %s is no longer claimed by this attempt: %w", o.ID, storage.ErrConflict))
			if !errors.Is(errs[i], storage.ErrConflict) && !errors.Is(errs[i], storage.ErrNotFound) {
				return errs[i]
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.fail(ctx, "finish reactions", err)
	}
	return errs, nil
}

// finishTimes returns the due_at (-1 to keep the lease's) and finished_at
// an outcome writes.
func finishTimes(o storage.ReactionOutcome) (due, finished int64) {
	if o.State == storage.ReactionPending {
		return micros(o.DueAt), 0
	}
	return -1, micros(o.At)
}

// missingOr returns ErrNotFound when reaction id does not exist, else err.
func (s *store) missingOr(ctx context.Context, tx *sql.Tx, id string, err error) error {
	var one int
	if e := tx.QueryRowContext(ctx, `SELECT 1 FROM reactions WHERE id = ?`, id).Scan(&one); errors.Is(e, sql.ErrNoRows) {
		return fmt.Errorf("reaction %s: %w", id, storage.ErrNotFound)
	} else if e != nil {
		return e
	}
	return err
}

// Reaction implements storage.ReactionStorage.
func (s *store) Reaction(ctx context.Context, id string) (storage.Reaction, error) {
	if err := s.check(ctx, "reaction"); err != nil {
		return storage.Reaction{}, err
	}
	r, err := scanReaction(s.readDB.QueryRowContext(ctx, `SELECT `+reactionCols+`, payload FROM reactions WHERE id = ?`, id), true)
	if errors.Is(err, sql.ErrNoRows) {
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
	add := func(cond string, a ...any) { where = append(where, cond); args = append(args, a...) }
	if len(q.States) > 0 {
		ph := strings.TrimSuffix(strings.Repeat("?, ", len(q.States)), ", ")
		var a []any
		for _, st := range q.States {
			a = append(a, int(st))
		}
		add("state IN ("+ph+")", a...)
	}
	if !q.DueBefore.IsZero() {
		add("due_at <= ?", micros(q.DueBefore))
	}
	if !q.DueAfter.IsZero() {
		add("due_at > ?", micros(q.DueAfter))
	}
	for col, v := range map[string]string{"definition": q.Definition, "aggregate_id": q.AggregateID, "event_id": q.EventID} {
		if v != "" {
			add(col+" = ?", v)
		}
	}
	if !q.From.IsZero() {
		add("trigger_at >= ?", micros(q.From))
	}
	if !q.To.IsZero() {
		add("trigger_at <= ?", micros(q.To))
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	list := storage.ReactionList{Reactions: []storage.Reaction{}}
	tx, err := s.readDB.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return list, s.fail(ctx, "list reactions", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM reactions`+cond, args...).Scan(&list.Total); err != nil {
		return list, s.fail(ctx, "list reactions", err)
	}
	if q.Limit <= 0 {
		return list, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+reactionCols+` FROM reactions`+cond+` ORDER BY trigger_at, id LIMIT ? OFFSET ?`,
		append(args, q.Limit, q.Skip)...)
	if err != nil {
		return list, s.fail(ctx, "list reactions", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, err := scanReaction(rows, false)
		if err != nil {
			return list, s.fail(ctx, "list reactions", err)
		}
		list.Reactions = append(list.Reactions, r)
	}
	return list, s.fail(ctx, "list reactions", rows.Err())
}

// CancelReaction implements storage.ReactionStorage.
func (s *store) CancelReaction(ctx context.Context, id string, at time.Time) error {
	if err := s.check(ctx, "cancel reaction"); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx *txn) error {
		n, err := tx.affected(ctx, `UPDATE reactions SET state = 3, finished_at = ? WHERE id = ? AND state = 0`, micros(at), id)
		if err != nil || n == 1 {
			return err
		}
		return s.missingOr(ctx, tx.Tx, id, fmt.Errorf("reaction %s is not pending: %w", id, storage.ErrConflict))
	})
	return s.fail(ctx, "cancel reaction", err)
}

// ExecuteReaction implements storage.ReactionStorage.
func (s *store) ExecuteReaction(ctx context.Context, id string, now time.Time) error {
	if err := s.check(ctx, "execute reaction"); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx *txn) error {
		n, err := tx.affected(ctx, `UPDATE reactions SET state = 0, due_at = ?, attempts = 0, finished_at = 0, claim = '',
			last_error = '' WHERE id = ? AND NOT (state = 1 AND due_at > ?)`, micros(now), id, micros(now))
		if err != nil || n == 1 {
			return err
		}
		return s.missingOr(ctx, tx.Tx, id, fmt.Errorf("reaction %s is being attempted: %w", id, storage.ErrConflict))
	})
	return s.fail(ctx, "execute reaction", err)
}

// DeleteAggregateReactions implements storage.ReactionStorage.
func (s *store) DeleteAggregateReactions(ctx context.Context, aggregateType, aggregateID string) error {
	if err := s.check(ctx, "delete aggregate reactions"); err != nil {
		return err
	}
	_, err := s.writeDB.ExecContext(ctx, `DELETE FROM reactions WHERE aggregate_type = ? AND (? = '' OR aggregate_id = ?)`,
		aggregateType, aggregateID, aggregateID)
	return s.fail(ctx, "delete aggregate reactions", err)
}

// NextReactionDue implements storage.ReactionStorage.
func (s *store) NextReactionDue(ctx context.Context) (time.Time, bool, error) {
	if err := s.check(ctx, "next reaction due"); err != nil {
		return time.Time{}, false, err
	}
	// A statement cached on the read connection: an Engine asks after
	// every claim, many times a second while reactions keep falling due.
	var due sql.NullInt64
	err := s.reads.with(ctx, s.readDB, func(rc *rawConn) error {
		return rawQuery(ctx, rc, `SELECT min(due_at) FROM reactions WHERE state IN (0, 1)`, nil, func(r *rawRow) error {
			if v, ok := r.dest[0].(int64); ok {
				due = sql.NullInt64{Int64: v, Valid: true}
			}
			return nil
		})
	})
	if err != nil {
		return time.Time{}, false, s.fail(ctx, "next reaction due", err)
	}
	if !due.Valid {
		return time.Time{}, false, nil
	}
	return fromMicros(due.Int64), true, nil
}
