// Command bench compares this event store with the raw engines under it and
// with the Go event-sourcing libraries people use today, on the same
// workloads, and prints a table of rates and ratios.
//
//	cd bench && go run . -backends memory,sqlite,postgres -quick
//
// Every cell is the median of -reps measurements (3 by default); the
// subjects of a cell are measured in turn within each repetition, so that
// the load of a shared machine falls on all of them alike. Rates are events
// per second; a ratio ours/x above 1 means this library is faster.
//
// Subjects: "ours" is this library through eventstore.Store and a
// Projector; "raw" the engine alone doing the same writes and reads (a map
// behind a mutex in memory, plain INSERTs and SELECTs through the same
// driver on SQLite and PostgreSQL, equally durable); "hallgren" is
// github.com/hallgren/eventsourcing and "goes" github.com/modernice/goes,
// both at the level of their event stores. goes has no SQLite backend.
//
// Workloads: append of 1 and 10 events per save by 1, 8 and 32 writers,
// each on an aggregate of its own ("append") or all on one aggregate with
// optimistic concurrency ("contended", a writer that loses re-reads what it
// missed and retries; retries are counted); load of one aggregate of 1,000
// events; read of the whole feed (100,000 events); rebuild of a projection
// (a sum and a count per aggregate) over 1,000,000 events; on PostgreSQL,
// "procs": -proc-writers writers spread over -procs operating-system
// processes (this binary started again as workers, see procs.go), with a
// follower's latency from acknowledgement to the feed. -quick shrinks
// the sizes so that a run of all three backends takes a few minutes on two
// cores.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// config is what the flags select.
type config struct {
	backends  []string
	subjects  []string
	workloads []string
	writers   []int
	batches   []int
	sizes     sizes
	pgURL     string
	pgConns   int
	pgStores  int
	dir       string
	// procs and procWriters are the process and writer counts of the
	// cross-process workload: every writer count spread over every
	// process count not above it.
	procs       []int
	procWriters []int
}

var (
	allBackends  = []string{"memory", "sqlite", "postgres"}
	allSubjects  = []string{"ours", "raw", "hallgren", "goes"}
	allWorkloads = []string{"append", "contended", "load", "feed", "rebuild", "procs"}
)

