package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
)

// This file holds what deliveries write: claims of due reactions and the
// records of their outcomes.

// claimReactionsSQL claims at most $2 reactions due at $1 with lease end
// $3 and claim $4, returning first each one's place in due order (1, 2,
// ...). The due ones are taken from the queue (schema version 10), whose
// rows it locks first, as every statement that changes a reaction's row
// of the queue and of reactions does. The ids go through an array, so
// that the UPDATE finds them by primary key whatever the statistics say.
// Joined with the due rows instead, the planner sometimes chose to hash
// them against a scan of the whole table (seen with auto_explain in
// benchmark runs where statistics had been taken while nearly every
// reaction was pending), which read every reaction, dead versions
// included, at each claim: 16.5 and 22 ms a claim on average in such
// runs, 2.5-3 ms in others. Alone, a claim of 40 among 6,000 rows ran in
// 1 ms against 2.1-2.3 ms for the join.
var claimReactionsSQL = `WITH due AS MATERIALIZED (
		SELECT array_agg(id ORDER BY due_at, id) AS ids FROM (
			SELECT id, due_at FROM {{schema}}.reaction_queue WHERE due_at <= $1
			ORDER BY due_at, id LIMIT $2 FOR UPDATE SKIP LOCKED) d),
	queued AS (UPDATE {{schema}}.reaction_queue q SET state = 1, due_at = $3 FROM due WHERE q.id = ANY (due.ids))
	UPDATE {{schema}}.reactions r SET state = 1, due_at = $3, claim = $4, attempts = r.attempts + 1
	FROM due WHERE r.id = ANY (due.ids)
	RETURNING array_position(due.ids, r.id)::bigint, ` + withPrefix("r.", reactionCols) + `, r.payload`

// ClaimReactions implements storage.ReactionStorage with one statement,
// sent with the tenant's setting in one round trip (one implicit
// transaction): the due rows are locked with SKIP LOCKED, so concurrent
// claims (of this or another process) take different reactions without
// waiting.
func (s *store) ClaimReactions(ctx context.Context, c storage.ReactionClaim) ([]storage.Reaction, error) {
	var out []storage.Reaction
	var order []int64
	err := s.inPipeline(ctx, "claim reactions", func(b *pgx.Batch) {
		b.Queue(s.q(claimReactionsSQL), micros(c.Now), c.Limit, micros(c.Until), c.Claim)
	}, func(br pgx.BatchResults) error {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var place int64
			r, err := scanReaction(prefixRow{rows, &place}, true)
			if err != nil {
				return err
			}
			out, order = append(out, r), append(order, place)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(order[a], order[b]), strings.Compare(out[a].ID, out[b].ID))
	})
	sorted := make([]storage.Reaction, len(out))
	for i, j := range idx {
		sorted[i] = out[j]
	}
	return sorted, nil
}

// prefixRow scans a leading column into first, then the rest.
type prefixRow struct {
	row   pgx.Row
	first *int64
}

func (p prefixRow) Scan(dest ...any) error { return p.row.Scan(append([]any{p.first}, dest...)...) }

// withPrefix puts p before every column of cols.
func withPrefix(p, cols string) string { return p + strings.ReplaceAll(cols, ", ", ", "+p) }

// lockQueuedSQL locks the rows of the queue of the reactions $1, in the
// order of their ids, before finishReactionsSQL changes them.
const lockQueuedSQL = `SELECT count(*) FROM (
	SELECT 1 FROM {{schema}}.reaction_queue WHERE id = ANY ($1::text[]) ORDER BY id FOR UPDATE) l`

// finishReactionsSQL applies outcomes of distinct reactions, given as
// arrays of ids, claims, states, due times (-1 keeps the lease's), finish
// times and errors, and returns the ids it applied to. A reaction it
// finishes leaves the queue; one it puts back to pending (a retry) is
// queued again at its new due time. Only the updated reactions' ids reach
// the queue's statements, through arrays, so that each finds its rows by
// primary key.
const finishReactionsSQL = `WITH done AS (
	UPDATE {{schema}}.reactions r SET state = v.state,
		due_at = CASE WHEN v.due >= 0 THEN v.due ELSE r.due_at END,
		finished_at = v.finished, last_error = v.error, claim = ''
	FROM unnest($1::text[], $2::text[], $3::int2[], $4::bigint[], $5::bigint[], $6::text[])
		AS v (id, claim, state, due, finished, error)
	WHERE r.id = v.id AND r.state = 1 AND r.claim = v.claim
	RETURNING r.id, r.state, r.due_at),
gone AS (DELETE FROM {{schema}}.reaction_queue
	WHERE id = ANY (ARRAY(SELECT id FROM done WHERE state <> 0))),
back AS (UPDATE {{schema}}.reaction_queue q SET state = 0, due_at = d.due_at
	FROM done d WHERE q.id = d.id AND d.state = 0)
SELECT id FROM done`

