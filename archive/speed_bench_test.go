package archive_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/archive"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// BenchmarkSpeed measures Export and Import against the backend's own bulk
// path, alternating ours and the baseline in each round (docs/performance.md,
// "Archives"):
//
//	ARCHIVE_BENCH_EVENTS=200000 go test -run '^$' -bench Speed -benchtime 1x -timeout 80m ./archive
//
// (ARCHIVE_BENCH_KINDS=sqlite or postgres measures one backend.)
//
// Export: ours writes the whole store as an archive file; the baseline
// reads every row of the events table in position order with a plain
// SELECT through the same driver (and, on SQLite, copies the database
// file). Import: ours reads that archive into a fresh store; the baseline
// inserts the same number of rows of the same shape into a fresh store's
// events table with plain INSERTs in transactions of 10,000 rows (SQLite)
// or COPY (PostgreSQL). It reports the rates, the ratios ours/baseline and
// the peak heap in use during ours (sampled every 5 ms), which stays flat
// in the store's size. Events come 2 a batch, 10 batches an aggregate.
func BenchmarkSpeed(b *testing.B) {
	n := 200_000
	if s := os.Getenv("ARCHIVE_BENCH_EVENTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1000 {
			b.Fatalf("ARCHIVE_BENCH_EVENTS=%q: want a number of at least 1000", s)
		}
	}
	rounds := 2
	kinds := []string{"sqlite", "postgres"}
	if s := os.Getenv("ARCHIVE_BENCH_KINDS"); s != "" { // such as "sqlite"
		kinds = strings.Split(s, ",")
	}
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			for range b.N {
				speed(b, kind, n, rounds)
			}
		})
	}
}

// speedStore is a store of the benchmark and what its baseline needs.
type speedStore struct {
	st     *eventstore.Store
	path   string    // SQLite
	schema string    // PostgreSQL
	conn   *pgx.Conn // PostgreSQL
}

func openSpeedStore(b *testing.B, kind, name string) speedStore {
	b.Helper()
	ctx := context.Background()
	if kind == "sqlite" {
		path := filepath.Join(b.TempDir(), name+".db")
		s, err := sqlite.Open(path, nil)
		return speedStore{st: benchStore(b, s, err), path: path}
	}
	url := postgresURL()
	schema := fmt.Sprintf("es_archive_speed_%d_%s_%d", os.Getpid(), name, schemas.Add(1))
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = conn.Close(context.Background())
	})
	// The tables are the tenants' (schema version 8): the raw reads and
	// writes are the default tenant's, as the Storage's.
	if _, err := conn.Exec(ctx, `SELECT set_config('eventstore.tenant', $1, false)`, postgres.DefaultTenant); err != nil {
		b.Fatal(err)
	}
	s, err := postgres.OpenURL(ctx, url, &postgres.Options{Schema: schema})
	return speedStore{st: benchStore(b, s, err), schema: schema, conn: conn}
}

