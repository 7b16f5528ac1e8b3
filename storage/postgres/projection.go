package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore/internal/safetext"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// CreateDefinition implements storage.Storage.
func (s *store) CreateDefinition(ctx context.Context, def storage.DefinitionRecord) error {
	if err := s.check(ctx, "create definition"); err != nil {
		return err
	}
	spec := []byte(def.Spec)
	if spec == nil {
		spec = []byte{}
	}
	if _, err := s.exec(ctx, s.sql.createDef, def.Name, spec, def.CreatedAt); err != nil {
		err = s.fail(ctx, "create definition", err)
		if errors.Is(err, storage.ErrConflict) {
			return fmt.Errorf("projection %q exists: %w", def.Name, storage.ErrConflict)
		}
		return err
	}
	return nil
}

// Definition implements storage.Storage. The definition and its errors
// come from one statement, so from one snapshot and one round trip.
func (s *store) Definition(ctx context.Context, name string) (storage.DefinitionRecord, error) {
	if err := s.check(ctx, "definition"); err != nil {
		return storage.DefinitionRecord{}, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	defs, err := s.readDefinitions(ctx, s.sql.def, name)
	if err != nil {
		return storage.DefinitionRecord{}, s.fail(ctx, "definition", err)
	}
	if len(defs) == 0 {
		return storage.DefinitionRecord{}, fmt.Errorf("projection %q: %w", name, storage.ErrNotFound)
	}
	return defs[0], nil
}

// Definitions implements storage.Storage, with one statement as
// Definition.
func (s *store) Definitions(ctx context.Context) ([]storage.DefinitionRecord, error) {
	if err := s.check(ctx, "definitions"); err != nil {
		return nil, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	defs, err := s.readDefinitions(ctx, s.sql.defs)
	if err != nil {
		return nil, s.fail(ctx, "definitions", err)
	}
	if defs == nil {
		defs = []storage.DefinitionRecord{}
	}
	return defs, nil
}

// readDefinitions runs sql (def or defs), whose rows are the columns of a
// definition followed by those of one of its errors (NULL for none),
// ordered by definition and then error, and returns the definitions with
// their errors.
func (s *store) readDefinitions(ctx context.Context, sql string, args ...any) ([]storage.DefinitionRecord, error) {
	rows, err := s.query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var defs []storage.DefinitionRecord
	for rows.Next() {
		var (
			d                            storage.DefinitionRecord
			spec                         []byte
			position                     *int64
			eventID, eventType, instance *string
			message                      *string
		)
		if err := rows.Scan(&d.Name, &spec, &d.CreatedAt, &d.Checkpoint,
			&position, &eventID, &eventType, &instance, &message); err != nil {
			return nil, err
		}
		if len(defs) == 0 || defs[len(defs)-1].Name != d.Name {
			d.Spec = spec
			d.CreatedAt = d.CreatedAt.UTC()
			defs = append(defs, d)
		}
		if position != nil {
			last := &defs[len(defs)-1]
			last.Errors = append(last.Errors, storage.ProjectionError{Position: *position, EventID: *eventID,
				EventType: *eventType, InstanceID: *instance, Message: *message})
		}
	}
	return defs, rows.Err()
}

// LoadProjection implements storage.Storage.
func (s *store) LoadProjection(ctx context.Context, name, instanceID string) (storage.ProjectionState, error) {
	if err := s.check(ctx, "load projection"); err != nil {
		return storage.ProjectionState{}, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	rows, err := s.query(ctx, s.sql.loadState, name, instanceID)
	if err != nil {
		return storage.ProjectionState{}, s.fail(ctx, "load projection", err)
	}
	states, err := scanStates(rows, name)
	if err != nil {
		return storage.ProjectionState{}, s.fail(ctx, "load projection", err)
	}
	if len(states) == 0 {
		return storage.ProjectionState{}, fmt.Errorf("projection %q instance %q: %w", name, instanceID, storage.ErrNotFound)
	}
	return states[0], nil
}

// LoadProjections implements storage.Storage with one query for all
// of ids.
func (s *store) LoadProjections(ctx context.Context, name string, ids []string) ([]storage.ProjectionState, error) {
	if err := s.check(ctx, "load projections"); err != nil {
		return nil, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	if len(ids) == 0 {
		return []storage.ProjectionState{}, nil
	}
	rows, err := s.query(ctx, s.sql.loadStates, name, ids)
	if err != nil {
		return nil, s.fail(ctx, "load projections", err)
	}
	found, err := scanStates(rows, name)
	if err != nil {
		return nil, s.fail(ctx, "load projections", err)
	}
	byID := make(map[string]int, len(found))
	for i, st := range found {
		byID[st.InstanceID] = i
	}
	states := make([]storage.ProjectionState, 0, len(found))
	for _, id := range ids {
		if i, ok := byID[id]; ok {
			states = append(states, found[i])
		}
	}
	return states, nil
}

// scanStates reads rows of stateCols and closes rows.
func scanStates(rows pgx.Rows, name string) ([]storage.ProjectionState, error) {
	defer rows.Close()
	var states []storage.ProjectionState
	for rows.Next() {
		st, err := scanState(rows, name)
		if err != nil {
			return nil, err
		}
		states = append(states, st)
	}
	return states, rows.Err()
}

// scanState reads the stateCols of the current row.
func scanState(row pgx.Row, name string) (storage.ProjectionState, error) {
	st := storage.ProjectionState{Name: name}
	var (
		data      []byte
		r         ref
		refNumber *string
	)
	if err := row.Scan(&st.InstanceID, &data, &st.Position, &st.CreatedAt, &st.UpdatedAt,
		&r.rank, &r.num, &r.text, &refNumber); err != nil {
		return storage.ProjectionState{}, err
	}
	if refNumber != nil {
		r.number = *refNumber
	}
	st.Data = data
	st.CreatedAt, st.UpdatedAt = st.CreatedAt.UTC(), st.UpdatedAt.UTC()
	st.Reference = r.reference()
	return st, nil
}

// ref is a Reference as projection_states stores it.
type ref struct {
	rank   int16   // 0 number, 1 text, 2 none: the sort order of references
	num    float64 // the number, else 0
	text   string  // the text, else ""
	number string  // the decimal text of a number, else ""
}

// Ranks of references, in their sort order.
const (
	rankNumber int16 = iota
	rankText
	rankNone
)

func newRef(r storage.Reference) ref {
	switch r.Kind {
	case storage.RefNumber:
		return ref{rank: rankNumber, num: r.Number, number: r.Text}
	case storage.RefText:
		return ref{rank: rankText, text: r.Text}
	}
	return ref{rank: rankNone}
}

func (r ref) reference() storage.Reference {
	switch r.rank {
	case rankNumber:
		return storage.Reference{Kind: storage.RefNumber, Number: r.num, Text: r.number}
	case rankText:
		return storage.Reference{Kind: storage.RefText, Text: r.text}
	}
	return storage.Reference{}
}

// CommitProjection implements storage.Storage. In one transaction it
// moves the checkpoint with a compare-and-set (so of several projectors
// racing from the same checkpoint exactly one wins), upserts and deletes
// the states, keeping the definition's count of instances, and records the
// errors, keeping the last MaxRecordedErrors per projection. Error texts
// that PostgreSQL cannot store (invalid UTF-8, NUL) are stored with those
// bytes replaced by U+FFFD.
func (s *store) CommitProjection(ctx context.Context, c storage.ProjectionCommit) error {
	if err := s.check(ctx, "commit projection"); err != nil {
		return err
	}
	// One pipeline, one round trip: the checkpoint's compare-and-set
	// fails the transaction when it does not match, and only then does a
	// second query find out why.
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(setTenantLazySQL, s.tenant)
	b.Queue(s.sql.commit, c.Name, c.From, c.To, c.Spec)
	if len(c.States) > 0 {
		n := len(c.States)
		ids := make([]string, n)
		data := make([][]byte, n)
		positions := make([]int64, n)
		created := make([]time.Time, n)
		updated := make([]time.Time, n)
		ranks := make([]int16, n)
		nums := make([]float64, n)
		texts := make([]string, n)
		numbers := make([]*string, n)
		searches := make([]string, n) // "": no indexed text (NULL)
		for i, st := range c.States {
			if c.Indexed {
				searches[i] = st.SearchText
			}
			ids[i], data[i], positions[i] = st.InstanceID, st.Data, st.Position
			created[i], updated[i] = st.CreatedAt, st.UpdatedAt
			if data[i] == nil {
				data[i] = []byte{}
			}
			r := newRef(st.Reference)
			ranks[i], nums[i], texts[i] = r.rank, r.num, r.text
			if r.rank == rankNumber {
				numbers[i] = &c.States[i].Reference.Text
			}
		}
		b.Queue(s.sql.upsertStates, c.Name, ids, data, positions, created, updated, ranks, nums, texts, numbers, searches)
	}
	if len(c.Deletes) > 0 {
		b.Queue(s.sql.deleteStates, c.Name, c.Deletes)
	}
	if len(c.Errors) > 0 {
		n := len(c.Errors)
		positions := make([]int64, n)
		ids := make([]string, n)
		types := make([]string, n)
		instances := make([]string, n)
		messages := make([]string, n)
		for i, e := range c.Errors {
			positions[i] = e.Position
			ids[i], types[i] = safetext.Clean(e.EventID), safetext.Clean(e.EventType)
			instances[i], messages[i] = safetext.Clean(e.InstanceID), safetext.Clean(e.Message)
		}
		b.Queue(s.sql.insertErrors, c.Name, positions, ids, types, instances, messages)
		b.Queue(s.sql.trimErrors, c.Name, storage.MaxRecordedErrors)
	}
	b.Queue("COMMIT")
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.fail(ctx, "commit projection", err)
	}
	defer conn.Release()
	err = conn.SendBatch(ctx, b).Close()
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "22012" { // division_by_zero: the compare-and-set failed
		// Asked on the connection already held: waiting for a second
		// one from the pool could wait forever when every connection is
		// held by a commit doing the same.
		rollback(conn)
		return s.refusedCommit(ctx, conn, c)
	}
	if err != nil {
		rollback(conn)
		return s.fail(ctx, "commit projection", err)
	}
	s.noteCommitted(len(c.States))
	return nil
}

// refusedCommit returns the error of a commit whose checkpoint did not
// match: ErrNotFound without the definition, else ErrConflict. It reads
// the checkpoint on conn, the connection of the refused commit.
func (s *store) refusedCommit(ctx context.Context, conn *pgxpool.Conn, c storage.ProjectionCommit) error {
	var checkpoint int64
	err := s.queryRowOn(ctx, conn, s.sql.checkpoint, c.Name).Scan(&checkpoint)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("projection %q: %w", c.Name, storage.ErrNotFound)
	case err != nil:
		return s.fail(ctx, "commit projection", err)
	case checkpoint == c.From:
		return fmt.Errorf("projection %q was replaced: %w", c.Name, storage.ErrConflict)
	}
	return fmt.Errorf("projection %q checkpoint is %d, not %d: %w", c.Name, checkpoint, c.From, storage.ErrConflict)
}

// UpdateSpec implements storage.Storage.
func (s *store) UpdateSpec(ctx context.Context, name string, old, spec []byte) error {
	if err := s.check(ctx, "update definition"); err != nil {
		return err
	}
	if old == nil {
		old = []byte{}
	}
	if spec == nil {
		spec = []byte{}
	}
	tag, err := s.exec(ctx, s.sql.updateSpec, name, old, spec)
	if err != nil {
		return s.fail(ctx, "update definition", err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	// Nothing changed: find out why. The definition may have gone or
	// changed since; either answer is one a caller retries from.
	var checkpoint int64
	err = s.queryRow(ctx, s.sql.checkpoint, name).Scan(&checkpoint)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("projection %q: %w", name, storage.ErrNotFound)
	case err != nil:
		return s.fail(ctx, "update definition", err)
	}
	return fmt.Errorf("projection %q was replaced: %w", name, storage.ErrConflict)
}

// DeleteDefinition implements storage.Storage.
func (s *store) DeleteDefinition(ctx context.Context, name string) error {
	return s.changeDefinition(ctx, "delete definition", name, s.sql.deleteDef, name)
}

// ResetProjection implements storage.Storage.
func (s *store) ResetProjection(ctx context.Context, name string) error {
	return s.changeDefinition(ctx, "reset projection", name, s.sql.resetDef, name)
}

// changeDefinition runs defSQL, which changes the definition named name,
// and removes the projection's instances and errors, in one transaction.
// It wraps ErrNotFound when defSQL changes no row.
func (s *store) changeDefinition(ctx context.Context, op, name, defSQL string, args ...any) error {
	if err := s.check(ctx, op); err != nil {
		return err
	}
	err := s.beginFunc(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, defSQL, args...)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("projection %q: %w", name, storage.ErrNotFound)
		}
		b := &pgx.Batch{}
		b.Queue(s.sql.deleteStatesOf, name)
		b.Queue(s.sql.deleteErrorsOf, name)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return s.fail(ctx, op, err)
	}
	return nil
}

// RenameProjection implements storage.Storage in one transaction: it
// removes the projection to, then renames from's definition, instances and
// errors.
func (s *store) RenameProjection(ctx context.Context, from, to string) error {
	if err := s.check(ctx, "rename projection"); err != nil {
		return err
	}
	err := s.beginFunc(ctx, pgx.TxOptions{}, func(tx pgx.Tx) error {
		// Lock from's definition first: a missing from changes nothing.
		var checkpoint int64
		err := tx.QueryRow(ctx, s.sql.checkpoint+" FOR UPDATE", from).Scan(&checkpoint)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("projection %q: %w", from, storage.ErrNotFound)
		}
		if err != nil || from == to {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(s.sql.deleteDef, to)
		b.Queue(s.sql.deleteStatesOf, to)
		b.Queue(s.sql.deleteErrorsOf, to)
		b.Queue(s.sql.renameDef, from, to)
		b.Queue(s.sql.renameStatesOf, from, to)
		b.Queue(s.sql.renameErrorsOf, from, to)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return s.fail(ctx, "rename projection", err)
	}
	return nil
}
