package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// tiny are sizes at which every workload runs once in a moment, so that
// the harness is exercised by go test and cannot rot.
var tiny = sizes{appendFor: 20 * time.Millisecond, loadEvents: 30, loads: 2, feedEvents: 250, rebuild: 420, reps: 1}

func testPGURL() string {
	if u := os.Getenv("EVENTSTORE_BENCH_PG_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test"
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
		{"-nope"},
		{"extra"},
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
