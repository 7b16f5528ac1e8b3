package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5"
)

// BenchmarkSearch finds 100 of 100,000 instances by a word of their
// indexed text (also with a common second word, sorted by reference, and
// counted), as storagetest's Search does, in two states of the table:
// after the commits that built it, analyzed as autovacuum soon does
// (new entries still in the GIN index's pending list), and after a
// VACUUM has moved them into the index proper.
func BenchmarkSearch(b *testing.B) {
	pool := benchPool(b)
	ctx := context.Background()
	_, s, schema := benchStore(b, pool)
	syl := [...]string{"ka", "lo", "mi", "ne", "ru", "sa", "te", "vo", "bi", "pe", "ri", "da"}
	word := func(k, n int) string {
		var w strings.Builder
		for range n {
			w.WriteString(syl[k%len(syl)])
			k /= len(syl)
		}
		return w.String()
	}
	if err := s.CreateDefinition(ctx, storage.DefinitionRecord{Name: "p", Spec: json.RawMessage(`{}`), CreatedAt: time.Now()}); err != nil {
		b.Fatal(err)
	}
	const n, matches, page = 100_000, 100, 1_000
	var states []storage.ProjectionState
	var from int64
	for i := range n {
		text := word(i*7919%144, 2) + " " + word(i*104729%1728, 3) + " " + word(i%50, 3) + " c" + strconv.Itoa(i)
		if i%(n/matches) == 0 {
			text += " zanzibar"
		}
		states = append(states, storage.ProjectionState{Name: "p", InstanceID: fmt.Sprintf("i%06d", i),
			Data: json.RawMessage(`{"total":"12.50"}`), Position: from + 1, CreatedAt: time.Now(), UpdatedAt: time.Now(),
			Reference:  storage.Reference{Kind: storage.RefNumber, Number: float64(i % 977), Text: strconv.Itoa(i % 977)},
			SearchText: text})
		if len(states) == page {
			if err := s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: from, To: from + 1, States: states, Indexed: true}); err != nil {
				b.Fatal(err)
			}
			from++
			states = states[:0]
		}
	}
	table := pgx.Identifier{schema, "projection_states_rows"}.Sanitize() // under the view
	for _, state := range []struct{ name, sql string }{
		{"analyzed", "ANALYZE " + table},
		{"vacuumed", "VACUUM ANALYZE " + table},
	} {
		if _, err := pool.Exec(ctx, state.sql); err != nil {
			b.Fatal(err)
		}
		b.Run(state.name, func(b *testing.B) {
			for _, c := range []struct {
				name  string
				q     storage.ProjectionQuery
				total int64
			}{
				{"one-word", storage.ProjectionQuery{Name: "p", Search: []string{"zanz"}, Limit: 100}, matches},
				{"rare-and-common-word", storage.ProjectionQuery{Name: "p", Search: []string{"zanz", "ka"}, Limit: 100}, -1},
				{"sorted-by-reference", storage.ProjectionQuery{Name: "p", Search: []string{"zanzibar"}, Sort: storage.SortByReference, Descending: true, Limit: 100}, matches},
				{"count", storage.ProjectionQuery{Name: "p", Search: []string{"zanz"}}, matches},
			} {
				b.Run(c.name, func(b *testing.B) {
					for b.Loop() {
						list, err := s.ListProjections(ctx, c.q)
						if err != nil || (c.total >= 0 && list.Total != c.total) || (c.q.Limit > 0 && int64(len(list.States)) != list.Total) {
							b.Fatalf("search %q: %d states of %d, %v", c.q.Search, len(list.States), list.Total, err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/search")
				})
			}
		})
	}
}
