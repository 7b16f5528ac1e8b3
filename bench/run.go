package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/google/uuid"
)

// A row is one workload on one backend, with a cell per subject.
type row struct {
	backend, workload string
	cells             map[string]*cell
	contended         bool   // print retries
	note              string // printed in the last column
}

// run measures every selected workload and calls each with every finished
// row (after header, once, before the first). It returns the rows; an
// error only for what stops the whole run (a backend that cannot be
// reached); failures of one subject are kept in its cells.
func run(ctx context.Context, cfg config, each func(row), header func()) ([]row, error) {
	var rows []row
	emit := func(r row) {
		if len(rows) == 0 {
			header()
		}
		rows = append(rows, r)
		each(r)
	}
	for _, b := range cfg.backends {
		makers, procs, done, err := backendMakers(ctx, cfg, b)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", b, err)
		}
		var sel []maker
		for _, m := range makers {
			if has(cfg.subjects, m.name) {
				sel = append(sel, m)
			}
		}
		runBackend(ctx, cfg, b, sel, emit)
		if procs != nil && has(cfg.workloads, "procs") && ctx.Err() == nil {
			procs(ctx, emit)
		}
		if err := done(); err != nil {
			return rows, fmt.Errorf("%s: clean up: %w", b, err)
		}
		if ctx.Err() != nil {
			return rows, ctx.Err()
		}
	}
	return rows, nil
}

// backendMakers returns the subjects of backend b, the runner of its
// cross-process rows (nil when it has none) and a function that removes
// what the run left.
func backendMakers(ctx context.Context, cfg config, b string) ([]maker, func(context.Context, func(row)), func() error, error) {
	switch b {
	case "memory":
		return memoryMakers(), nil, func() error { return nil }, nil
	case "sqlite":
		dir := cfg.dir
		if dir == "" {
			d, err := os.MkdirTemp("", "eventstore-bench-")
			if err != nil {
				return nil, nil, nil, err
			}
			return sqliteMakers(d), nil, func() error { return os.RemoveAll(d) }, nil
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, nil, err
		}
		return sqliteMakers(dir), nil, func() error { return nil }, nil
	case "postgres":
		env, err := newPGEnv(ctx, cfg.pgURL, cfg.pgConns, cfg.pgStores)
		if err != nil {
			return nil, nil, nil, err
		}
		procs := func(ctx context.Context, emit func(row)) { procRows(ctx, cfg, env, emit) }
		return env.makers(), procs, func() error { return env.close(context.Background()) }, nil
	}
	return nil, nil, nil, fmt.Errorf("unknown backend")
}

func newRow(backend, workload string, makers []maker) row {
	r := row{backend: backend, workload: workload, cells: make(map[string]*cell)}
	for _, m := range makers {
		r.cells[m.name] = &cell{}
	}
	return r
}

// open creates a fresh subject for every maker; a maker that fails leaves a
// nil subject and its error in the row's cell.
func open(ctx context.Context, makers []maker, rows ...row) []subject {
	subs := make([]subject, len(makers))
	for i, m := range makers {
		s, err := m.make(ctx)
		if err != nil {
			for _, r := range rows {
				r.cells[m.name].err = fmt.Errorf("open: %w", err)
			}
			continue
		}
		subs[i] = s
	}
	return subs
}

func closeAll(makers []maker, subs []subject, r row) {
	for i, s := range subs {
		if s == nil {
			continue
		}
		if err := s.close(); err != nil && r.cells[makers[i].name].err == nil {
			r.cells[makers[i].name].err = fmt.Errorf("close: %w", err)
		}
	}
}

// warmUp appends from writers goroutines for a moment, unmeasured, so
// that pools have opened their connections and statements are prepared
// before the first measurement.
func warmUp(ctx context.Context, makers []maker, subs []subject, r row, writers int) {
	for i, s := range subs {
		if s == nil {
			continue
		}
		if _, err := appendDistinct(ctx, s, writers, 1, 50*time.Millisecond); err != nil {
			r.cells[makers[i].name].err = fmt.Errorf("warm-up: %w", err)
		}
	}
}

// measure runs f for every live subject, cfg.reps times, in turn.
func measure(ctx context.Context, reps int, makers []maker, subs []subject, r row, f func(s subject) (float64, int64, error)) {
	for rep := range reps {
		// Each repetition starts with the next subject, so that none is
		// always measured first (after the populating writes, or right
		// after a given other subject).
		for k := range subs {
			i := (rep + k) % len(subs)
			s := subs[i]
			c := r.cells[makers[i].name]
			if s == nil || c.err != nil || ctx.Err() != nil {
				continue
			}
			// Each measurement starts from a collected heap, so that no
			// subject pays for the garbage of the one measured before it
			// (the raw map's rate moved 2× with the rows before it).
			runtime.GC()
			rate, retries, err := f(s)
			if err != nil {
				c.err = err
				continue
			}
			c.rates = append(c.rates, rate)
			c.retries += retries
		}
	}
}

