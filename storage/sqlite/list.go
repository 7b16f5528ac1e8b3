package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// stateColumns are the columns scanState reads, in order.
const stateColumns = `instance_id, data, position, created_at, updated_at, ref_rank, ref_num, ref_text, ref_decimal`

// References are stored as a rank that orders them as lists sort them
// (numbers, then texts, then none), the number, the text, and a number's
// decimal text. Only rank, number and text take part in the order, so
// numbers that are equal tie and are ordered by instance id.
const (
	rankNumber = 0
	rankText   = 1
	rankNone   = 2
)

// refColumns returns the stored columns of r. A kind this package does not
// know is stored as none.
func refColumns(r storage.Reference) (rank int, num float64, text, decimal string) {
	switch r.Kind {
	case storage.RefNumber:
		return rankNumber, r.Number, "", r.Text
	case storage.RefText:
		return rankText, 0, r.Text, ""
	}
	return rankNone, 0, "", ""
}

// scanState reads one row of stateColumns into the state of projection
// name.
func scanState(row interface{ Scan(...any) error }, name string) (storage.ProjectionState, error) {
	st := storage.ProjectionState{Name: name}
	var data []byte
	var created, updated int64
	var rank int
	var num float64
	var text, decimal string
	if err := row.Scan(&st.InstanceID, &data, &st.Position, &created, &updated, &rank, &num, &text, &decimal); err != nil {
		return storage.ProjectionState{}, err
	}
	st.Data = data
	st.CreatedAt = time.UnixMicro(created).UTC()
	st.UpdatedAt = time.UnixMicro(updated).UTC()
	switch rank {
	case rankNumber:
		st.Reference = storage.Reference{Kind: storage.RefNumber, Number: num, Text: decimal}
	case rankText:
		st.Reference = storage.Reference{Kind: storage.RefText, Text: text}
	}
	return st, nil
}

// maxParams is how many ids one statement binds as parameters; SQLite
// allows 32,766.
const maxParams = 10_000

// placeholders returns "?, ?, …" for n parameters.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// LoadProjections implements storage.Storage: one query per 10,000 ids,
// from one snapshot.
func (s *store) LoadProjections(ctx context.Context, name string, ids []string) ([]storage.ProjectionState, error) {
	if err := s.check(ctx, "get projection states"); err != nil {
		return nil, err
	}
	found := make(map[string]storage.ProjectionState, len(ids))
	// Before readTx: preparing takes a connection of the read pool.
	small, err := s.loads.get(ctx, s.readDB, len(ids))
	if err != nil {
		return nil, s.fail(ctx, "get projection states", err)
	}
	err = s.readTx(ctx, func(tx *sql.Tx) error {
		for start := 0; start < len(ids); start += maxParams {
			chunk := ids[start:min(start+maxParams, len(ids))]
			args := make([]any, 0, len(chunk)+1)
			args = append(args, name)
			for _, id := range chunk {
				args = append(args, id)
			}
			var rows *sql.Rows
			var err error
			if small != nil {
				rows, err = tx.StmtContext(ctx, small).QueryContext(ctx, args...)
			} else {
				rows, err = tx.QueryContext(ctx, loadStatesQuery(len(chunk)), args...)
			}
			if err != nil {
				return err
			}
			for rows.Next() {
				st, err := scanState(rows, name)
				if err != nil {
					rows.Close()
					return err
				}
				found[st.InstanceID] = st
			}
			if err := closeRows(rows); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.fail(ctx, "get projection states", err)
	}
	states := make([]storage.ProjectionState, 0, len(found))
	for _, id := range ids {
		if st, ok := found[id]; ok {
			states = append(states, st)
		}
	}
	return states, nil
}

// readTx runs fn in a read transaction of the read pool: one snapshot.
func (s *store) readTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.readDB.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() // read only: nothing to commit
	return fn(tx)
}

// sortColumns are the ORDER BY columns of each sort; every list ends with
// the instance id, and each is the tail of an index on (name, …).
var sortColumns = map[storage.ProjectionSort][]string{
	storage.SortByID:        {"instance_id"},
	storage.SortByReference: {"ref_rank", "ref_num", "ref_text", "instance_id"},
	storage.SortByCreatedAt: {"created_at", "instance_id"},
	storage.SortByUpdatedAt: {"updated_at", "instance_id"},
}

// ListProjections implements storage.Storage with two statements on one
// snapshot: a count of the matches and the page. Filters on the reference
// and every sort are ranges of an index that starts with the projection
// name, so a page costs about Skip+Limit index entries, whatever the number
// of instances. Without a filter the count is the one CommitProjection
// keeps with the definition; with one, counting visits the matching
// entries of an index.
func (s *store) ListProjections(ctx context.Context, q storage.ProjectionQuery) (storage.ProjectionList, error) {
	if err := s.check(ctx, "list projection states"); err != nil {
		return storage.ProjectionList{}, err
	}
	cols, ok := sortColumns[q.Sort]
	if !ok {
		return storage.ProjectionList{}, fmt.Errorf("sqlite: list projection states: unknown sort %d: %w", q.Sort, storage.ErrInvalid)
	}
	where, args, err := listFilter(q)
	if err != nil {
		return storage.ProjectionList{}, fmt.Errorf("sqlite: list projection states: %w", err)
	}
	var order strings.Builder
	for i, c := range cols {
		if i > 0 {
			order.WriteString(", ")
		}
		order.WriteString(c)
		if q.Descending {
			order.WriteString(" DESC")
		}
	}
	from, fromArgs := listFrom(q)
	args = append(fromArgs, args...)
	list := storage.ProjectionList{States: []storage.ProjectionState{}}
	err = s.readTx(ctx, func(tx *sql.Tx) error {
		if len(args) == 1 {
			// No filter: the count kept with the definition.
			err := tx.QueryRowContext(ctx, `SELECT instances FROM definitions WHERE name = ?`, q.Name).Scan(&list.Total)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		} else if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+from+` WHERE `+where, args...).Scan(&list.Total); err != nil {
			return err
		}
		skip := int64(max(q.Skip, 0))
		if q.Limit <= 0 || skip >= list.Total {
			return nil
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+stateColumns+` FROM `+from+` WHERE `+where+
			` ORDER BY `+order.String()+` LIMIT ? OFFSET ?`, append(args, q.Limit, skip)...)
		if err != nil {
			return err
		}
		for rows.Next() {
			st, err := scanState(rows, q.Name)
			if err != nil {
				rows.Close()
				return err
			}
			list.States = append(list.States, st)
		}
		return closeRows(rows)
	})
	if err != nil {
		return storage.ProjectionList{}, s.fail(ctx, "list projection states", err)
	}
	return list, nil
}

