package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/benchfold"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/eventkit-go/eventstore/storage/storagetest"
	"github.com/google/uuid"
)

// The benchmarks measure the Storage through eventstore.Store (what users
// see) next to the raw engine in the same run: the same rows written by a
// plain INSERT loop through the same driver, into an identical events table
// (same indexes), with the same pragmas (WAL, synchronous=FULL) and one
// write connection, one transaction per save. Run them with
//
//	go test ./storage/sqlite -run '^$' -bench . -benchtime 2s
//
// and compare the events/s (or ms/load) of each store/raw pair.

const benchData = `{"amount":"12.50","currency":"EUR","note":"benchmark event"}`

// benchStore returns a Store on a new file, closed when b ends.
func benchStore(b *testing.B) (*eventstore.Store, string) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "es.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	store, err := eventstore.New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	return store, path
}

// rawDB opens path (whose schema exists) through the driver with the
// Storage's settings and a single connection, like the Storage's writer.
func rawDB(b *testing.B, path string) *sql.DB {
	b.Helper()
	db, err := sql.Open("sqlite", sqlite.DSN(path, 5*time.Second)+"&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// rawWriter inserts events straight into an events table, numbering
// sequences itself; positions are the table's rowid, as in the Storage.
type rawWriter struct {
	db     *sql.DB
	insert *sql.Stmt
	mu     sync.Mutex
	seq    map[string]int64
}

func newRawWriter(b *testing.B) *rawWriter {
	path := filepath.Join(b.TempDir(), "raw.db")
	s, err := sqlite.Open(path, nil) // an identical, empty schema
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	db := rawDB(b, path)
	insert, err := db.Prepare(`INSERT INTO events
		(aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at)
		VALUES ('acct', ?, ?, 'Deposited', ?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = insert.Close() })
	return &rawWriter{db: db, insert: insert, seq: make(map[string]int64)}
}

// save inserts n events into aggregate id in one transaction.
func (w *rawWriter) save(ctx context.Context, id string, n int) error {
	w.mu.Lock()
	seq := w.seq[id]
	w.seq[id] = seq + int64(n)
	w.mu.Unlock()
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt := tx.StmtContext(ctx, w.insert)
	now := time.Now().UnixMicro()
	for k := range n {
		if _, err := stmt.ExecContext(ctx, id, uuid.NewString(), []byte(benchData), seq+1, seq+int64(k)+1, now); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func newEvents(n int) []eventstore.NewEvent {
	events := make([]eventstore.NewEvent, n)
	for i := range events {
		events[i] = eventstore.NewEvent{ID: uuid.NewString(), Type: "Deposited", Data: []byte(benchData)}
	}
	return events
}

// runWriters runs b.N saves of perSave events from writers goroutines and
// reports events/s.
func runWriters(b *testing.B, writers, perSave int, save func(ctx context.Context, i int) error) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range writers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
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
	b.StopTimer()
	b.ReportMetric(float64(b.N*perSave)/b.Elapsed().Seconds(), "events/s")
}

func benchSaves(b *testing.B, writers, perSave int) {
	b.Run("store", func(b *testing.B) {
		store, _ := benchStore(b)
		runWriters(b, writers, perSave, func(ctx context.Context, i int) error {
			_, err := store.Save(ctx, "acct", fmt.Sprint("a", i%1000), newEvents(perSave), nil)
			return err
		})
	})
	b.Run("raw", func(b *testing.B) {
		w := newRawWriter(b)
		runWriters(b, writers, perSave, func(ctx context.Context, i int) error {
			return w.save(ctx, fmt.Sprint("a", i%1000), perSave)
		})
	})
}

// BenchmarkSave1Writer: one writer, one event per save.
func BenchmarkSave1Writer(b *testing.B) { benchSaves(b, 1, 1) }

// BenchmarkSave32Writers: 32 concurrent writers, one event per save; the
// store commits them in groups.
func BenchmarkSave32Writers(b *testing.B) { benchSaves(b, 32, 1) }

// BenchmarkSaveBatch10_1Writer: one writer, ten events per save.
func BenchmarkSaveBatch10_1Writer(b *testing.B) { benchSaves(b, 1, 10) }

// BenchmarkSaveBatch10_32Writers: 32 writers, ten events per save.
func BenchmarkSaveBatch10_32Writers(b *testing.B) { benchSaves(b, 32, 10) }

// bulkInsert fills the events table of path with others events of 10-event
// aggregates "o<k>" and a 1,000-event aggregate "target", in one
// transaction, by a recursive CTE.
func bulkInsert(b *testing.B, path string, others int) {
	b.Helper()
	db := rawDB(b, path)
	tx, err := db.Begin()
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	now := time.Now().UnixMicro()
	// Every event is a batch of its own: its feed sequence is its position.
	_, err = tx.Exec(`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?1)
		INSERT INTO events (aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at, feed_sequence)
		SELECT 'acct', 'o' || ((n - 1) / 10), printf('%08x-0000-4000-8000-000000000000', n), 'Deposited', ?2,
		       (n - 1) % 10 + 1, (n - 1) % 10 + 1, ?3, n
		FROM g`, others, []byte(benchData), now)
	if err != nil {
		b.Fatal(err)
	}
	_, err = tx.Exec(`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 1000)
		INSERT INTO events (aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at, feed_sequence)
		SELECT 'acct', 'target', printf('%08x-0000-4000-8000-00000000ffff', n), 'Deposited', ?1, n, n, ?2, ?3 + n
		FROM g`, []byte(benchData), now, others)
	if err != nil {
		b.Fatal(err)
	}
	_, err = tx.Exec(`INSERT INTO feeds (aggregate_type, feed_sequence, aggregates, batches, events)
		VALUES ('acct', ?1 + 1000, ?1 / 10 + 1, ?1 + 1000, ?1 + 1000)`, others)
	if err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`ANALYZE`); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkLoad1000 loads an aggregate of 1,000 events from a store that
// holds 10k or 1M other events (inserted in bulk), next to the raw query.
func BenchmarkLoad1000(b *testing.B) {
	for _, others := range []int{10_000, 1_000_000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			ctx := context.Background()
			path := filepath.Join(b.TempDir(), "es.db")
			s, err := sqlite.Open(path, nil)
			if err != nil {
				b.Fatal(err)
			}
			s.Close()
			start := time.Now()
			bulkInsert(b, path, others)
			b.Logf("inserted %d events in %v", others+1000, time.Since(start).Round(time.Millisecond))
			s, err = sqlite.Open(path, nil)
			if err != nil {
				b.Fatal(err)
			}
			store, err := eventstore.New(s, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = store.Close() })
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
				db := rawDB(b, path)
				type row struct {
					pos, version, seq, at int64
					eid, et               string
					data                  []byte
				}
				q, err := db.Prepare(`SELECT event_id, event_type, data, version, sequence, position, recorded_at
					FROM events WHERE aggregate_type = ? AND aggregate_id = ? ORDER BY sequence`)
				if err != nil {
					b.Fatal(err)
				}
				defer q.Close()
				for b.Loop() {
					rows, err := q.Query("acct", "target")
					if err != nil {
						b.Fatal(err)
					}
					var out []row
					for rows.Next() {
						var r row
						if err := rows.Scan(&r.eid, &r.et, &r.data, &r.version, &r.seq, &r.pos, &r.at); err != nil {
							b.Fatal(err)
						}
						out = append(out, r)
					}
					if err := rows.Close(); err != nil || len(out) != 1000 {
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
	storagetest.RunBenchmarks(b, func(tb testing.TB) storage.Storage { return openTemp(tb) })
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

// rebuildStore returns a Store on a new database holding events of type
// Placed in feed order, 100 per aggregate, inserted in bulk, and its
// storage.
func rebuildStore(b *testing.B, events int) (*eventstore.Store, storage.Storage) {
	path := filepath.Join(b.TempDir(), "es.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	db := rawDB(b, path)
	_, err = db.Exec(`WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < ?1)
		INSERT INTO events (aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at, feed_sequence)
		SELECT 'order', 'o' || ((n - 1) / 100), printf('%08x-0000-4000-8000-000000000000', n), 'Placed',
		       CAST('{"total": 12.5, "sku": "A-1"}' AS BLOB), (n - 1) % 100 + 1, (n - 1) % 100 + 1, ?2, n
		FROM g`, events, time.Now().UnixMicro())
	if err != nil {
		b.Fatal(err)
	}
	_, err = db.Exec(`INSERT INTO feeds (aggregate_type, feed_sequence, aggregates, batches, events)
		VALUES ('order', ?1, ?1 / 100, ?1, ?1)`, events)
	if err != nil {
		b.Fatal(err)
	}
	db.Close()
	s, err = sqlite.Open(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	store, err := eventstore.New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	return store, s
}

// The machine's fsync latency drifts, so figures of sub-benchmarks run one
// after the other compare badly. The interleaved benchmarks below alternate
// the two sides within each iteration and report their ratio.

// BenchmarkInterleaved1Writer alternates one store save and one raw save of
// perSave events, from one goroutine; reports both rates and store/raw in %.
func BenchmarkInterleaved1Writer(b *testing.B) {
	swapped := os.Getenv("SWAP") != ""
	for _, perSave := range []int{1, 10} {
		b.Run(fmt.Sprintf("events=%d", perSave), func(b *testing.B) {
			ctx := context.Background()
			store, _ := benchStore(b)
			raw := newRawWriter(b)
			var storeTime, rawTime time.Duration
			i := 0
			for b.Loop() {
				id := fmt.Sprint("a", i%1000)
				i++
				if swapped {
					t0 := time.Now()
					if err := raw.save(ctx, id, perSave); err != nil {
						b.Fatal(err)
					}
					rawTime += time.Since(t0)
				}
				t0 := time.Now()
				if _, err := store.Save(ctx, "acct", id, newEvents(perSave), nil); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				storeTime += t1.Sub(t0)
				if !swapped {
					if err := raw.save(ctx, id, perSave); err != nil {
						b.Fatal(err)
					}
					rawTime += time.Since(t1)
				}
			}
			events := float64(b.N * perSave)
			b.ReportMetric(events/storeTime.Seconds(), "store-events/s")
			b.ReportMetric(events/rawTime.Seconds(), "raw-events/s")
			b.ReportMetric(100*rawTime.Seconds()/storeTime.Seconds(), "store/raw-%")
		})
	}
}

// BenchmarkInterleavedGroupCommit alternates, on one store, 50 saves of one
// event by one writer and 800 saves of one event by 32 concurrent writers;
// reports both rates and their ratio (the gain of group commit).
func BenchmarkInterleavedGroupCommit(b *testing.B) {
	const single, concurrent, writers = 50, 800, 32
	ctx := context.Background()
	store, _ := benchStore(b)
	save := func(i int) {
		if _, err := store.Save(ctx, "acct", fmt.Sprint("a", i%1000), newEvents(1), nil); err != nil {
			b.Error(err)
		}
	}
	var oneTime, manyTime time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		for range single {
			save(i)
			i++
		}
		t1 := time.Now()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for k := next.Add(1); k <= concurrent; k = next.Add(1) {
					save(i + int(k))
				}
			})
		}
		wg.Wait()
		i += concurrent
		oneTime += t1.Sub(t0)
		manyTime += time.Since(t1)
	}
	one := float64(b.N*single) / oneTime.Seconds()
	many := float64(b.N*concurrent) / manyTime.Seconds()
	b.ReportMetric(one, "1writer-events/s")
	b.ReportMetric(many, "32writers-events/s")
	b.ReportMetric(many/one, "gain-x")
}
