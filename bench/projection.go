package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/google/uuid"
)

// The projection benchmark (-projection N) rebuilds a new single
// projection (count and set, an instance per aggregate) over N events of
// one type on SQLite and PostgreSQL, alternating the backends in one run,
// and splits each PostgreSQL rebuild into its storage calls:
//
//	cd bench && go run . -projection 300k -backends sqlite,postgres
//
// Each store is filled through SaveAll with 100 aggregates × 10 events a
// call, over -projection-instances aggregates taken in turn, so that a
// page of 1,000 feed entries touches about 100 instances (as the growth
// benchmark's 10-event saves do). A rebuild is Create and Sync of a new
// definition, timed, then Delete. A second rebuild per repetition runs
// through a storage that times ReadFeed, LoadProjections and
// CommitProjection (the rest is apply and waiting for a read), and on PostgreSQL reads
// pg_stat_user_tables of projection_states_rows before and after: rows
// inserted, updated, updated HOT, dead.

// projSplit is what the timed rebuild spent, summed over its pages.
type projSplit struct {
	pages, loads, commits atomic.Int64
	read, load, commit    atomic.Int64 // ns
	rows                  atomic.Int64 // states committed
}

// note says where a rebuild that took total spent it, per page.
func (s *projSplit) note(total time.Duration) string {
	pages := max(s.pages.Load(), 1)
	ms := func(ns int64) float64 { return float64(ns) / float64(pages) / 1e6 }
	read, load, commit := s.read.Load(), s.load.Load(), s.commit.Load()
	// The Projector reads a page ahead while it applies and commits the
	// one before: reads overlap the rest.
	rest := int64(total) - load - commit
	return fmt.Sprintf("%d pages, per page %.2f ms: read %.2f ms (overlaps), load %.2f ms (%d calls), commit %.2f ms (%.0f states), the rest (apply, waiting for the read) %.2f ms",
		s.pages.Load(), ms(int64(total)), ms(read), ms(load), s.loads.Load(), ms(commit),
		float64(s.rows.Load())/float64(pages), ms(rest))
}

// timedStorage times the calls of a rebuild.
type timedStorage struct {
	storage.Storage
	s *projSplit
}

func (t timedStorage) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	t0 := time.Now()
	p, err := t.Storage.ReadFeed(ctx, q)
	t.s.read.Add(int64(time.Since(t0)))
	t.s.pages.Add(1)
	return p, err
}

func (t timedStorage) LoadProjections(ctx context.Context, name string, ids []string) ([]storage.ProjectionState, error) {
	t0 := time.Now()
	st, err := t.Storage.LoadProjections(ctx, name, ids)
	t.s.load.Add(int64(time.Since(t0)))
	t.s.loads.Add(1)
	return st, err
}

func (t timedStorage) CommitProjection(ctx context.Context, c storage.ProjectionCommit) error {
	t0 := time.Now()
	err := t.Storage.CommitProjection(ctx, c)
	t.s.commit.Add(int64(time.Since(t0)))
	t.s.commits.Add(1)
	t.s.rows.Add(int64(len(c.States)))
	return err
}

// projBench is one backend's store of the projection benchmark.
type projBench struct {
	backend string
	raw     storage.Storage
	store   *eventstore.Store
	timed   *eventstore.Store
	split   *projSplit
	schema  string // PostgreSQL
	n       int
	batch   int // the Projector's BatchSize, 0 for its default
}

func openProjBench(ctx context.Context, b, dir string, env *pgEnv) (*projBench, error) {
	p := &projBench{backend: b, split: &projSplit{}}
	var err error
	switch b {
	case "sqlite":
		p.raw, err = sqlite.Open(filepath.Join(dir, "projection.db"), nil)
	case "postgres":
		p.schema = env.schema("projection")
		p.raw, err = postgres.OpenURL(ctx, env.withParams(fmt.Sprintf("pool_max_conns=%d", env.conns)),
			&postgres.Options{Schema: p.schema})
	default:
		return nil, fmt.Errorf("-projection: backend %q not supported (sqlite, postgres)", b)
	}
	if err != nil {
		return nil, err
	}
	if p.store, err = eventstore.New(p.raw, nil); err != nil {
		return nil, err
	}
	if p.timed, err = eventstore.New(timedStorage{p.raw, p.split}, nil); err != nil {
		return nil, err
	}
	return p, nil
}

// fill saves n events of type "order" over instances aggregates.
func (p *projBench) fill(ctx context.Context, n, instances int) error {
	const perAgg, writers = 10, 4
	perCall := min(100, instances)
	calls := (n + perAgg*perCall - 1) / (perAgg * perCall)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c := int(next.Add(1)) - 1
				if c >= calls {
					return
				}
				batches := make([]eventstore.Batch, perCall)
				for j := range batches {
					a := (c*perCall + j) % instances
					events := make([]eventstore.NewEvent, perAgg)
					for k := range events {
						events[k] = eventstore.NewEvent{ID: uuid.NewString(), Type: growthEventType,
							Data: growthPayload((c*perCall+j)*perAgg + k)}
					}
					batches[j] = eventstore.Batch{AggregateID: fmt.Sprintf("a%07d", a), Events: events}
				}
				if _, err := p.store.SaveAll(ctx, growthTypes[0], batches); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	p.n = calls * perAgg * perCall
	return errors.Join(errs...)
}