// listFilter returns the WHERE clause of q and its arguments.
func listFilter(q storage.ProjectionQuery) (string, []any, error) {
	var where strings.Builder
	where.WriteString("name = ?")
	args := []any{q.Name}
	switch n := len(q.IDs); {
	case n == 0:
	case n <= maxParams:
		where.WriteString(" AND instance_id IN (" + placeholders(n) + ")")
		for _, id := range q.IDs {
			args = append(args, id)
		}
	default:
		ids, err := json.Marshal(q.IDs)
		if err != nil {
			return "", nil, fmt.Errorf("encode ids: %w", err)
		}
		where.WriteString(" AND instance_id IN (SELECT value FROM json_each(?))")
		args = append(args, string(ids))
	}
	ref := func(r storage.Reference, op string) {
		if r.Kind == storage.RefNone {
			return
		}
		rank, num, text, _ := refColumns(r)
		switch r.Kind {
		case storage.RefNumber:
			where.WriteString(" AND ref_rank = ? AND ref_num " + op + " ?")
			args = append(args, rank, num)
		case storage.RefText:
			where.WriteString(" AND ref_rank = ? AND ref_text " + op + " ?")
			args = append(args, rank, text)
		default: // a kind no instance has
			where.WriteString(" AND false")
		}
	}
	ref(q.Reference, "=")
	ref(q.From, ">=")
	ref(q.To, "<=")
	return where.String(), args, nil
}

// listFrom returns the FROM clause of q and its arguments, which come
// before those of the WHERE clause. A search starts from the full-text
// index: the instances whose indexed text matches every word as a prefix
// ("word"* AND …), then each instance's row by its primary key, so that
// it costs about the number of matches whatever the sort (CROSS JOIN
// keeps SQLite from walking a sort index of every instance instead).
func listFrom(q storage.ProjectionQuery) (string, []any) {
	if len(q.Search) == 0 {
		return "projection_states", nil
	}
	terms := make([]string, len(q.Search))
	for i, w := range q.Search {
		terms[i] = `"` + strings.ReplaceAll(w, `"`, `""`) + `"*`
	}
	return `(SELECT d.instance_id AS match_id FROM projection_search_fts
		CROSS JOIN projection_search d ON d.id = projection_search_fts.rowid
		WHERE projection_search_fts MATCH ? AND +d.name = ?) AS m
		CROSS JOIN projection_states ON projection_states.instance_id = m.match_id`,
		[]any{strings.Join(terms, " AND "), q.Name}
}
