package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/eventkit-go/eventstore/internal/safetext"
	"github.com/eventkit-go/eventstore/storage"
)

// CreateDefinition implements storage.Storage.
func (s *store) CreateDefinition(ctx context.Context, def storage.DefinitionRecord) error {
	if err := s.check(ctx, "create projection"); err != nil {
		return err
	}
	_, err := s.writeDB.ExecContext(ctx,
		`INSERT INTO definitions (name, spec, created_at, checkpoint) VALUES (?, ?, ?, 0)`,
		def.Name, blob(def.Spec), def.CreatedAt.UnixMicro())
	if isConstraint(err) {
		return fmt.Errorf("sqlite: projection %q exists: %w", def.Name, storage.ErrConflict)
	}
	return s.fail(ctx, "create projection", err)
}

// blob returns b as a non-NULL BLOB argument.
func blob(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Definition implements storage.Storage.
func (s *store) Definition(ctx context.Context, name string) (storage.DefinitionRecord, error) {
	if err := s.check(ctx, "get projection"); err != nil {
		return storage.DefinitionRecord{}, err
	}
	defs, err := s.definitions(ctx, name)
	if err != nil {
		return storage.DefinitionRecord{}, s.fail(ctx, "get projection", err)
	}
	if len(defs) == 0 {
		return storage.DefinitionRecord{}, fmt.Errorf("projection %q: %w", name, storage.ErrNotFound)
	}
	return defs[0], nil
}

// Definitions implements storage.Storage.
func (s *store) Definitions(ctx context.Context) ([]storage.DefinitionRecord, error) {
	if err := s.check(ctx, "list projections"); err != nil {
		return nil, err
	}
	defs, err := s.definitions(ctx, "")
	if err != nil {
		return nil, s.fail(ctx, "list projections", err)
	}
	if defs == nil {
		defs = []storage.DefinitionRecord{}
	}
	return defs, nil
}

// The queries of definitions. A Projector runs them at every catch-up,
// also when its poll finds nothing new, so they are prepared once per read
// connection (rawConns) rather than parsed at every call: with one storage
// per tenant, a thousand idle tenants' projectors run them a thousand
// times a second.
const (
	definitionsQuery = `SELECT name, spec, created_at, checkpoint FROM definitions
		WHERE ?1 = '' OR name = ?1 ORDER BY name`
	definitionErrorsQuery = `SELECT name, position, event_id, event_type, instance_id, message
		FROM projection_errors WHERE ?1 = '' OR name = ?1 ORDER BY name, id`
)

// definitions reads the definition named name, or all of them when name is
// empty, ordered by name, with their errors, from one snapshot.
func (s *store) definitions(ctx context.Context, name string) ([]storage.DefinitionRecord, error) {
	var defs []storage.DefinitionRecord
	err := s.reads.with(ctx, s.readDB, func(dc *rawConn) error {
		tx, err := rawBegin(ctx, dc)
		if err != nil {
			return err
		}
		defer tx.Rollback() // read only: nothing to commit
		args := []driver.NamedValue{{Ordinal: 1, Value: name}}
		index := make(map[string]int)
		err = rawQuery(ctx, dc, definitionsQuery, args, func(r *rawRow) error {
			d := storage.DefinitionRecord{
				Name:       r.string(0),
				Spec:       bytes.Clone(r.bytes(1)),
				CreatedAt:  time.UnixMicro(r.int64(2)).UTC(),
				Checkpoint: r.int64(3),
			}
			index[d.Name] = len(defs)
			defs = append(defs, d)
			return nil
		})
		if err != nil || len(defs) == 0 {
			return err
		}
		return rawQuery(ctx, dc, definitionErrorsQuery, args, func(r *rawRow) error {
			i, ok := index[r.string(0)]
			if !ok {
				return nil
			}
			defs[i].Errors = append(defs[i].Errors, storage.ProjectionError{
				Position:   r.int64(1),
				EventID:    r.string(2),
				EventType:  r.string(3),
				InstanceID: r.string(4),
				Message:    r.string(5),
			})
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return defs, nil
}

// LoadProjection implements storage.Storage.
func (s *store) LoadProjection(ctx context.Context, name, instanceID string) (storage.ProjectionState, error) {
	if err := s.check(ctx, "get projection state"); err != nil {
		return storage.ProjectionState{}, err
	}
	row := s.readDB.QueryRowContext(ctx, `SELECT `+stateColumns+` FROM projection_states
		WHERE name = ? AND instance_id = ?`, name, instanceID)
	st, err := scanState(row, name)
	if errors.Is(err, sql.ErrNoRows) {
		return storage.ProjectionState{}, fmt.Errorf("projection %q instance %q: %w", name, instanceID, storage.ErrNotFound)
	}
	if err != nil {
		return storage.ProjectionState{}, s.fail(ctx, "get projection state", err)
	}
	return st, nil
}

// CommitProjection implements storage.Storage, in one transaction: the
// checkpoint moves only if it still is c.From (compare-and-set), together
// with the states, deletions and errors; old errors beyond the last
// storage.MaxRecordedErrors are trimmed.
func (s *store) CommitProjection(ctx context.Context, c storage.ProjectionCommit) error {
	defer s.span(&ctx, "CommitProjection")()
	if err := s.check(ctx, "commit projection"); err != nil {
		return err
	}
	return s.fail(ctx, "commit projection", s.commitProjection(ctx, c))
}

func (s *store) commitProjection(ctx context.Context, c storage.ProjectionCommit) error {
	// Before BeginTx: preparing takes the one write connection.
	if err := s.commits.prepare(ctx, s.writeDB); err != nil {
		return err
	}
	tx, err := s.writeDB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	r, err := tx.StmtContext(ctx, s.commits.checkpoint).ExecContext(ctx, c.To, c.Name, c.From, nullBytes(c.Spec))
	if err != nil {
		return err
	}
	if n, err := r.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		var at int64
		var spec []byte
		err := tx.QueryRowContext(ctx, `SELECT checkpoint, spec FROM definitions WHERE name = ?`, c.Name).Scan(&at, &spec)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: projection %q: %w", c.Name, storage.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if at == c.From {
			return fmt.Errorf("sqlite: projection %q was replaced: %w", c.Name, storage.ErrConflict)
		}
		return fmt.Errorf("sqlite: projection %q checkpoint is %d, not %d: %w", c.Name, at, c.From, storage.ErrConflict)
	}
	// added counts the instances the commit creates, less those it
	// removes, for definitions.instances.
	var added int64
	if len(c.States) > 0 {
		// A state is written by the first of stateQueries that changes
		// a row.
		var stmts [3]*sql.Stmt
		for i, st := range s.commits.states {
			stmts[i] = tx.StmtContext(ctx, st)
		}
		for _, st := range c.States {
			rank, num, text, decimal := refColumns(st.Reference)
			args := []any{c.Name, st.InstanceID, blob(st.Data), st.Position,
				st.CreatedAt.UnixMicro(), st.UpdatedAt.UnixMicro(), rank, num, text, decimal}
			for i, stmt := range stmts {
				r, err := stmt.ExecContext(ctx, args...)
				if err != nil {
					return err
				}
				n, err := r.RowsAffected()
				if err != nil {
					return err
				}
				if n > 0 {
					if i == len(stmts)-1 {
						added++
					}
					break
				}
			}
		}
	}
	if c.Indexed && len(c.States) > 0 {
		if err := indexStates(ctx, tx, c); err != nil {
			return err
		}
	}
	if len(c.Deletes) > 0 {
		stmt, err := tx.PrepareContext(ctx, `DELETE FROM projection_states WHERE name = ? AND instance_id = ?`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		unindex, err := tx.PrepareContext(ctx, `DELETE FROM projection_search WHERE name = ? AND instance_id = ?`)
		if err != nil {
			return err
		}
		defer unindex.Close()
		for _, id := range c.Deletes {
			r, err := stmt.ExecContext(ctx, c.Name, id)
			if err != nil {
				return err
			}
			n, err := r.RowsAffected()
			if err != nil {
				return err
			}
			added -= n
			if _, err := unindex.ExecContext(ctx, c.Name, id); err != nil {
				return err
			}
		}
	}
	if added != 0 {
		if _, err := tx.StmtContext(ctx, s.commits.instances).ExecContext(ctx, added, c.Name); err != nil {
			return err
		}
	}
	if len(c.Errors) > 0 {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO projection_errors
			(name, position, event_id, event_type, instance_id, message) VALUES (?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		for _, pe := range c.Errors {
			if _, err := stmt.ExecContext(ctx, c.Name, pe.Position, safetext.Clean(pe.EventID), safetext.Clean(pe.EventType),
				safetext.Clean(pe.InstanceID), safetext.Clean(pe.Message)); err != nil {
				return err
			}
		}
		// Keep the newest MaxRecordedErrors: delete below the id of the
		// MaxRecordedErrors-th newest (nothing when there are fewer).
		if _, err := tx.ExecContext(ctx, `DELETE FROM projection_errors WHERE name = ?1 AND id <
			(SELECT id FROM projection_errors WHERE name = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)`,
			c.Name, storage.MaxRecordedErrors-1); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		s.abandon(ctx)
		return err
	}
	return nil
}

// indexStates writes the indexed text of c's states to projection_search
// (whose triggers update the full-text index) in two statements over a
// JSON array of the states, cheaper than a statement per state: a text
// that did not change writes nothing, an empty one removes the instance's
// row.
func indexStates(ctx context.Context, tx *sql.Tx, c storage.ProjectionCommit) error {
	var empty []string
	var texts [][2]string // id, text
	for _, st := range c.States {
		if st.SearchText == "" {
			empty = append(empty, st.InstanceID)
		} else {
			texts = append(texts, [2]string{st.InstanceID, st.SearchText})
		}
	}
	if len(empty) > 0 {
		ids, err := json.Marshal(empty)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM projection_search
			WHERE name = ? AND instance_id IN (SELECT value FROM json_each(?))`, c.Name, string(ids)); err != nil {
			return err
		}
	}
	if len(texts) > 0 {
		pairs, err := json.Marshal(texts)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO projection_search (name, instance_id, text)
			SELECT ?1, value ->> 0, value ->> 1 FROM json_each(?2) WHERE true
			ON CONFLICT (name, instance_id) DO UPDATE SET text = excluded.text WHERE text <> excluded.text`,
			c.Name, string(pairs)); err != nil {
			return err
		}
	}
	return nil
}

// DeleteDefinition implements storage.Storage, in one transaction.
func (s *store) DeleteDefinition(ctx context.Context, name string) error {
	if err := s.check(ctx, "delete projection"); err != nil {
		return err
	}
	return s.fail(ctx, "delete projection "+name, s.inTx(ctx, func(tx *txn) error {
		tx.exec(ctx, `DELETE FROM projection_errors WHERE name = ?`, name)
		tx.exec(ctx, `DELETE FROM projection_states WHERE name = ?`, name)
		tx.exec(ctx, `DELETE FROM projection_search WHERE name = ?`, name)
		n, err := tx.affected(ctx, `DELETE FROM definitions WHERE name = ?`, name)
		if err == nil && n == 0 {
			return fmt.Errorf("projection %q: %w", name, storage.ErrNotFound)
		}
		return err
	}))
}

// ResetProjection implements storage.Storage, in one transaction.
func (s *store) ResetProjection(ctx context.Context, name string) error {
	if err := s.check(ctx, "reset projection"); err != nil {
		return err
	}
	return s.fail(ctx, "reset projection "+name, s.inTx(ctx, func(tx *txn) error {
		n, err := tx.affected(ctx, `UPDATE definitions SET checkpoint = 0, instances = 0 WHERE name = ?`, name)
		if err == nil && n == 0 {
			return fmt.Errorf("projection %q: %w", name, storage.ErrNotFound)
		}
		tx.exec(ctx, `DELETE FROM projection_errors WHERE name = ?`, name)
		tx.exec(ctx, `DELETE FROM projection_states WHERE name = ?`, name)
		tx.exec(ctx, `DELETE FROM projection_search WHERE name = ?`, name)
		return tx.err
	}))
}

// RenameProjection implements storage.Storage, in one transaction. The
// foreign keys of states and errors are checked at its commit, once the
// definition and its rows all carry the new name.
func (s *store) RenameProjection(ctx context.Context, from, to string) error {
	if err := s.check(ctx, "rename projection"); err != nil {
		return err
	}
	return s.fail(ctx, fmt.Sprintf("rename projection %s to %s", from, to), s.inTx(ctx, func(tx *txn) error {
		var found int
		err := tx.QueryRowContext(ctx, `SELECT count(*) FROM definitions WHERE name = ?`, from).Scan(&found)
		if err != nil {
			return err
		}
		if found == 0 {
			return fmt.Errorf("projection %q: %w", from, storage.ErrNotFound)
		}
		if from == to {
			return nil
		}
		tx.exec(ctx, `PRAGMA defer_foreign_keys = ON`) // until the commit
		for _, table := range []string{"projection_errors", "projection_states", "projection_search", "definitions"} {
			tx.exec(ctx, `DELETE FROM `+table+` WHERE name = ?`, to)
		}
		for _, table := range []string{"definitions", "projection_states", "projection_errors", "projection_search"} {
			tx.exec(ctx, `UPDATE `+table+` SET name = ? WHERE name = ?`, to, from)
		}
		return tx.err
	}))
}

// UpdateSpec implements storage.Storage.
func (s *store) UpdateSpec(ctx context.Context, name string, old, spec []byte) error {
	if err := s.check(ctx, "update projection"); err != nil {
		return err
	}
	return s.fail(ctx, "update projection "+name, s.inTx(ctx, func(tx *txn) error {
		n, err := tx.affected(ctx, `UPDATE definitions SET spec = ? WHERE name = ? AND spec = ?`, blob(spec), name, blob(old))
		if err != nil || n > 0 {
			return err
		}
		var found int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM definitions WHERE name = ?`, name).Scan(&found); err != nil {
			return err
		}
		if found == 0 {
			return fmt.Errorf("projection %q: %w", name, storage.ErrNotFound)
		}
		return fmt.Errorf("projection %q was replaced: %w", name, storage.ErrConflict)
	}))
}

// closeRows closes rows and returns the error of the iteration, if any.
func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return err
}

// nullBytes is b as an SQL argument: NULL when b is nil.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return b
}
