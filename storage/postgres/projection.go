package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/safetext"
	"github.com/jackc/pgx/v5"
)

// CreateDefinition implements eventstore.Storage.
func (s *Storage) CreateDefinition(ctx context.Context, def eventstore.DefinitionRecord) error {
	if err := s.check(ctx, "create definition"); err != nil {
		return err
	}
	spec := []byte(def.Spec)
	if spec == nil {
		spec = []byte{}
	}
	if _, err := s.pool.Exec(ctx, s.sql.createDef, def.Name, spec, def.CreatedAt); err != nil {
		err = s.fail(ctx, "create definition", err)
		if errors.Is(err, eventstore.ErrConflict) {
			return fmt.Errorf("projection %q exists: %w", def.Name, eventstore.ErrConflict)
		}
		return err
	}
	return nil
}

// Definition implements eventstore.Storage.
func (s *Storage) Definition(ctx context.Context, name string) (eventstore.DefinitionRecord, error) {
	if err := s.check(ctx, "definition"); err != nil {
		return eventstore.DefinitionRecord{}, err
	}
	var defs []eventstore.DefinitionRecord
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		defs, err = readDefinitions(ctx, tx, s.sql.def, s.sql.defErrors, name)
		return err
	})
	if err != nil {
		return eventstore.DefinitionRecord{}, s.fail(ctx, "definition", err)
	}
	if len(defs) == 0 {
		return eventstore.DefinitionRecord{}, fmt.Errorf("projection %q: %w", name, eventstore.ErrNotFound)
	}
	return defs[0], nil
}

// Definitions implements eventstore.Storage.
func (s *Storage) Definitions(ctx context.Context) ([]eventstore.DefinitionRecord, error) {
	if err := s.check(ctx, "definitions"); err != nil {
		return nil, err
	}
	var defs []eventstore.DefinitionRecord
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		defs, err = readDefinitions(ctx, tx, s.sql.defs, s.sql.allErrors)
		return err
	})
	if err != nil {
		return nil, s.fail(ctx, "definitions", err)
	}
	if defs == nil {
		defs = []eventstore.DefinitionRecord{}
	}
	return defs, nil
}

// readDefinitions reads definitions with defSQL and attaches their errors,
// read with errSQL, in one snapshot (tx).
func readDefinitions(ctx context.Context, tx pgx.Tx, defSQL, errSQL string, args ...any) ([]eventstore.DefinitionRecord, error) {
	rows, err := tx.Query(ctx, defSQL, args...)
	if err != nil {
		return nil, err
	}
	var defs []eventstore.DefinitionRecord
	index := make(map[string]int)
	for rows.Next() {
		var d eventstore.DefinitionRecord
		var spec []byte
		if err := rows.Scan(&d.Name, &spec, &d.CreatedAt, &d.Checkpoint); err != nil {
			rows.Close()
			return nil, err
		}
		d.Spec = spec
		d.CreatedAt = d.CreatedAt.UTC()
		index[d.Name] = len(defs)
		defs = append(defs, d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(defs) == 0 {
		return nil, nil
	}
	rows, err = tx.Query(ctx, errSQL, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var e eventstore.ProjectionError
		if err := rows.Scan(&name, &e.Position, &e.EventID, &e.EventType, &e.InstanceID, &e.Message); err != nil {
			return nil, err
		}
		if i, ok := index[name]; ok {
			defs[i].Errors = append(defs[i].Errors, e)
		}
	}
	return defs, rows.Err()
}

// LoadProjection implements eventstore.Storage.
func (s *Storage) LoadProjection(ctx context.Context, name, instanceID string) (eventstore.ProjectionState, error) {
	if err := s.check(ctx, "load projection"); err != nil {
		return eventstore.ProjectionState{}, err
	}
	st := eventstore.ProjectionState{Name: name, InstanceID: instanceID}
	var data []byte
	err := s.pool.QueryRow(ctx, s.sql.loadState, name, instanceID).Scan(&data, &st.Position, &st.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return eventstore.ProjectionState{}, fmt.Errorf("projection %q instance %q: %w", name, instanceID, eventstore.ErrNotFound)
	}
	if err != nil {
		return eventstore.ProjectionState{}, s.fail(ctx, "load projection", err)
	}
	st.Data = data
	st.UpdatedAt = st.UpdatedAt.UTC()
	return st, nil
}

// CommitProjection implements eventstore.Storage. In one transaction it
// moves the checkpoint with a compare-and-set (so of several projectors
// racing from the same checkpoint exactly one wins), upserts the states and
// records the errors, keeping the last MaxRecordedErrors per projection.
func (s *Storage) CommitProjection(ctx context.Context, c eventstore.ProjectionCommit) error {
	if err := s.check(ctx, "commit projection"); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.sql.commit, c.Name, c.From, c.To)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			var checkpoint int64
			err := tx.QueryRow(ctx, s.sql.checkpoint, c.Name).Scan(&checkpoint)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("projection %q: %w", c.Name, eventstore.ErrNotFound)
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("projection %q checkpoint is %d, not %d: %w", c.Name, checkpoint, c.From, eventstore.ErrConflict)
		}
		b := &pgx.Batch{}
		if len(c.States) > 0 {
			ids := make([]string, len(c.States))
			data := make([][]byte, len(c.States))
			positions := make([]int64, len(c.States))
			times := make([]time.Time, len(c.States))
			for i, st := range c.States {
				ids[i], data[i], positions[i], times[i] = st.InstanceID, st.Data, st.Position, st.UpdatedAt
				if data[i] == nil {
					data[i] = []byte{}
				}
			}
			b.Queue(s.sql.upsertStates, c.Name, ids, data, positions, times)
		}
		if len(c.Errors) > 0 {
			positions := make([]int64, len(c.Errors))
			ids := make([]string, len(c.Errors))
			types := make([]string, len(c.Errors))
			instances := make([]string, len(c.Errors))
			messages := make([]string, len(c.Errors))
			for i, e := range c.Errors {
				// Text columns refuse invalid UTF-8 and NUL: a message
				// quoting hostile input must not stop the projection.
				positions[i], ids[i], types[i], instances[i], messages[i] = e.Position,
					safetext.Clean(e.EventID), safetext.Clean(e.EventType), safetext.Clean(e.InstanceID), safetext.Clean(e.Message)
			}
			b.Queue(s.sql.insertErrors, c.Name, positions, ids, types, instances, messages)
			b.Queue(s.sql.trimErrors, c.Name, eventstore.MaxRecordedErrors)
		}
		if b.Len() == 0 {
			return nil
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return s.fail(ctx, "commit projection", err)
	}
	return nil
}