// rebuild creates, syncs and deletes a new single projection through s
// and returns its events/s.
func (p *projBench) rebuild(ctx context.Context, s *eventstore.Store, name string) (float64, error) {
	proj := eventstore.NewProjector(s, &eventstore.ProjectorOptions{BatchSize: p.batch})
	def := eventstore.Definition{Name: name, Feed: growthTypes[0],
		Handlers: []eventstore.Handler{{EventType: growthEventType, Functions: []eventstore.Function{
			{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"},
			{Name: eventstore.FuncSet, TargetSelector: "$.projection.status", EventSelector: "$.event.status"},
		}}}}
	runtime.GC()
	t0 := time.Now()
	if err := proj.Create(ctx, def); err != nil {
		return 0, err
	}
	if err := proj.CatchUp(ctx, name); err != nil {
		return 0, fmt.Errorf("rebuild: %w", err)
	}
	rate := float64(p.n) / time.Since(t0).Seconds()
	if st, err := proj.Status(ctx, name); err != nil || len(st.Errors) > 0 {
		return 0, fmt.Errorf("rebuild status: %v %v", err, st.Errors)
	}
	return rate, proj.Delete(ctx, name)
}

// pgTableStats returns pg_stat_user_tables' inserted, updated, HOT-updated
// and dead rows of the schema's projection_states_rows.
func pgTableStats(ctx context.Context, env *pgEnv, schema string) ([4]int64, error) {
	var s [4]int64
	// Backends report their counts when idle, at most once a second.
	time.Sleep(2 * time.Second)
	err := env.admin.QueryRow(ctx, `SELECT n_tup_ins, n_tup_upd, n_tup_hot_upd, n_dead_tup FROM pg_stat_user_tables
WHERE schemaname = $1 AND relname = 'projection_states_rows'`, schema).Scan(&s[0], &s[1], &s[2], &s[3])
	return s, err
}

func runProjection(ctx context.Context, cfg config, n, instances, batch int, out io.Writer) error {
	var env *pgEnv
	if has(cfg.backends, "postgres") {
		var err error
		if env, err = newPGEnv(ctx, cfg.pgURL, cfg.pgConns, 1); err != nil {
			return err
		}
		defer env.close(context.Background())
	}
	dir, err := os.MkdirTemp(cfg.dir, "eventstore-projection-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var benches []*projBench
	defer func() {
		for _, p := range benches {
			p.store.Close()
		}
	}()
	for _, b := range cfg.backends {
		p, err := openProjBench(ctx, b, dir, env)
		if err != nil {
			return err
		}
		p.batch = batch
		benches = append(benches, p)
		t0 := time.Now()
		if err := p.fill(ctx, n, instances); err != nil {
			return fmt.Errorf("%s fill: %w", b, err)
		}
		fmt.Fprintf(out, "# %s: filled %d events over %d instances in %.1f s\n", b, p.n, instances, time.Since(t0).Seconds())
	}
	rates := map[string][]float64{}
	for rep := range cfg.sizes.reps {
		for _, p := range benches {
			rate, err := p.rebuild(ctx, p.store, fmt.Sprintf("plain%d", rep))
			if err != nil {
				return fmt.Errorf("%s: %w", p.backend, err)
			}
			rates[p.backend] = append(rates[p.backend], rate)
			fmt.Fprintf(out, "rep %d %-8s %8.0f ev/s\n", rep, p.backend, rate)
		}
		for _, p := range benches {
			*p.split = projSplit{}
			var before, after [4]int64
			if p.schema != "" {
				if before, err = pgTableStats(ctx, env, p.schema); err != nil {
					return err
				}
			}
			t0 := time.Now()
			rate, err := p.rebuild(ctx, p.timed, fmt.Sprintf("timed%d", rep))
			if err != nil {
				return fmt.Errorf("%s timed: %w", p.backend, err)
			}
			fmt.Fprintf(out, "rep %d %-8s %8.0f ev/s timed: %s", rep, p.backend, rate, p.split.note(time.Since(t0)))
			if p.schema != "" {
				if after, err = pgTableStats(ctx, env, p.schema); err != nil {
					return err
				}
				fmt.Fprintf(out, "; states rows ins %d upd %d hot %d dead %d",
					after[0]-before[0], after[1]-before[1], after[2]-before[2], after[3])
			}
			fmt.Fprintln(out)
		}
	}
	var parts []string
	for _, p := range benches {
		parts = append(parts, fmt.Sprintf("%s %.0f ev/s", p.backend, median(rates[p.backend])))
	}
	line := strings.Join(parts, ", ")
	if r := rates["sqlite"]; len(r) > 0 && len(rates["postgres"]) > 0 {
		line += fmt.Sprintf("; postgres ÷ sqlite %.2f", median(rates["postgres"])/median(r))
	}
	fmt.Fprintf(out, "median of %d: %s\n", cfg.sizes.reps, line)
	return nil
}
