package postgres

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDatedFeedPlansUseIndexes checks that PostgreSQL serves a read of
// one hour of a 200,000-event feed by date from the indexes on
// recorded_at, looking at about the hour's events only, for windows at the
// start, middle and end of the feed, on the feed of all types and on a
// type's feed.
func TestDatedFeedPlansUseIndexes(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	// Event g is recorded at g × 3.6 s, minus up to 4 s: 1,000 an hour,
	// not rising with the position; types t0 and t1 alternate.
	_, err := s.pool.Exec(ctx, qualify(s.schema, inDefaultTenant+`
INSERT INTO {{schema}}.events (position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at, feed_sequence, tx)
SELECT g, 't' || (g % 2), 'a' || g, 'e' || g, 'Happened', '{"n":1}', 1, 1,
       timestamptz '2026-01-01 00:00:00+00' + (g * 3600 - (g % 3) * 2000) * interval '1 ms', g / 2 + 1, 0
FROM generate_series(1, 200000) g;
ANALYZE {{schema}}.events_rows;`))
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	removed := regexp.MustCompile(`(?:Rows Removed by Filter|rows)=?:? ?(\d+)`)
	for _, hour := range []int{1, 100, 198} {
		from, to := base.Add(time.Duration(hour)*time.Hour), base.Add(time.Duration(hour+1)*time.Hour-time.Microsecond)
		for _, c := range []struct {
			name, sql string
			args      []any
		}{
			{"all types", s.sql.feedDated, []any{int64(0), 1000, pgTime(from.UnixMicro()), pgTime(to.UnixMicro())}},
			{"type t1", s.sql.feedTypeDated, []any{int64(0), 1000, pgTime(from.UnixMicro()), pgTime(to.UnixMicro()), "t1", int64(0)}},
			{"type t1 after a feed sequence", s.sql.feedTypeDated, []any{int64(0), 1000, pgTime(from.UnixMicro()), pgTime(to.UnixMicro()), "t1", int64(50)}},
		} {
			// After the watermark statement, as ReadFeed runs it.
			rows, br, err := s.queryWM(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) "+c.sql, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, line)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if err := br.Close(); err != nil {
				t.Fatal(err)
			}
			text := strings.Join(plan, "\n")
			most := 0
			for _, m := range removed.FindAllStringSubmatch(text, -1) {
				n, _ := strconv.Atoi(m[1])
				most = max(most, n)
			}
			if strings.Contains(text, "Seq Scan") || !strings.Contains(text, "_recorded") || most > 5000 {
				t.Errorf("hour %d, %s: the plan does not read the hour through the recorded_at index (at most %d rows at a step):\n%s", hour, c.name, most, text)
			}
			if testing.Verbose() && hour == 198 {
				t.Logf("hour %d, %s:\n%s", hour, c.name, text)
			}
		}
	}
}
