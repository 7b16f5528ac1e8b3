package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The server CPU benchmarks run the saves of the save benchmarks (the Store
// next to raw INSERTs, alternating in rounds of 500 saves) and report the
// CPU time the server's backends spent per save, read from
// /proc/<pid>/stat (utime + stime, in clock ticks of 10 ms) before and after
// each round: ours-us/save, raw-us/save and their ratio cpu-x. Each subject
// has a pool of its own, told apart by application_name. The server must
// run on this machine and its /proc entries be readable (run as root or as
// the server's user); otherwise the benchmarks are skipped.
//
//	go test ./storage/postgres -run '^$' -bench ServerCPU -benchtime 3000x

// backendCPU returns the CPU time, in clock ticks, used so far by the
// server processes of the connections named app.
func backendCPU(b *testing.B, app string) int64 {
	b.Helper()
	rows, err := testPool(b).Query(context.Background(),
		"SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var total int64
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			b.Fatal(err)
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Skipf("server CPU not readable (%v): the server must run on this machine", err)
		}
		// The fields after the command name, which ends with ')':
		// utime and stime are the 14th and 15th of the line.
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		utime, err1 := strconv.ParseInt(f[11], 10, 64)
		stime, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			b.Fatalf("cannot read /proc/%d/stat: %q", pid, s)
		}
		total += utime + stime
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return total
}

// namedPool returns a pool whose connections carry application_name app.
func namedPool(b *testing.B, app string) *pgxpool.Pool {
	b.Helper()
	testPool(b)
	cfg, err := pgxpool.ParseConfig(databaseURL())
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = 16
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

func benchServerCPU(b *testing.B, writers, perSave int) {
	ours, raw := "bench_cpu_ours", "bench_cpu_raw"
	store, _, _ := benchStore(b, namedPool(b, ours))
	rw := newRawWriter(b, namedPool(b, raw))
	storeSave := func(ctx context.Context, i int) error {
		_, err := store.Save(ctx, "acct", fmt.Sprint("a", i%1000), newEvents(perSave), nil)
		return err
	}
	rawSave := func(ctx context.Context, i int) error {
		return rw.save(ctx, fmt.Sprint("a", i%1000), perSave)
	}
	runWriters(b, writers, 0, 4*writers, storeSave)
	runWriters(b, writers, 0, 4*writers, rawSave)
	var oursTicks, rawTicks int64
	b.ResetTimer()
	for from := 4 * writers; from < 4*writers+b.N; from += 500 {
		to := min(from+500, 4*writers+b.N)
		t0 := backendCPU(b, ours)
		runWriters(b, writers, from, to, storeSave)
		t1 := backendCPU(b, ours)
		r0 := backendCPU(b, raw)
		runWriters(b, writers, from, to, rawSave)
		r1 := backendCPU(b, raw)
		oursTicks += t1 - t0
		rawTicks += r1 - r0
	}
	b.StopTimer()
	const usPerTick = 10_000
	b.ReportMetric(float64(oursTicks*usPerTick)/float64(b.N), "ours-us/save")
	b.ReportMetric(float64(rawTicks*usPerTick)/float64(b.N), "raw-us/save")
	if rawTicks > 0 {
		b.ReportMetric(float64(oursTicks)/float64(rawTicks), "cpu-x")
	}
}

func BenchmarkServerCPUSave1Writer(b *testing.B)          { benchServerCPU(b, 1, 1) }
func BenchmarkServerCPUSave8Writers(b *testing.B)         { benchServerCPU(b, 8, 1) }
func BenchmarkServerCPUSaveBatch10_1Writer(b *testing.B)  { benchServerCPU(b, 1, 10) }
func BenchmarkServerCPUSaveBatch10_8Writers(b *testing.B) { benchServerCPU(b, 8, 10) }