// benchStore returns a Store on s, opened with err, closed at the end.
func benchStore(b *testing.B, s storage.Storage, err error) *eventstore.Store {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	st, err := eventstore.New(s, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

const speedData = `{"amount":"12.50","currency":"EUR","customer":"c-1234","note":"a line of text"}`

// fillSpeed saves n events, 2 a batch, 10 batches an aggregate, with
// SaveImported in groups of 500 batches.
func fillSpeed(b *testing.B, st *eventstore.Store, n int) {
	ctx := context.Background()
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var group []eventstore.ImportedBatch
	for i := 0; i < n/2; i++ {
		agg, v := i/10, int64(i%10)
		group = append(group, eventstore.ImportedBatch{AggregateType: []string{"order", "invoice"}[agg%2],
			AggregateID: "a-" + strconv.Itoa(agg), ExpectedVersion: eventstore.ExpectVersion(v), RecordedAt: at.Add(time.Duration(i) * time.Millisecond),
			Events: []eventstore.NewEvent{{ID: uuid.NewString(), Type: "Placed", Data: []byte(speedData)}, {ID: uuid.NewString(), Type: "Priced", Data: []byte(speedData)}}})
		// One batch of an aggregate per group: a group holds 500 aggregates' batch v.
		if len(group) == 500 || i == n/2-1 {
			// Batches of one aggregate are consecutive; regroup by version.
			if _, err := saveGroup(ctx, st, group); err != nil {
				b.Fatal(err)
			}
			group = group[:0]
		}
	}
}

// saveGroup saves a group whose batches may repeat aggregates, as runs of
// distinct ones.
func saveGroup(ctx context.Context, st *eventstore.Store, group []eventstore.ImportedBatch) (int, error) {
	sort.SliceStable(group, func(i, j int) bool {
		vi, _ := group[i].ExpectedVersion.Version()
		vj, _ := group[j].ExpectedVersion.Version()
		return vi < vj
	})
	saved := 0
	for start := 0; start < len(group); {
		v0, _ := group[start].ExpectedVersion.Version()
		end := start
		for end < len(group) {
			if v, _ := group[end].ExpectedVersion.Version(); v != v0 {
				break
			}
			end++
		}
		if _, err := st.SaveImported(ctx, group[start:end]); err != nil {
			return saved, err
		}
		saved += end - start
		start = end
	}
	return saved, nil
}

// peakHeap runs fn and returns the peak HeapInuse seen while it ran.
func peakHeap(fn func()) uint64 {
	runtime.GC()
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var m runtime.MemStats
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(done)
	return peak.Load()
}

func speed(b *testing.B, kind string, n, rounds int) {
	ctx := context.Background()
	src := openSpeedStore(b, kind, "src")
	start := time.Now()
	fillSpeed(b, src.st, n)
	b.Logf("%s: filled %d events in %s", kind, n, time.Since(start).Round(time.Millisecond))
	file := filepath.Join(b.TempDir(), "store.archive")
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	var oursExp, rawExp, copyExp, oursImp, rawImp []float64
	var heapExp, heapImp uint64
	for r := range rounds {
		// Export: ours, then the baseline.
		var took time.Duration
		heap := peakHeap(func() {
			f, err := os.Create(file)
			if err != nil {
				b.Fatal(err)
			}
			t0 := time.Now()
			if _, err := archive.Export(ctx, src.st, archive.NewWriter(f), 0); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
			took = time.Since(t0)
		})
		heapExp = max(heapExp, heap)
		oursExp = append(oursExp, rate(took))
		rawExp = append(rawExp, rate(rawRead(b, kind, src, n)))
		if kind == "sqlite" {
			copyExp = append(copyExp, rate(fileCopy(b, src.path)))
		}
		// Import: ours into a fresh store, then the baseline into another.
		dst := openSpeedStore(b, kind, fmt.Sprint("dst", r))
		heap = peakHeap(func() {
			f, err := os.Open(file)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			t0 := time.Now()
			stats, err := archive.Import(ctx, dst.st, archive.NewReader(f))
			if err != nil || stats.Events != int64(n) {
				b.Fatalf("import: %v, %d events", err, stats.Events)
			}
			took = time.Since(t0)
		})
		heapImp = max(heapImp, heap)
		oursImp = append(oursImp, rate(took))
		raw := openSpeedStore(b, kind, fmt.Sprint("raw", r))
		rawImp = append(rawImp, rate(rawInsert(b, kind, raw, n)))
		_ = dst.st.Close()
		_ = raw.st.Close()
	}
	med := func(xs []float64) float64 {
		s := append([]float64(nil), xs...)
		sort.Float64s(s)
		return s[len(s)/2]
	}
	b.Logf("%s, %d events, %d rounds (medians):", kind, n, rounds)
	b.Logf("  export: ours %.0f events/s, raw SELECT %.0f events/s, ours/raw %.2f; peak heap %.1f MiB", med(oursExp), med(rawExp), med(oursExp)/med(rawExp), float64(heapExp)/(1<<20))
	if len(copyExp) > 0 {
		b.Logf("  export: file copy %.0f events/s, ours/copy %.2f", med(copyExp), med(oursExp)/med(copyExp))
	}
	b.Logf("  import: ours %.0f events/s, raw inserts %.0f events/s, ours/raw %.2f; peak heap %.1f MiB", med(oursImp), med(rawImp), med(oursImp)/med(rawImp), float64(heapImp)/(1<<20))
	b.ReportMetric(med(oursExp)/med(rawExp), "export/raw")
	b.ReportMetric(med(oursImp)/med(rawImp), "import/raw")
	b.ReportMetric(float64(heapImp)/(1<<20), "import-heap-MiB")
}

// rawRead reads every row of the events table in position order.
func rawRead(b *testing.B, kind string, s speedStore, n int) time.Duration {
	ctx := context.Background()
	const cols = `position, aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at`
	t0 := time.Now()
	rows := 0
	if kind == "sqlite" {
		db, err := sql.Open("sqlite", sqlite.DSN(s.path, 5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		t0 = time.Now()
		rs, err := db.QueryContext(ctx, `SELECT `+cols+` FROM events ORDER BY position`)
		if err != nil {
			b.Fatal(err)
		}
		var pos, version, seq, at int64
		var typ, id, eid, etype string
		var data []byte
		for rs.Next() {
			if err := rs.Scan(&pos, &typ, &id, &eid, &etype, &data, &version, &seq, &at); err != nil {
				b.Fatal(err)
			}
			rows++
		}
		if err := rs.Err(); err != nil {
			b.Fatal(err)
		}
	} else {
		rs, err := s.conn.Query(ctx, `SELECT `+cols+` FROM `+s.schema+`.events ORDER BY position`)
		if err != nil {
			b.Fatal(err)
		}
		var pos, version, seq int64
		var typ, id, eid, etype string
		var data []byte
		var at time.Time
		for rs.Next() {
			if err := rs.Scan(&pos, &typ, &id, &eid, &etype, &data, &version, &seq, &at); err != nil {
				b.Fatal(err)
			}
			rows++
		}
		if err := rs.Err(); err != nil {
			b.Fatal(err)
		}
	}
	if rows != n {
		b.Fatalf("raw read: %d rows, want %d", rows, n)
	}
	return time.Since(t0)
}

// fileCopy copies the SQLite file (after a checkpoint, so that it holds
// every event).
func fileCopy(b *testing.B, path string) time.Duration {
	db, err := sql.Open("sqlite", sqlite.DSN(path, 5*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	_ = db.Close()
	t0 := time.Now()
	in, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(path + ".copy")
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(out, 1<<20)
	if _, err := w.ReadFrom(in); err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := out.Sync(); err != nil {
		b.Fatal(err)
	}
	_ = out.Close()
	took := time.Since(t0)
	_ = os.Remove(path + ".copy")
	return took
}

// rawInsert inserts n rows of the benchmark's shape into the events table
// of the fresh store s: plain INSERTs in transactions of 10,000 rows on
// SQLite, COPY in one transaction per 100,000 rows on PostgreSQL.
func rawInsert(b *testing.B, kind string, s speedStore, n int) time.Duration {
	ctx := context.Background()
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	row := func(i int) (typ, id string, version, seq int64) {
		batch := i / 2
		agg := batch / 10
		v := int64(batch%10) + 1
		return []string{"order", "invoice"}[agg%2], "a-" + strconv.Itoa(agg), v, (v-1)*2 + int64(i%2) + 1
	}
	if kind == "sqlite" {
		_ = s.st.Close() // the raw writer is the only one
		db, err := sql.Open("sqlite", sqlite.DSN(s.path, 5*time.Second)+"&_txlock=immediate")
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		t0 := time.Now()
		for start := 0; start < n; start += 10_000 {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			stmt, err := tx.PrepareContext(ctx, `INSERT INTO events (aggregate_type, aggregate_id, event_id, event_type, data, version, sequence, recorded_at, feed_sequence)
				VALUES (?, ?, ?, 'Placed', ?, ?, ?, ?, ?)`)
			if err != nil {
				b.Fatal(err)
			}
			for i := start; i < min(start+10_000, n); i++ {
				typ, id, v, seq := row(i)
				if _, err := stmt.ExecContext(ctx, typ, id, uuid.NewString(), []byte(speedData), v, seq, at.Add(time.Duration(i)*time.Millisecond).UnixMicro(), i/2+1); err != nil {
					b.Fatal(err)
				}
			}
			_ = stmt.Close()
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	t0 := time.Now()
	for start := 0; start < n; start += 100_000 {
		end := min(start+100_000, n)
		i := start
		src := pgx.CopyFromFunc(func() ([]any, error) {
			if i >= end {
				return nil, nil
			}
			typ, id, v, seq := row(i)
			vals := []any{int64(i + 1), typ, id, uuid.NewString(), "Placed", []byte(speedData), v, seq, at.Add(time.Duration(i) * time.Millisecond), int64(i/2 + 1), int64(0)}
			i++
			return vals, nil
		})
		if _, err := s.conn.CopyFrom(ctx, pgx.Identifier{s.schema, "events_rows"},
			[]string{"position", "aggregate_type", "aggregate_id", "event_id", "event_type", "data", "version", "sequence", "recorded_at", "feed_sequence", "tx"}, src); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(t0)
}