// FinishReactions implements storage.ReactionStorage in one round trip
// and one (implicit) transaction: for outcomes of distinct reactions, two
// statements (lockQueuedSQL, finishReactionsSQL), the outcomes going as
// arrays (unnest) and the ids it returns being those applied. One
// statement instead of one per outcome spares the server an executor
// start-up per delivery. On 5,000 due reactions claimed and finished 50
// at a time, three rounds (a scratch test, twice): a statement per
// outcome took 9 to 15 ms per 50 in the first round and 28 to 35 ms in the
// third (its plan, without statistics, read the growing index of active
// reactions), one statement 3.6 to 5.0 ms in every round.
// TestFinishReactionsPlan checks its plan. (An outcome for a reaction that
// another outcome of the batch names too, which takes an Execute between
// two attempts, is applied by statements of their own, after the others
// and in order.) Whether a reaction not applied to is missing
// (ErrNotFound) or claimed anew (ErrConflict) is read afterwards.
func (s *store) FinishReactions(ctx context.Context, outcomes []storage.ReactionOutcome) ([]error, error) {
	errs := make([]error, len(outcomes))
	applied := make([]bool, len(outcomes))
	byID := make(map[string]int, len(outcomes))
	groups := [][]int{nil}
	for i, o := range outcomes {
		if _, dup := byID[o.ID]; dup {
			groups = append(groups, []int{i})
			continue
		}
		byID[o.ID] = i
		groups[0] = append(groups[0], i)
	}
	if len(outcomes) == 0 {
		return errs, nil
	}
	err := s.inPipeline(ctx, "finish reactions", func(b *pgx.Batch) {
		for _, g := range groups {
			s.queueFinish(b, outcomes, g)
		}
	}, func(br pgx.BatchResults) error {
		for _, g := range groups {
			if err := readFinish(br, outcomes, g, applied); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, o := range outcomes {
		if applied[i] {
			continue
		}
		errs[i] = s.notApplied(ctx, o.ID)
		if !errors.Is(errs[i], storage.ErrConflict) && !errors.Is(errs[i], storage.ErrNotFound) {
			return nil, errs[i]
		}
	}
	return errs, nil
}

// queueFinish queues lockQueuedSQL and finishReactionsSQL for
// outcomes[i] for every i of which (of distinct reactions).
func (s *store) queueFinish(b *pgx.Batch, outcomes []storage.ReactionOutcome, which []int) {
	n := len(which)
	ids, claims, msgs := make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
	states, dues, finisheds := make([]int16, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	for _, i := range which {
		o := outcomes[i]
		due, finished := finishTimes(o)
		ids, claims, states = append(ids, o.ID), append(claims, o.Claim), append(states, int16(o.State))
		dues, finisheds, msgs = append(dues, due), append(finisheds, finished), append(msgs, text(o.Error))
	}
	b.Queue(s.q(lockQueuedSQL), ids)
	b.Queue(s.q(finishReactionsSQL), ids, claims, states, dues, finisheds, msgs)
}

// readFinish reads the results of queueFinish's statements for
// outcomes[i], i in which, and marks those applied.
func readFinish(br pgx.BatchResults, outcomes []storage.ReactionOutcome, which []int, applied []bool) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	at := make(map[string]int, len(which))
	for _, i := range which {
		at[outcomes[i].ID] = i
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		applied[at[id]] = true
	}
	return rows.Err()
}

// notApplied returns why an outcome of reaction id was not applied:
// ErrNotFound when the reaction does not exist, else ErrConflict (another
// attempt claimed it, or it was executed anew).
func (s *store) notApplied(ctx context.Context, id string) error {
	var one int
	err := s.queryRow(ctx, s.q(`SELECT 1 FROM {{schema}}.reactions WHERE id = $1`), id).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("reaction %s: %w", id, storage.ErrNotFound)
	case err != nil:
		return s.fail(ctx, "finish reactions", err)
	}
	return fmt.Errorf("reaction %s is no longer claimed by this attempt: %w", id, storage.ErrConflict)
}

// inPipeline sends the tenant's setting and the statements queue queues
// in one round trip, which the server runs as one implicit transaction
// (the statements of a pipeline before its Sync), and passes their results
// to read (the setting's read already).
func (s *store) inPipeline(ctx context.Context, op string, queue func(*pgx.Batch), read func(pgx.BatchResults) error) error {
	if err := s.check(ctx, op); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.writeTimeout, errOwnDeadline)
	defer cancel()
	b := &pgx.Batch{}
	b.Queue(setTenantSQL, s.tenant)
	queue(b)
	br := s.pool.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = read(br)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return s.fail(ctx, op, err)
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
func (s *store) missingOr(ctx context.Context, tx pgx.Tx, id string, err error) error {
	var one int
	if e := tx.QueryRow(ctx, s.q(`SELECT 1 FROM {{schema}}.reactions WHERE id = $1`), id).Scan(&one); errors.Is(e, pgx.ErrNoRows) {
		return fmt.Errorf("reaction %s: %w", id, storage.ErrNotFound)
	} else if e != nil {
		return e
	}
	return err
}