func runBackend(ctx context.Context, cfg config, b string, makers []maker, emit func(row)) {
	sz := cfg.sizes
	for _, mode := range []string{"append", "contended"} {
		if !has(cfg.workloads, mode) {
			continue
		}
		for _, n := range cfg.batches {
			for _, w := range cfg.writers {
				if ctx.Err() != nil {
					return
				}
				r := newRow(b, fmt.Sprintf("%s %d ev × %d w", mode, n, w), makers)
				r.contended = mode == "contended"
				subs := open(ctx, makers, r)
				warmUp(ctx, makers, subs, r, w)
				measure(ctx, sz.reps, makers, subs, r, func(s subject) (float64, int64, error) {
					if mode == "append" {
						rate, err := appendDistinct(ctx, s, w, n, sz.appendFor)
						return rate, 0, err
					}
					return appendContended(ctx, s, w, n, sz.appendFor)
				})
				closeAll(makers, subs, r)
				emit(r)
			}
		}
	}
	reads := has(cfg.workloads, "load") || has(cfg.workloads, "feed")
	if !reads && !has(cfg.workloads, "rebuild") || ctx.Err() != nil {
		return
	}
	load := newRow(b, fmt.Sprintf("load %d", sz.loadEvents), makers)
	feed := newRow(b, fmt.Sprintf("feed %d", sz.feedEvents), makers)
	rebuild := newRow(b, fmt.Sprintf("rebuild %d", sz.rebuild), makers)
	subs := open(ctx, makers, load, feed, rebuild)
	loadAgg := uuid.NewString()
	fail := func(i int, err error) {
		for _, r := range []row{load, feed, rebuild} {
			r.cells[makers[i].name].err = err
		}
	}
	populateAll := func(from, to int) {
		for i, s := range subs {
			if s == nil || load.cells[makers[i].name].err != nil && rebuild.cells[makers[i].name].err != nil {
				continue
			}
			if err := populate(ctx, s, sz.loadEvents, from, to, loadAgg); err != nil {
				fail(i, err)
			}
		}
	}
	if reads {
		populateAll(0, sz.feedEvents)
		if has(cfg.workloads, "load") {
			measure(ctx, sz.reps, makers, subs, load, func(s subject) (float64, int64, error) {
				rate, err := timeRate(sz.loadEvents*sz.loads, func() (int, error) {
					total := 0
					for range sz.loads {
						n, err := s.load(ctx, loadAgg)
						if err != nil {
							return total, err
						}
						total += n
					}
					return total, nil
				})
				return rate, 0, err
			})
			emit(load)
		}
		if has(cfg.workloads, "feed") {
			measure(ctx, sz.reps, makers, subs, feed, func(s subject) (float64, int64, error) {
				rate, err := timeRate(sz.feedEvents, func() (int, error) { return s.feed(ctx) })
				return rate, 0, err
			})
			emit(feed)
		}
	}
	if has(cfg.workloads, "rebuild") && ctx.Err() == nil {
		if reads {
			populateAll(sz.feedEvents, sz.rebuild)
		} else {
			populateAll(0, sz.rebuild)
		}
		measure(ctx, sz.reps, makers, subs, rebuild, func(s subject) (float64, int64, error) {
			rate, err := timeRate(sz.rebuild, func() (int, error) { return s.rebuild(ctx) })
			return rate, 0, err
		})
		emit(rebuild)
	}
	closeAll(makers, subs, rebuild)
}

// printHeader prints the table's header for subjects.
func printHeader(w io.Writer, subjects []string) {
	cols := []string{"backend", "workload"}
	for _, s := range subjects {
		cols = append(cols, s+" ev/s")
	}
	for _, s := range subjects[1:] {
		if subjects[0] == "ours" {
			cols = append(cols, "ours/"+s)
		}
	}
	cols = append(cols, "retries / notes")
	fmt.Fprintln(w, "| "+strings.Join(cols, " | ")+" |")
	fmt.Fprintln(w, strings.Repeat("|---", len(cols))+"|")
}

// printRow prints one row of the table: median rates, ratios of ours to
// every other subject (above 1: ours is faster) and, for the contended
// workloads, the retries of each subject over all repetitions.
func printRow(w io.Writer, subjects []string, r row) {
	cols := []string{r.backend, r.workload}
	for _, s := range subjects {
		cols = append(cols, rate(r.cells[s]))
	}
	ours := r.cells["ours"]
	for _, s := range subjects[1:] {
		if subjects[0] != "ours" {
			break
		}
		c := r.cells[s]
		switch {
		case ours == nil || c == nil || ours.err != nil || c.err != nil || len(ours.rates) == 0 || len(c.rates) == 0:
			cols = append(cols, "–")
		default:
			cols = append(cols, fmt.Sprintf("%.2f", ours.median()/c.median()))
		}
	}
	var retries []string
	if r.contended {
		for _, s := range subjects {
			if c := r.cells[s]; c != nil && c.err == nil {
				retries = append(retries, fmt.Sprintf("%s %d", s, c.retries))
			}
		}
	}
	if r.note != "" {
		retries = append(retries, r.note)
	}
	cols = append(cols, strings.Join(retries, ", "))
	fmt.Fprintln(w, "| "+strings.Join(cols, " | ")+" |")
}

func rate(c *cell) string {
	switch {
	case c == nil:
		return "n/a"
	case c.err != nil:
		return "error"
	case len(c.rates) == 0:
		return "–"
	}
	return formatRate(c.median())
}

// formatRate formats a rate of events per second with a unit prefix.
func formatRate(m float64) string {
	switch {
	case m >= 1e6:
		return fmt.Sprintf("%.2fM", m/1e6)
	case m >= 1e3:
		return fmt.Sprintf("%.1fk", m/1e3)
	}
	return fmt.Sprintf("%.0f", m)
}

// printErrors lists the cells that failed, below the table.
func printErrors(w io.Writer, rows []row) {
	for _, r := range rows {
		for name, c := range r.cells {
			if c.err != nil {
				fmt.Fprintf(w, "error: %s %s %s: %v\n", r.backend, r.workload, name, c.err)
			}
		}
	}
}

// cellErrors returns every failure of rows, for the test.
func cellErrors(rows []row) error {
	var errs []error
	for _, r := range rows {
		for name, c := range r.cells {
			if c.err != nil {
				errs = append(errs, fmt.Errorf("%s %s %s: %w", r.backend, r.workload, name, c.err))
			}
		}
	}
	return errors.Join(errs...)
}
