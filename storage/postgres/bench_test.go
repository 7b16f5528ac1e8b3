package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/benchfold"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/storagetest"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The benchmarks measure the Storage through eventstore.Store (what users
// see) next to the raw engine: the same rows written by plain INSERTs
// through pgx into an identical events table (same indexes), one
// autocommitted statement per save, so with the same durability (the
// server's synchronous_commit). Run them with
//
//	go test ./storage/postgres -run '^$' -bench 'Save|Load' -benchtime 3s
//
// The save benchmarks report the store's events/s, the raw engine's and
// their ratio (store/raw-%); the load benchmark has store and raw
// sub-benchmarks.

const benchData = `{"amount":"12.50","note":"benchmark event"}`

// benchPool returns a pool of its own with room for the concurrent
// benchmarks.
func benchPool(b *testing.B) *pgxpool.Pool {
	b.Helper()
	testPool(b)
	cfg, err := pgxpool.ParseConfig(databaseURL())
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// benchStore returns a Store on a fresh schema, and the Storage under it.
func benchStore(b *testing.B, pool *pgxpool.Pool) (*eventstore.Store, storage.Storage, string) {
	b.Helper()
	schema := newSchema(b)
	s, err := postgres.Open(context.Background(), pool, &postgres.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	store, err := eventstore.New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	return store, s, schema
}

// rawWriter inserts events straight into an events table (the rows under
// the store's view, with its indexes), numbering positions and sequences
// itself.
type rawWriter struct {
	pool   *pgxpool.Pool
	insert string
	pos    atomic.Int64
	mu     sync.Mutex
	seq    map[string]int64
}

func newRawWriter(b *testing.B, pool *pgxpool.Pool) *rawWriter {
	_, _, schema := benchStore(b, pool) // an identical, empty events table
	return &rawWriter{
		pool: pool,
		insert: `INSERT INTO ` + pgx.Identifier{schema}.Sanitize() + `.events_rows
(position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at, feed_sequence, tx, tenant) VALUES `,
		seq: make(map[string]int64),
	}
}

// save inserts n events into aggregate id in one autocommitted statement.
func (w *rawWriter) save(ctx context.Context, id string, n int) error {
	w.mu.Lock()
	seq := w.seq[id]
	w.seq[id] = seq + int64(n)
	w.mu.Unlock()
	sql := w.insert
	args := make([]any, 0, 8*n)
	now := time.Now().UTC()
	for k := range n {
		if k > 0 {
			sql += ","
		}
		j := len(args)
		sql += fmt.Sprintf("($%d,'acct',$%d,$%d,'Deposited',$%d,$%d,$%d,$%d,$%d,0,'"+postgres.DefaultTenant+"')", j+1, j+2, j+3, j+4, j+5, j+6, j+7, j+1)
		args = append(args, w.pos.Add(1), id, uuid.NewString(), []byte(benchData), seq+1, seq+int64(k)+1, now)
	}
	_, err := w.pool.Exec(ctx, sql, args...)
	return err
}

func newEvents(n int) []eventstore.NewEvent {
	events := make([]eventstore.NewEvent, n)
	for i := range events {
		events[i] = eventstore.NewEvent{ID: uuid.NewString(), Type: "Deposited", Data: []byte(benchData)}
	}
	return events
}

// runWriters runs saves number from..to-1 from writers goroutines and
// returns how long that took.
func runWriters(b *testing.B, writers, from, to int, save func(ctx context.Context, i int) error) time.Duration {
	ctx := context.Background()
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	start := time.Now()
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= to {
					return
				}
				if err := save(ctx, i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start)
}

// benchSaves runs b.N saves of perSave events from writers goroutines
// through the Store, and as many through the raw engine. The two alternate
// in rounds of about 100 ms, so that both see the same load of a shared
// machine; the ratio of their rates is reported as store/raw-%.
func benchSaves(b *testing.B, writers, perSave int) {
	pool := benchPool(b)
	store, _, _ := benchStore(b, pool)
	raw := newRawWriter(b, pool)
	storeSave := func(ctx context.Context, i int) error {
		_, err := store.Save(ctx, "acct", fmt.Sprint("a", i%1000), newEvents(perSave), nil)
		return err
	}
	rawSave := func(ctx context.Context, i int) error {
		return raw.save(ctx, fmt.Sprint("a", i%1000), perSave)
	}
	// Warm up both (connections, prepared statements).
	runWriters(b, writers, 0, 4*writers, storeSave)
	runWriters(b, writers, 0, 4*writers, rawSave)
	round := 25 * writers
	var storeTime, rawTime time.Duration
	b.ResetTimer()
	for from := 4 * writers; from < 4*writers+b.N; from += round {
		to := min(from+round, 4*writers+b.N)
		storeTime += runWriters(b, writers, from, to, storeSave)
		rawTime += runWriters(b, writers, from, to, rawSave)
	}
	b.StopTimer()
	storeRate := float64(b.N*perSave) / storeTime.Seconds()
	rawRate := float64(b.N*perSave) / rawTime.Seconds()
	b.ReportMetric(storeRate, "events/s")
	b.ReportMetric(rawRate, "raw-events/s")
	b.ReportMetric(100*storeRate/rawRate, "store/raw-%")
}

func BenchmarkSave1Writer(b *testing.B)          { benchSaves(b, 1, 1) }
func BenchmarkSave8Writers(b *testing.B)         { benchSaves(b, 8, 1) }
func BenchmarkSaveBatch10_1Writer(b *testing.B)  { benchSaves(b, 1, 10) }
func BenchmarkSaveBatch10_8Writers(b *testing.B) { benchSaves(b, 8, 10) }

// BenchmarkLoad1000 loads an aggregate of 1,000 events from a store that
// holds 10k or 1M other events (inserted in bulk), next to the raw query.
func BenchmarkLoad1000(b *testing.B) {
	pool := benchPool(b)
	for _, others := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			ctx := context.Background()
			store, _, schema := benchStore(b, pool)
			// The rows under the store's view, of its default tenant.
			table := pgx.Identifier{schema}.Sanitize() + ".events_rows"
			_, err := pool.Exec(ctx, `INSERT INTO `+table+`
SELECT g, 'acct', 'o' || ((g - 1) / 10), gen_random_uuid()::text, 'Deposited', convert_to($2, 'UTF8'),
       (g - 1) % 10 + 1, (g - 1) % 10 + 1, now(), g, NULL, 0, $3::uuid
FROM generate_series(1, $1::bigint) g`, others, benchData, postgres.DefaultTenant)
			if err != nil {
				b.Fatal(err)
			}
			_, err = pool.Exec(ctx, `INSERT INTO `+table+`
SELECT $1::bigint + g, 'acct', 'target', gen_random_uuid()::text, 'Deposited', convert_to($2, 'UTF8'), g, g, now(),
       $1::bigint + g, NULL, 0, $3::uuid
FROM generate_series(1, 1000) g`, others, benchData, postgres.DefaultTenant)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := pool.Exec(ctx, `ANALYZE `+table); err != nil {
				b.Fatal(err)
			}
			b.Run("store", func(b *testing.B) {
				for b.Loop() {
					agg, err := store.Load(ctx, "acct", "target")
					if err != nil || len(agg.Events) != 1000 {
						b.Fatalf("load: %d events, %v", len(agg.Events), err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/load")
			})
			b.Run("raw", func(b *testing.B) {
				type row struct {
					pos, version, seq int64
					typ, id, eid, et  string
					data              []byte
					at                time.Time
				}
				sql := `SELECT position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at
FROM ` + table + ` WHERE aggregate_type = $1 AND aggregate_id = $2 ORDER BY sequence`
				for b.Loop() {
					rows, _ := pool.Query(ctx, sql, "acct", "target")
					var out []row
					var r row
					_, err := pgx.ForEachRow(rows, []any{&r.pos, &r.typ, &r.id, &r.eid, &r.et, &r.data, &r.version, &r.seq, &r.at},
						func() error { out = append(out, r); return nil })
					if err != nil || len(out) != 1000 {
						b.Fatalf("raw load: %d rows, %v", len(out), err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/load")
			})
		})
	}
}

// BenchmarkSuite runs the backend-neutral benchmarks of storagetest, so the
// figures compare with those of the other backends.
func BenchmarkSuite(b *testing.B) {
	storagetest.RunBenchmarks(b, newStorage)
}

// BenchmarkRebuild1M rebuilds a projection (set, add, inc per event) from
// scratch over 1,000,000 stored events, inserted in bulk; each iteration
// creates a new definition and syncs it.
func BenchmarkRebuild1M(b *testing.B) {
	const events = 1_000_000
	st, _ := rebuildStore(b, events)
	storagetest.BenchmarkRebuild(b, st, "order", "Placed", events, false)
}

// BenchmarkRebuildInGo rebuilds over 100,000 stored events a projection
// in Go (typed: benchfold.Typed; hook: storagetest.RebuildCode on the
// root package's hook alone) and the same fold in the function
// language, alternating in one run, and reports their ratio
// (go/functions-x).
func BenchmarkRebuildInGo(b *testing.B) {
	const events = 100_000
	_, s := rebuildStore(b, events)
	benchfold.RebuildInGo(b, s, events, false)
}

// rebuildStore returns a Store on a fresh schema holding events of type
// Placed in feed order, 100 per aggregate, inserted in bulk, and its
// storage.
func rebuildStore(b *testing.B, events int) (*eventstore.Store, storage.Storage) {
	ctx := context.Background()
	pool := benchPool(b)
	store, s, schema := benchStore(b, pool)
	table := pgx.Identifier{schema}.Sanitize() + ".events_rows" // of the default tenant
	_, err := pool.Exec(ctx, `INSERT INTO `+table+`
SELECT g, 'order', 'o' || ((g - 1) / 100), gen_random_uuid()::text, 'Placed',
       convert_to('{"total": 12.5, "sku": "A-1"}', 'UTF8'), (g - 1) % 100 + 1, (g - 1) % 100 + 1, now(), g, NULL, 0, $2::uuid
FROM generate_series(1, $1::bigint) g`, events, postgres.DefaultTenant)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE `+table); err != nil {
		b.Fatal(err)
	}
	return store, s
}

// appendRequest returns a request of n new events for aggregate id.
func appendRequest(id string, n int) storage.AppendRequest {
	now := time.Now().UTC().Truncate(time.Microsecond)
	req := storage.AppendRequest{AggregateType: "acct", AggregateID: id, Events: make([]storage.Event, n)}
	for i := range req.Events {
		req.Events[i] = storage.Event{ID: uuid.NewString(), Type: "Deposited", Data: []byte(benchData), RecordedAt: now}
	}
	return req
}

// BenchmarkAppendAll10x10 writes 10 aggregates × 10 events with one
// AppendAll, next to the same 10 batches written by 10 Appends one after
// the other (one writer), alternating in rounds so that both see the same
// load. It reports the events/s of both and their ratio (all/separate-x).
func BenchmarkAppendAll10x10(b *testing.B) {
	const aggregates, events = 10, 10
	ctx := context.Background()
	pool := benchPool(b)
	_, s, _ := benchStore(b, pool)
	round := func(i int) []storage.AppendRequest {
		reqs := make([]storage.AppendRequest, aggregates)
		for k := range reqs {
			reqs[k] = appendRequest(fmt.Sprint("a", (i*aggregates+k)%1000), events)
		}
		return reqs
	}
	all := func(i int) time.Duration {
		reqs := round(i)
		start := time.Now()
		if _, err := s.AppendAll(ctx, reqs); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	separate := func(i int) time.Duration {
		reqs := round(i)
		start := time.Now()
		for _, r := range reqs {
			if _, err := s.Append(ctx, r); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	for i := range 4 { // warm up
		all(i)
		separate(i)
	}
	var allTime, separateTime time.Duration
	b.ResetTimer()
	for i := range b.N {
		allTime += all(i)
		separateTime += separate(i)
	}
	b.StopTimer()
	n := float64(b.N * aggregates * events)
	b.ReportMetric(n/allTime.Seconds(), "all-events/s")
	b.ReportMetric(n/separateTime.Seconds(), "separate-events/s")
	b.ReportMetric(separateTime.Seconds()/allTime.Seconds(), "all/separate-x")
}

// BenchmarkListProjections lists 100 instances sorted by reference (from
// the start, and after skipping 1,000), counts all instances, and counts
// those with a text reference from "8" on (a sixth of them), of a
// projection of 10k or 100k instances (inserted in bulk: a third with a
// number reference, a third with a text, a third without), next to 10k
// instances of another projection.
func BenchmarkListProjections(b *testing.B) {
	pool := benchPool(b)
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) {
			ctx := context.Background()
			_, s, schema := benchStore(b, pool)
			q := pgx.Identifier{schema}.Sanitize()
			for _, sql := range []string{
				// The rows under the store's views, of its default tenant.
				`INSERT INTO ` + q + `.definitions_rows (tenant, name, spec, created_at, instances)
VALUES ('` + postgres.DefaultTenant + `', 'p', '{}', now(), $1), ('` + postgres.DefaultTenant + `', 'other', '{}', now(), 10000)`,
				`INSERT INTO ` + q + `.projection_states_rows (tenant, name, instance_id, data, position, created_at, updated_at, ref_rank, ref_num, ref_text, ref_number)
SELECT '` + postgres.DefaultTenant + `', 'p', 'i' || g, '{"total":12.5}', g, now() - g * interval '1 s', now(), g % 3,
       CASE WHEN g % 3 = 0 THEN (g * 7919) % 100003 ELSE 0 END,
       CASE WHEN g % 3 = 1 THEN md5(g::text) ELSE '' END,
       CASE WHEN g % 3 = 0 THEN ((g * 7919) % 100003)::text END
FROM generate_series(1, $1::bigint) g`,
				`INSERT INTO ` + q + `.projection_states_rows (tenant, name, instance_id, data, position, created_at, updated_at)
SELECT '` + postgres.DefaultTenant + `', 'other', 'i' || g, '{}', g, now(), now() FROM generate_series(1, 10000) g WHERE $1::bigint > 0`,
				// As autovacuum leaves it: statistics and the visibility map
				// (for index-only scans) up to date.
				`VACUUM ANALYZE ` + q + `.projection_states_rows`,
			} {
				var args []any
				if strings.Contains(sql, "$1") {
					args = append(args, n)
				}
				if _, err := pool.Exec(ctx, sql, args...); err != nil {
					b.Fatal(err)
				}
			}
			for _, skip := range []int{0, 1000} {
				b.Run(fmt.Sprintf("sorted-by-reference/skip=%d", skip), func(b *testing.B) {
					query := storage.ProjectionQuery{Name: "p", Sort: storage.SortByReference, Skip: skip, Limit: 100}
					for b.Loop() {
						list, err := s.ListProjections(ctx, query)
						if err != nil || len(list.States) != 100 || list.Total != int64(n) {
							b.Fatalf("list: %d states of %d, %v", len(list.States), list.Total, err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/list")
				})
			}
			b.Run("count", func(b *testing.B) {
				for b.Loop() {
					list, err := s.ListProjections(ctx, storage.ProjectionQuery{Name: "p"})
					if err != nil || list.Total != int64(n) {
						b.Fatalf("count: %d, %v", list.Total, err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/count")
			})
			b.Run("count-text-range", func(b *testing.B) {
				query := storage.ProjectionQuery{Name: "p", From: storage.Reference{Kind: storage.RefText, Text: "8"}}
				for b.Loop() {
					if _, err := s.ListProjections(ctx, query); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/count")
			})
		})
	}
}
