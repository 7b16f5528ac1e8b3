package postgres

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// BenchmarkStatementCost measures what one single-event save costs the
// server, statement by statement, next to a raw autocommitted INSERT of the
// same row into the same table: the append statements the Storage runs
// (each after the append lock, in one implicit transaction, as runGroup
// sends them) and variants that drop one guarantee each, which the Storage
// cannot drop, to show where the cost lies. All run on one connection, one
// save of each in turn, so the load of a shared machine falls on all alike.
// It reports, per variant, the server CPU (from /proc/<pid>/schedstat of
// the connection's backend, so the server must run on this machine) and the
// wall time per save, each as a multiple of raw's:
//
//	go test ./storage/postgres -run '^$' -bench StatementCost -benchtime 3000x
//
// The variants: appendOne (arrays, as for a batch of several events; the
// Storage used it for single events too before appendSingle and
// appendLean), appendSingle (scalar arguments; decides refusals),
// appendLean (what a lone writer's save runs: the INSERT and its NOTIFY,
// no refusal rows), the INSERT alone (lean), then lean without the
// deletion marks' look-ups (noMarks),
// without any head look-up (noHeads: positions and FeedSequences from the
// client, so no global order across processes) and without the version
// look-up (noVersion: no optimistic concurrency).
func BenchmarkStatementCost(b *testing.B) {
	ctx := context.Background()
	s, schema := openBatchTestSchema(b)
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	pid := conn.PgConn().PID()
	if _, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid)); err != nil {
		b.Skipf("server CPU not readable (%v): the server must run on this machine", err)
	}
	data := []byte(`{"amount":"12.50","note":"benchmark event"}`)
	now := time.Now().UTC()
	// The statements measured number positions from the table, as
	// appends did before the sequence of positions (schema version 6).
	headSQL := `greatest((SELECT coalesce(max(position), 0) FROM {{schema}}.events),
	coalesce((SELECT mark FROM {{schema}}.deleted_marks WHERE feed = ''), 0))`
	typeHeadSQL := func(typ string) string {
		return `greatest((SELECT coalesce(max(feed_sequence), 0) FROM {{schema}}.events WHERE aggregate_type = ` + typ + `),
	coalesce((SELECT mark FROM {{schema}}.deleted_marks WHERE feed = ` + typ + `), 0))`
	}
	lean := func(head, typeHead, version string) string {
		return qualify(schema, `INSERT INTO {{schema}}.events (`+eventCols+`)
SELECT `+head+` + 1, $1, $2, $3, $4, $5, cur.v + 1, cur.s + 1, $6, `+typeHead+` + 1, NULL, 0, NULL
FROM `+version+` cur
WHERE $7::bigint IS NULL OR $7::bigint = cur.v
RETURNING position`)
	}
	version := `(SELECT coalesce(max(version), 0) AS v, coalesce(max(sequence), 0) AS s FROM (
	SELECT version, sequence FROM {{schema}}.events WHERE aggregate_type = $1 AND aggregate_id = $2
	ORDER BY sequence DESC LIMIT 1) l)`
	leanSQL := lean(headSQL, typeHeadSQL("$1"), version)
	noMarks := lean(`(SELECT coalesce(max(position), 0) FROM {{schema}}.events)`,
		`(SELECT coalesce(max(feed_sequence), 0) FROM {{schema}}.events WHERE aggregate_type = $1)`, version)
	noHeads := lean(`$8::bigint`, `$8::bigint`, version)
	noVersion := lean(headSQL, typeHeadSQL("$1"), `(SELECT $8::bigint AS v, $8::bigint AS s)`)
	rawSQL := qualify(schema, `INSERT INTO {{schema}}.events_rows
(position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at, feed_sequence, tx, tenant)
VALUES ($1, 'raw', $2, $3, 'Deposited', $4, $5, $5, $6, $1, 0, '`+DefaultTenant+`')`)

	// Raw and noHeads number their rows below zero, out of the way of
	// the others' max(position).
	var rawPos, clientPos int64
	rawSeq := map[string]int64{}
	// The statements of this package read the reserved block from
	// eventstore.base (schema version 6); the others ignore it.
	locked := func(sql string, args ...any) error {
		batch := &pgx.Batch{}
		batch.Queue("SELECT pg_advisory_xact_lock($1)", s.appendKey)
		batch.Queue(setTenantSQL, s.tenant)
		batch.Queue(`SELECT set_config('eventstore.base', (nextval(` + quoteLiteral(schema+".positions") + `) - 1)::text, true)`)
		batch.Queue(sql, args...)
		return conn.SendBatch(ctx, batch).Close()
	}
	variants := []struct {
		name string
		save func(agg string) error
	}{
		{"raw", func(agg string) error {
			rawPos--
			rawSeq[agg]++
			_, err := conn.Exec(ctx, rawSQL, rawPos, agg, uuid.NewString(), data, rawSeq[agg], now)
			return err
		}},
		{"appendOne", func(agg string) error {
			return locked(s.sql.appendOne, "one", agg, nil, []string{uuid.NewString()}, []string{"Deposited"},
				[][]byte{data}, []time.Time{now}, nil, false, false, int64(0), nil)
		}},
		{"appendSingle", func(agg string) error {
			return locked(s.sql.appendSingle, "single", agg, nil, uuid.NewString(), "Deposited", data, now, nil, false, false, int64(0), nil)
		}},
		{"appendLean", func(agg string) error {
			return locked(s.sql.appendLean, "appendlean", agg, uuid.NewString(), "Deposited", data, now, nil, nil, nil)
		}},
		{"lean", func(agg string) error {
			return locked(leanSQL, "lean", agg, uuid.NewString(), "Deposited", data, now, nil)
		}},
		{"noMarks", func(agg string) error {
			return locked(noMarks, "nomarks", agg, uuid.NewString(), "Deposited", data, now, nil)
		}},
		{"noHeads", func(agg string) error {
			clientPos--
			return locked(noHeads, "noheads", agg, uuid.NewString(), "Deposited", data, now, nil, clientPos-1<<40)
		}},
		{"noVersion", func(agg string) error {
			clientPos--
			return locked(noVersion, "noversion", agg, uuid.NewString(), "Deposited", data, now, nil, clientPos)
		}},
	}
	cpu := make([]time.Duration, len(variants))
	wall := make([]time.Duration, len(variants))
	warm := 50
	b.ResetTimer()
	for i := -warm; i < b.N; i++ {
		agg := "a" + strconv.Itoa((i+warm)%1000)
		for j, v := range variants {
			c0, w0 := schedNS(b, pid), time.Now()
			if err := v.save(agg); err != nil {
				b.Fatalf("%s: %v", v.name, err)
			}
			if i >= 0 {
				wall[j] += time.Since(w0)
				cpu[j] += time.Duration(schedNS(b, pid) - c0)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu[0].Microseconds())/float64(b.N), "raw-cpu-us")
	for j, v := range variants[1:] {
		b.ReportMetric(float64(cpu[j+1])/float64(cpu[0]), v.name+"-cpu-x")
		b.ReportMetric(float64(wall[j+1])/float64(wall[0]), v.name+"-wall-x")
	}
}

// schedNS returns the CPU time process pid has used, in nanoseconds.
func schedNS(b *testing.B, pid uint32) int64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	if err != nil {
		b.Fatal(err)
	}
	ns, err := strconv.ParseInt(strings.Fields(string(stat))[0], 10, 64)
	if err != nil {
		b.Fatalf("cannot read /proc/%d/schedstat: %q", pid, stat)
	}
	return ns
}