func main() {
	if os.Getenv(workerEnv) == "1" {
		// A worker process of the cross-process workload (procs.go).
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		err := workerMain(ctx, os.Stdin, os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench worker:", err)
			os.Exit(2)
		}
		return
	}
	if err := mainErr(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
}

func mainErr(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	backends := fs.String("backends", strings.Join(allBackends, ","), "backends to run: memory, sqlite, postgres")
	subjects := fs.String("subjects", strings.Join(allSubjects, ","), "subjects to run: ours, raw, hallgren, goes")
	workloads := fs.String("workloads", strings.Join(allWorkloads, ","), "workloads to run: append, contended, load, feed, rebuild, procs (PostgreSQL only: writers over OS processes)")
	writers := fs.String("writers", "1,8,32", "writer counts of the append workloads")
	batches := fs.String("batches", "1,10", "events per save of the append workloads")
	quick := fs.Bool("quick", false, "smaller sizes: a run of every backend in a few minutes on 2 cores")
	reps := fs.Int("reps", 3, "measurements per cell; the median is printed")
	appendFor := fs.Duration("append-for", 0, "how long one append measurement runs (default 1s, 250ms with -quick)")
	pgURL := fs.String("pg-url", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL database; each subject gets a fresh schema, dropped at the end")
	pgConns := fs.Int("pg-conns", 16, "connections in each PostgreSQL subject's pool")
	pgStores := fs.Int("pg-stores", 1, "Storages \"ours\" opens on one PostgreSQL schema, standing for that many server processes (writes spread by aggregate)")
	procs := fs.String("procs", "1,8", "OS process counts of the procs workload: ours and raw each in that many worker processes of this binary")
	procWriters := fs.String("proc-writers", "32", "writer counts of the procs workload, spread over the processes")
	dir := fs.String("dir", "", "directory for the SQLite files (default: a new temporary directory)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	growth := fs.String("growth", "", "instead of the comparison, the growth benchmark of \"ours\" at these store sizes (events, k and M allowed: 100k,300k; 0 is added), see growth.go")
	projection := fs.String("projection", "", "instead of the comparison, the projection benchmark at this many events (k and M allowed), see projection.go")
	projInstances := fs.Int("projection-instances", 50_000, "instances (aggregates) of the projection benchmark")
	projBatch := fs.Int("projection-batch", 0, "the Projector's BatchSize in the projection benchmark (0: its default)")
	growthWALOn := fs.Bool("growth-wal", false, "with -growth on PostgreSQL: what a 1-event save costs the server at each size (WAL bytes, full-page images, blocks read, checkpoints) right after the fill and after a CHECKPOINT (before the other figures of the size, which then follow its checkpoints), see growthwal.go")
	growthWALCompression := fs.String("growth-wal-compression", "", "with -growth-wal: also measure after a CHECKPOINT with this wal_compression set for the session (pglz, lz4, zstd; the server's configuration is not changed)")
	growthUUIDs := fs.Bool("growth-uuid-ids", false, "with -growth: aggregate ids that are UUIDs in no order, instead of a0000000, a0000001, ... (which the writers save to in order)")
	growthReads := fs.Int("growth-reads", 20, "reads per figure of the growth benchmark (loads, feed pages); the median is printed")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := config{pgURL: *pgURL, pgConns: *pgConns, pgStores: *pgStores, dir: *dir}
	var err error
	if cfg.backends, err = names("-backends", *backends, allBackends); err != nil {
		return err
	}
	if cfg.subjects, err = names("-subjects", *subjects, allSubjects); err != nil {
		return err
	}
	if cfg.workloads, err = names("-workloads", *workloads, allWorkloads); err != nil {
		return err
	}
	if cfg.writers, err = counts("-writers", *writers, 1024); err != nil {
		return err
	}
	if cfg.batches, err = counts("-batches", *batches, 10000); err != nil {
		return err
	}
	if cfg.procs, err = counts("-procs", *procs, 64); err != nil {
		return err
	}
	if cfg.procWriters, err = counts("-proc-writers", *procWriters, 1024); err != nil {
		return err
	}
	if *reps < 1 || *reps > 100 {
		return fmt.Errorf("-reps must be between 1 and 100, got %d", *reps)
	}
	if *pgConns < 1 || *pgConns > 1000 {
		return fmt.Errorf("-pg-conns must be between 1 and 1000, got %d", *pgConns)
	}
	if *pgStores < 1 || *pgStores > 64 {
		return fmt.Errorf("-pg-stores must be between 1 and 64, got %d", *pgStores)
	}
	if *appendFor < 0 {
		return fmt.Errorf("-append-for must not be negative, got %v", *appendFor)
	}
	cfg.sizes = sizes{appendFor: time.Second, loadEvents: 1000, loads: 50, feedEvents: 100_000, rebuild: 1_000_000, reps: *reps}
	if *quick {
		cfg.sizes = sizes{appendFor: 250 * time.Millisecond, loadEvents: 1000, loads: 20, feedEvents: 20_000, rebuild: 100_000, reps: *reps}
	}
	if *appendFor > 0 {
		cfg.sizes.appendFor = *appendFor
	}

	growthSizes, err := parseGrowth(*growth)
	if err != nil {
		return err
	}
	if *growthReads < 1 || *growthReads > 10000 {
		return fmt.Errorf("-growth-reads must be between 1 and 10000, got %d", *growthReads)
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(out, "# %s, %s/%s, %d CPUs (GOMAXPROCS %d), %s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH,
		runtime.NumCPU(), runtime.GOMAXPROCS(0), time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(out, "# median of %d; append %v per measurement; load %d events ×%d; feed %d events; rebuild over %d events; pg pool %d conns, %d store(s); procs %v writers over %v processes\n",
		cfg.sizes.reps, cfg.sizes.appendFor, cfg.sizes.loadEvents, cfg.sizes.loads, cfg.sizes.feedEvents, cfg.sizes.rebuild, cfg.pgConns, cfg.pgStores, cfg.procWriters, cfg.procs)
	if *projection != "" {
		n, err := parseGrowth(*projection)
		if err != nil || len(n) != 2 {
			return fmt.Errorf("-projection: one size, got %q", *projection)
		}
		if *projInstances < 1 || *projInstances > 10_000_000 {
			return fmt.Errorf("-projection-instances must be between 1 and 10,000,000, got %d", *projInstances)
		}
		if *projBatch < 0 || *projBatch > 1_000_000 {
			return fmt.Errorf("-projection-batch must be between 0 and 1,000,000, got %d", *projBatch)
		}
		return runProjection(ctx, cfg, n[1], *projInstances, *projBatch, out)
	}
	if len(growthSizes) > 0 {
		fmt.Fprintf(out, "# growth: sizes %v, %d writers, saves of %d events (fill) and 1 event (%v), %d reads per figure\n\n",
			growthSizes, growthWriters, growthSave, cfg.sizes.appendFor, *growthReads)
		var wal *growthWAL
		if *growthWALOn {
			wal = &growthWAL{compression: *growthWALCompression, out: out}
		} else if *growthWALCompression != "" {
			return fmt.Errorf("-growth-wal-compression needs -growth-wal")
		}
		return runGrowth(ctx, cfg, growthSizes, *growthReads, wal, *growthUUIDs, out)
	}
	rows, err := run(ctx, cfg, func(r row) { printRow(out, cfg.subjects, r) }, func() { printHeader(out, cfg.subjects) })
	printErrors(out, rows)
	return err
}

// names parses a comma-separated list whose elements must be among known.
func names(flagName, s string, known []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		ok := false
		for _, k := range known {
			ok = ok || k == f
		}
		if !ok {
			return nil, fmt.Errorf("%s: unknown %q (known: %s)", flagName, f, strings.Join(known, ", "))
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty", flagName)
	}
	return out, nil
}

// counts parses a comma-separated list of integers between 1 and limit.
func counts(flagName, s string, limit int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > limit {
			return nil, fmt.Errorf("%s: %q is not a number between 1 and %d", flagName, f, limit)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: empty", flagName)
	}
	return out, nil
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
