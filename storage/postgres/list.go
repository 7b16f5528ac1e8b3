package postgres

import (
	"context"
	"strconv"
	"strings"

	"github.com/eventkit-go/eventstore/storage"
)

// ListProjections implements storage.Storage with one statement, so the
// page and the total come from one snapshot. Every order is served by an
// index on (name, sort key, instance_id): a page costs about Skip + Limit
// index entries, whatever the number of instances. The total of an
// unfiltered list is the count the definition keeps; a filtered one is
// counted over the index range that the filter selects.
func (s *store) ListProjections(ctx context.Context, q storage.ProjectionQuery) (storage.ProjectionList, error) {
	if err := s.check(ctx, "list projections"); err != nil {
		return storage.ProjectionList{}, err
	}
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	sql, args := s.listSQL(q)
	rows, err := s.query(ctx, sql, args...)
	if err != nil {
		return storage.ProjectionList{}, s.fail(ctx, "list projections", err)
	}
	defer rows.Close()
	list := storage.ProjectionList{States: []storage.ProjectionState{}}
	for rows.Next() {
		st := storage.ProjectionState{Name: q.Name}
		var (
			found     bool
			data      []byte
			r         ref
			refNumber *string
		)
		if err := rows.Scan(&list.Total, &found, &st.InstanceID, &data, &st.Position, &st.CreatedAt, &st.UpdatedAt,
			&r.rank, &r.num, &r.text, &refNumber); err != nil {
			return storage.ProjectionList{}, s.fail(ctx, "list projections", err)
		}
		if !found {
			continue // the row only carries the total
		}
		if refNumber != nil {
			r.number = *refNumber
		}
		st.Data = data
		st.CreatedAt, st.UpdatedAt = st.CreatedAt.UTC(), st.UpdatedAt.UTC()
		st.Reference = r.reference()
		list.States = append(list.States, st)
	}
	if err := rows.Err(); err != nil {
		return storage.ProjectionList{}, s.fail(ctx, "list projections", err)
	}
	return list, nil
}

// listSQL returns the statement of ListProjections for q and its
// arguments. It returns one row per instance of the page, in order, each
// with the total and found set, or a single row with the total and found
// false when the page is empty.
func (s *store) listSQL(q storage.ProjectionQuery) (string, []any) {
	args := []any{q.Name}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	var where strings.Builder
	if len(q.Search) > 0 {
		// name || '' keeps the planner from reading every instance of
		// the projection through an index on the name and filtering
		// them, which it prefers while a newly built table has no
		// statistics yet: the search index finds the matches.
		where.WriteString("name || '' = $1")
	} else {
		where.WriteString("name = $1")
	}
	filtered := false
	and := func(cond string) {
		where.WriteString(" AND ")
		where.WriteString(cond)
		filtered = true
	}
	if len(q.IDs) > 0 {
		and("instance_id = ANY(" + arg(q.IDs) + "::text[])")
	}
	// refCond restricts to references of r's kind compared with r by op.
	refCond := func(r storage.Reference, op string) {
		rr := newRef(r)
		switch rr.rank {
		case rankNumber:
			and("ref_rank = 0 AND ref_num " + op + " " + arg(rr.num) + "::float8")
		case rankText:
			and("ref_rank = 1 AND ref_text " + op + " " + arg(rr.text) + "::text")
		}
	}
	refCond(q.Reference, "=")
	refCond(q.From, ">=")
	refCond(q.To, "<=")
	if len(q.Search) > 0 {
		// Every word as a prefix of a lexeme: 'word':* & …, lexemes quoted
		// so that they are taken as they are.
		terms := make([]string, len(q.Search))
		for i, w := range q.Search {
			terms[i] = "'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(w) + "':*"
		}
		and("search @@ " + arg(strings.Join(terms, " & ")) + "::tsquery")
	}

	var keys []string
	switch q.Sort {
	case storage.SortByReference:
		keys = []string{"ref_rank", "ref_num", "ref_text"}
	case storage.SortByCreatedAt:
		keys = []string{"created_at"}
	case storage.SortByUpdatedAt:
		keys = []string{"updated_at"}
	}
	keys = append(keys, "instance_id")
	dir := ""
	if q.Descending {
		dir = " DESC"
	}
	order := func(prefix string) string {
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = prefix + k + dir
		}
		return strings.Join(parts, ", ")
	}

	total := "(SELECT coalesce((SELECT instances FROM {{schema}}.definitions WHERE name = $1), 0))"
	if filtered {
		total = "(SELECT count(*) FROM {{schema}}.projection_states WHERE " + where.String() + ")"
	}
	var sql string
	if q.Limit <= 0 {
		sql = "SELECT " + total + ", false, '', NULL::bytea, 0::bigint, 'epoch'::timestamptz, 'epoch'::timestamptz, " +
			"0::smallint, 0::float8, '', NULL::text"
	} else {
		// The page's rows. With a Skip, the skipped entries are read from
		// the index alone (every column of the order is in it), and only
		// the page's rows are fetched from the table.
		skip, limit := arg(int64(max(q.Skip, 0))), arg(int64(q.Limit))
		page := `SELECT ` + stateCols + ` FROM {{schema}}.projection_states
	WHERE ` + where.String() + `
	ORDER BY ` + order("") + ` OFFSET ` + skip + ` LIMIT ` + limit
		if q.Skip > 0 {
			page = `SELECT ` + prefixed("s.", stateCols) + ` FROM (
		SELECT ` + strings.Join(keys, ", ") + ` FROM {{schema}}.projection_states
		WHERE ` + where.String() + `
		ORDER BY ` + order("") + ` OFFSET ` + skip + ` LIMIT ` + limit + `
	) k
	JOIN {{schema}}.projection_states s ON s.name = $1 AND s.instance_id = k.instance_id
	ORDER BY ` + order("k.")
		}
		sql = `
SELECT t.total, p.instance_id IS NOT NULL, coalesce(p.instance_id, ''), p.data, coalesce(p.position, 0),
       coalesce(p.created_at, 'epoch'), coalesce(p.updated_at, 'epoch'), coalesce(p.ref_rank, 0),
       coalesce(p.ref_num, 0), coalesce(p.ref_text, ''), p.ref_number
FROM (SELECT ` + total + ` AS total) t
LEFT JOIN LATERAL (` + page + `) p ON true
ORDER BY ` + order("p.")
	}
	return qualify(s.schema, sql), args
}

// prefixed returns the comma-separated columns cols, each prefixed.
func prefixed(prefix, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}
