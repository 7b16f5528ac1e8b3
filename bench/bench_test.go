package main

import (
	"bytes"
	"context"
	"fmt"
	"github.com/google/uuid"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMain makes the test binary a worker of the cross-process workload
// when it is started as one (runProcs starts os.Executable, which under go
// test is this binary).
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := workerMain(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench worker:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tiny are sizes at which every workload runs once in a moment, so that
// the harness is exercised by go test and cannot rot.
var tiny = sizes{appendFor: 20 * time.Millisecond, loadEvents: 30, loads: 2, feedEvents: 250, rebuild: 420, reps: 1}

// testPGURL returns the database of the tests: EVENTSTORE_BENCH_PG_URL,
// else EVENTSTORE_POSTGRES_URL (the library's tests' and .ci/run's), else
// the local default.
func testPGURL() string {
	for _, env := range []string{"EVENTSTORE_BENCH_PG_URL", "EVENTSTORE_POSTGRES_URL"} {
		if u := os.Getenv(env); u != "" {
			return u
		}
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

// TestWorkloads runs every workload of every subject once at tiny sizes and
// fails on any error of a cell. PostgreSQL is skipped when the local
// server cannot be reached.
func TestWorkloads(t *testing.T) {
	for _, b := range allBackends {
		t.Run(b, func(t *testing.T) {
			ctx := context.Background()
			if b == "postgres" {
				env, err := newPGEnv(ctx, testPGURL(), 4, 1)
				if err != nil {
					t.Skipf("PostgreSQL not reachable: %v", err)
				}
				env.admin.Close()
			}
			cfg := config{
				backends: []string{b}, subjects: allSubjects, workloads: allWorkloads,
				writers: []int{1, 3}, batches: []int{1, 4}, sizes: tiny,
				pgURL: testPGURL(), pgConns: 4, dir: t.TempDir(),
			}
			var out bytes.Buffer
			rows, err := run(ctx, cfg, func(r row) { printRow(&out, cfg.subjects, r) },
				func() { printHeader(&out, cfg.subjects) })
			if err != nil {
				t.Fatal(err)
			}
			if err := cellErrors(rows); err != nil {
				t.Fatal(err)
			}
			// 2 modes × 2 batch sizes × 2 writer counts, load, feed, rebuild.
			if len(rows) != 11 {
				t.Errorf("got %d rows, want 11:\n%s", len(rows), out.String())
			}
			for _, r := range rows {
				for name, c := range r.cells {
					if len(c.rates) != 1 || c.rates[0] <= 0 {
						t.Errorf("%s %s: rates %v", r.workload, name, c.rates)
					}
				}
			}
			t.Log("\n" + out.String())
		})
	}
}

// TestPostgresDropsSchemas checks that a run leaves no schema behind.
func TestPostgresDropsSchemas(t *testing.T) {
	ctx := context.Background()
	env, err := newPGEnv(ctx, testPGURL(), 2, 2)
	if err != nil {
		t.Skipf("PostgreSQL not reachable: %v", err)
	}
	for _, m := range env.makers() {
		s, err := m.make(ctx)
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if _, err := s.append(ctx, "6f1c1c2e-3b7a-4d0e-9c55-0d4b8e2b7a10", 0, 1); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		if err := s.close(); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
	}
	prefix := env.run
	if err := env.close(ctx); err != nil {
		t.Fatal(err)
	}
	check, err := newPGEnv(ctx, testPGURL(), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer check.admin.Close()
	var n int
	if err := check.admin.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname LIKE $1`, prefix+"%").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d schemas of the run are left", n)
	}
}

// TestFlags checks that bad flags are reported as errors, never panics.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-backends", "mysql"},
		{"-backends", ""},
		{"-subjects", "ours,eventide"},
		{"-workloads", "append,sleep"},
		{"-writers", "0"},
		{"-writers", "a"},
		{"-batches", "1,,-2"},
		{"-reps", "0"},
		{"-pg-conns", "0"},
		{"-append-for", "-1s"},
		{"-procs", "0"},
		{"-procs", "65"},
		{"-proc-writers", "x"},
		{"-nope"},
		{"extra"},
		{"-projection", "x"},
		{"-projection", "1k", "-projection-instances", "0"},
		{"-projection", "1k", "-backends", "memory"},
	} {
		var out bytes.Buffer
		if err := mainErr(args, &out); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	if err := mainErr([]string{"-h"}, &bytes.Buffer{}); err != nil {
		t.Errorf("-h: %v", err)
	}
}

// TestTable checks the ratio columns: ours/x is ours' median over x's.
func TestTable(t *testing.T) {
	r := row{backend: "memory", workload: "w", contended: true, cells: map[string]*cell{
		"ours": {rates: []float64{100, 300, 200}, retries: 4},
		"raw":  {rates: []float64{400, 400, 400}},
	}}
	var out bytes.Buffer
	printRow(&out, []string{"ours", "raw"}, r)
	if got, want := out.String(), "| memory | w | 200 | 400 | 0.50 | ours 4, raw 0 |\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !strings.Contains(rate(&cell{rates: []float64{2.5e6}}), "2.50M") {
		t.Error("millions not formatted")
	}
}

// TestProcs runs the cross-process workload for about a second: 2 worker
// processes of 2 writers each, for ours with a follower in this process and
// for raw. Every worker must have saved, and the follower must have seen
// every acknowledged save exactly once, in each aggregate's order.
func TestProcs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	env, err := newPGEnv(ctx, testPGURL(), 4, 1)
	if err != nil {
		t.Skipf("PostgreSQL not reachable: %v", err)
	}
	defer func() {
		if err := env.close(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const procs, writers = 2, 2
	url := env.withParams("pool_max_conns=4")

	oursSchema := env.schema("pours")
	follower, err := openFollower(ctx, env, oursSchema)
	if err != nil {
		t.Fatal(err)
	}
	defer follower.Close()
	o, err := runProcs(ctx, procPlan{exe: exe, subject: "ours", url: url, schema: oursSchema,
		writers: writers, procs: procs, batch: 1, dur: time.Second}, follower)
	if err != nil {
		t.Fatalf("ours: %v", err)
	}
	checkProcResults(t, "ours", o, procs, writers)
	if o.follow == nil {
		t.Fatal("ours: no follower figures")
	}
	if err := o.follow.problems(); err != nil {
		t.Errorf("ours: %v", err)
	}
	if o.follow.acked != o.events || len(o.follow.latencies) == 0 {
		t.Errorf("ours: follower checked %d of %d events, %d latency samples", o.follow.acked, o.events, len(o.follow.latencies))
	}
	t.Logf("ours: %d events, %.0f ev/s, save p99 %s, %s", o.events, o.rate(), ms(o.hist.quantile(0.99)), o.follow)

	rawSchema := env.schema("praw")
	if err := createRawSchema(ctx, env, rawSchema); err != nil {
		t.Fatal(err)
	}
	r, err := runProcs(ctx, procPlan{exe: exe, subject: "raw", url: url, schema: rawSchema,
		writers: writers, procs: procs, batch: 10, dur: time.Second}, nil)
	if err != nil {
		t.Fatalf("raw: %v", err)
	}
	checkProcResults(t, "raw", r, procs, writers)
	t.Logf("raw: %d events, %.0f ev/s", r.events, r.rate())
}

// checkProcResults checks that every one of procs workers reported, with
// its share of writers, and saved.
func checkProcResults(t *testing.T, name string, o procOutcome, procs, writers int) {
	t.Helper()
	if len(o.results) != procs {
		t.Fatalf("%s: %d results, want %d", name, len(o.results), procs)
	}
	var total int
	for i, r := range o.results {
		total += len(r.Writers)
		if r.Proc != i || r.Saves <= 0 || r.Events < r.Saves || r.Errors != 0 {
			t.Errorf("%s: worker %d reported %+v", name, i, r)
		}
	}
	if total != writers {
		t.Errorf("%s: %d writers reported, want %d", name, total, writers)
	}
	if o.elapsed < time.Second || o.rate() <= 0 {
		t.Errorf("%s: elapsed %v, rate %v", name, o.elapsed, o.rate())
	}
}

// TestGrowth runs the growth benchmark at tiny sizes on every backend
// (PostgreSQL skipped when the server is down; its aggregate ids are UUIDs,
// as -growth-uuid-ids makes them) and checks that every figure was
// measured at every size.
func TestGrowth(t *testing.T) {
	for _, b := range allBackends {
		t.Run(b, func(t *testing.T) {
			ctx := context.Background()
			var env *pgEnv
			if b == "postgres" {
				var err error
				if env, err = newPGEnv(ctx, testPGURL(), 4, 1); err != nil {
					t.Skipf("PostgreSQL not reachable: %v", err)
				}
				defer env.close(ctx)
			}
			sizes := growthSizes{0, 3000}
			all, err := growBackends(ctx, []string{b}, sizes, 20*time.Millisecond, 2, t.TempDir(), env, nil, b == "postgres")
			if err != nil {
				t.Fatal(err)
			}
			figs := all[b]
			if len(figs) != len(sizes) {
				t.Fatalf("%d sizes measured, want %d", len(figs), len(sizes))
			}
			for _, f := range figs {
				if f.saves <= 0 || f.load10 < 0 || f.load1000 <= 0 || f.feedRate <= 0 || f.first <= 0 || f.last <= 0 ||
					f.single <= 0 || f.aggregated <= 0 || f.typeEvents <= 0 {
					t.Errorf("a figure not measured: %+v", f)
				}
				if (b == "postgres") != (f.firstOneOff > 0 && f.lastOneOff > 0) {
					t.Errorf("one-off reads measured %v, %v on %s", f.firstOneOff, f.lastOneOff, b)
				}
				if (b != "memory") != (f.bytesPerEvent > 0) {
					t.Errorf("bytes per event %v on %s", f.bytesPerEvent, b)
				}
				if len(f.savesVsSmall) != growthAlternations || f.savesVsSmall[0] <= 0 {
					t.Errorf("alternated saves: ratios %v, want %d positive", f.savesVsSmall, growthAlternations)
				}
				// Each rebuild read at least a page and committed it.
				for _, split := range []string{f.singleSplit, f.aggregatedSplit} {
					if !strings.Contains(split, "per page") || strings.HasPrefix(split, "0 pages") ||
						(b == "postgres") != strings.Contains(split, "states rows") {
						t.Errorf("rebuild split on %s: %q", b, split)
					}
				}
			}
			if figs[1].events < 3000 {
				t.Errorf("the store holds %d events at size 3000", figs[1].events)
			}
			var out bytes.Buffer
			printGrowth(&out, b, figs)
			if !strings.Contains(out.String(), "new single projection") || !strings.Contains(out.String(), "a small store's, alternating") {
				t.Errorf("table:\n%s", out.String())
			}
			t.Log("\n" + out.String())
		})
	}
}

// TestProjection runs the projection benchmark at a tiny size on SQLite
// and, when its server is up, PostgreSQL, and checks its lines.
func TestProjection(t *testing.T) {
	backends := "sqlite"
	if env, err := newPGEnv(context.Background(), testPGURL(), 4, 1); err == nil {
		env.close(context.Background())
		backends += ",postgres"
	}
	var out bytes.Buffer
	if err := mainErr([]string{"-projection", "2k", "-projection-instances", "100", "-reps", "1", "-backends", backends,
		"-pg-url", testPGURL(), "-dir", t.TempDir()}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sqlite: filled 2000 events over 100 instances", "timed: 3 pages, per page", "median of 1: sqlite"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(backends, "postgres") && !strings.Contains(out.String(), "states rows ins ") {
		t.Errorf("no PostgreSQL row counts in\n%s", out.String())
	}
	t.Log("\n" + out.String())
}

func TestParseGrowth(t *testing.T) {
	got, err := parseGrowth("300k, 1M,100000")
	if err != nil || !slices.Equal(got, growthSizes{0, 100_000, 300_000, 1_000_000}) {
		t.Errorf("parseGrowth: %v, %v", got, err)
	}
	for _, bad := range []string{"x", "-1", "200M"} {
		if _, err := parseGrowth(bad); err == nil {
			t.Errorf("parseGrowth(%q) succeeded", bad)
		}
	}
	if got, err := parseGrowth(""); err != nil || got != nil {
		t.Errorf("parseGrowth(\"\"): %v, %v", got, err)
	}
}

// TestGrowthWAL runs the phases of -growth-wal at tiny sizes on
// PostgreSQL (skipped when the server is down) and checks their lines.
func TestGrowthWAL(t *testing.T) {
	ctx := context.Background()
	env, err := newPGEnv(ctx, testPGURL(), 4, 1)
	if err != nil {
		t.Skipf("PostgreSQL not reachable: %v", err)
	}
	defer env.close(ctx)
	defer func(d time.Duration) { walIdle = d }(walIdle)
	walIdle = 0
	var out bytes.Buffer
	if _, err := growBackends(ctx, []string{"postgres"}, growthSizes{0, 300}, 20*time.Millisecond, 1, t.TempDir(), env,
		&growthWAL{compression: "pglz", out: &out}, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"at size 0 (", "at size 300 (", "1-event saves after the fill:", "saves after CHECKPOINT:",
		"to the same aggregates again:", "after CHECKPOINT, wal_compression=pglz:", "full-page images", "checkpoints ended"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	// With pg_walinspect, each phase's line is followed by its WAL by
	// relation, in which every save's entry of events_event_key shows.
	var walinspect bool
	if err := env.admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_walinspect')`).
		Scan(&walinspect); err != nil {
		t.Fatal(err)
	}
	lines := 8
	if walinspect {
		lines = 16
		byRelation, withEventKey := 0, 0
		for _, line := range strings.Split(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "  WAL per save by relation (pg_walinspect): "); ok {
				byRelation++
				if strings.Contains(rest, "event_key ") {
					withEventKey++
				}
			}
		}
		if byRelation != 8 || withEventKey != 8 {
			t.Errorf("%d lines of WAL by relation, %d of them with events_event_key; want 8 and 8:\n%s",
				byRelation, withEventKey, out.String())
		}
	}
	if n := strings.Count(out.String(), "\n"); n != lines {
		t.Errorf("%d lines, want %d:\n%s", n, lines, out.String())
	}
	t.Log("\n" + out.String())
}

// TestGrowthUUIDIDs checks the aggregate ids of -growth-uuid-ids: UUIDs,
// the same for an aggregate each time, distinct between aggregates, and
// not in the aggregates' order.
func TestGrowthUUIDIDs(t *testing.T) {
	g := &growthStore{uuidIDs: true}
	seen := map[string]int{}
	var prev string
	ordered := true
	for i := range 1000 {
		typ, id := g.aggID(i)
		if _, again := g.aggID(i); again != id || typ != growthTypes[i%len(growthTypes)] {
			t.Fatalf("aggregate %d: %s %s, then %s", i, typ, id, again)
		}
		if _, err := uuid.Parse(id); err != nil {
			t.Fatalf("aggregate %d: id %q: %v", i, id, err)
		}
		if j, dup := seen[id]; dup {
			t.Fatalf("aggregates %d and %d share id %s", j, i, id)
		}
		seen[id] = i
		ordered = ordered && id > prev
		prev = id
	}
	if ordered {
		t.Error("the UUID ids of 1,000 aggregates rise with the aggregates' numbers")
	}
	if _, id := (&growthStore{}).aggID(7); id != "a0000007" {
		t.Errorf("the default id of aggregate 7 is %q, want a0000007", id)
	}
}
