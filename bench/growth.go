package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/google/uuid"
)

// The growth benchmark (-growth) fills one store per backend, through the
// library's public API, to each of a list of sizes and measures at each
// the figures that should not depend on the size, against size 0:
//
//	cd bench && go run . -growth 0,100000,300000 -backends memory,sqlite,postgres
//
// The store holds aggregates of three types (growthTypes), written by 8
// writers in saves of 10 events of about 140 bytes each; there are
// max(size)/30 aggregates, so that each holds about 30 events at the
// largest size (100,000 aggregates at 3,000,000 events). At each size it
// measures, in this order:
//
//   - saves: 8 writers each saving 1 event at a time to aggregates of the
//     store (stating the expected version), after a quarter of that
//     unmeasured, events/s over -append-for or
//     until they saved 2 % of the largest size (at least 2,000 events);
//   - the same saves alternating with saves to a small store of the same
//     backend (100 aggregates, kept beside the big one from the start and
//     growing only by these saves), growthAlternations times each for
//     half of -append-for, in turn first: the median of the ratios of
//     each pair (the big store's rate over the small one's), which the
//     load of a shared machine moves far less than the ratio of the saves
//     at two sizes measured minutes apart;
//   - loads of a 10-event and a 1,000-event aggregate (written before size
//     0), ms per load;
//   - the type feed of "order" (a third of the events): the whole feed in
//     pages of 1,000 entries (events/s), then, alternately, the first
//     1,000 entries and the last 1,000 (after the cursor the whole read
//     gave 1,000 entries before its end), in turn first, ms per read and
//     the median of each pair's ratio (last over first), each through the
//     Store and, on PostgreSQL, through a second Store whose pool prepares
//     no statement (default_query_exec_mode=exec: every statement planned
//     for its arguments, as a one-off; the first runs prepared statements,
//     which PostgreSQL serves with a generic plan after five executions);
//   - a new single projection over "order" (count and set, an instance per
//     aggregate) and a new aggregated one (sum and count), events/s of
//     CatchUp from scratch, each deleted after, and where each rebuild's
//     time went per page of the feed (its feed reads, instance loads and
//     commits, timed by a timedStorage under the Projector's Store; on
//     PostgreSQL also the rows of the states table inserted, updated,
//     updated HOT, and dead after);
//   - bytes on disk per stored event, against the mean payload: the
//     database file and its WAL for SQLite, the events table with its
//     indexes and TOAST for PostgreSQL (with each index's share).
//
// The measured saves add events; the next fill counts them.

// growthTypes are the aggregate types of the growth store; the feed and
// the projections read the first.
var growthTypes = []string{"order", "customer", "item"}

const (
	growthWriters   = 8
	growthSave      = 10 // events per save of the fill
	growthPage      = 1000
	growthEventType = "Changed"
	growthFixture   = "fixture" // the type of the aggregates loaded
	// growthAlternations is how many times the saves to the store and to
	// the small store alternate at each size.
	growthAlternations = 10
)

// growthSizes are the store sizes of a growth run, ascending, from 0.
type growthSizes []int

// parseGrowth parses -growth: "" for none, else a comma-separated list of
// event counts (suffixes k and M allowed), to which 0 is added.
func parseGrowth(s string) (growthSizes, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := growthSizes{0}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		mult := 1
		switch {
		case strings.HasSuffix(f, "k"):
			mult, f = 1000, strings.TrimSuffix(f, "k")
		case strings.HasSuffix(f, "M"):
			mult, f = 1_000_000, strings.TrimSuffix(f, "M")
		}
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 0 || n > 100_000_000/mult {
			return nil, fmt.Errorf("-growth: %q is not a number of events between 0 and 100M", f)
		}
		out = append(out, n*mult)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// growthPayload returns the data of event k of the fill: about 140 bytes.
func growthPayload(k int) []byte {
	return fmt.Appendf(nil, `{"amount":%d,"status":"s%d","sku":"SKU-%08d","customer":"customer-%08d","note":"an event of the growth benchmark, with some more text"}`,
		k%10_000, k%7, k%100_003, k%50_021)
}

// growthStore is the store of one backend under a growth run.
type growthStore struct {
	backend string
	store   *eventstore.Store
	// oneOff is a second Store on the same data whose statements are
	// never prepared (PostgreSQL only, else nil).
	oneOff *eventstore.Store
	proj   *eventstore.Projector
	// split times the storage calls of proj's rebuilds: proj runs on a
	// Store of its own over the same storage, wrapped by timedStorage
	// (projection.go).
	split *projSplit
	// pgStats returns pg_stat_user_tables' figures of the projection
	// states (PostgreSQL only, else nil): see pgTableStats.
	pgStats func(ctx context.Context) ([4]int64, error)
	// env and schema are PostgreSQL's (nil, "" elsewhere); walCompression
	// is -growth-wal-compression (see growthwal.go).
	env            *pgEnv
	schema         string
	walCompression string
	// most, when set, caps each writer's saves of a saveRate (-growth-wal).
	most []int
	// bytes returns the bytes on disk of the stored events, with a note
	// (PostgreSQL: each index's share); nil for memory.
	bytes   func(ctx context.Context) (int64, string, error)
	cleanup func() error

	aggs     int     // aggregates of the fill
	versions []int64 // per aggregate; aggregate i is written by writer i % growthWriters only
	next     []int   // per writer: the index of its next aggregate among its own
	events   int     // events appended by the fill and the measured saves
	payload  int64   // bytes of their payloads
	k        int     // events generated, for payloads
	kmu      sync.Mutex
	nproj    int
	// small is the small store of the same backend that the saves are
	// alternated with (nil in the small store itself).
	small *growthStore
	// uuidIDs makes the aggregate ids UUIDs (-growth-uuid-ids), in no
	// order, instead of a0000000, a0000001, ..., which the writers save to
	// in order.
	uuidIDs bool
}

func (g *growthStore) aggID(i int) (typ, id string) {
	if g.uuidIDs {
		return growthTypes[i%len(growthTypes)], uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "a%07d", i)).String()
	}
	return growthTypes[i%len(growthTypes)], fmt.Sprintf("a%07d", i)
}

// payloads returns n payloads and adds them to the totals.
func (g *growthStore) payloads(n int) [][]byte {
	g.kmu.Lock()
	defer g.kmu.Unlock()
	out := make([][]byte, n)
	for i := range out {
		out[i] = growthPayload(g.k)
		g.k++
		g.payload += int64(len(out[i]))
	}
	g.events += n
	return out
}

// save appends n events to writer w's next aggregate.
func (g *growthStore) save(ctx context.Context, w, n int) error {
	own := (g.aggs - w + growthWriters - 1) / growthWriters
	i := w + growthWriters*(g.next[w]%own)
	g.next[w]++
	typ, id := g.aggID(i)
	data := g.payloads(n)
	events := make([]eventstore.NewEvent, n)
	for j := range events {
		events[j] = eventstore.NewEvent{ID: uuid.NewString(), Type: growthEventType, Data: data[j]}
	}
	res, err := g.store.Save(ctx, typ, id, events,
		&eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(g.versions[i])})
	if err != nil {
		return err
	}
	g.versions[i] = res.Version
	return nil
}

// fill appends saves of growthSave events by growthWriters writers until
// the store holds at least size events.
func (g *growthStore) fill(ctx context.Context, size int) error {
	missing := size - g.events
	if missing <= 0 {
		return nil
	}
	saves := (missing + growthSave - 1) / growthSave
	return g.writers(ctx, func(w int, stop func() bool) error {
		for s := w; s < saves && !stop(); s += growthWriters {
			if err := g.save(ctx, w, growthSave); err != nil {
				return err
			}
		}
		return nil
	})
}

// writers runs f for each writer in a goroutine of its own; stop reports
// whether another writer failed.
func (g *growthStore) writers(ctx context.Context, f func(w int, stop func() bool) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, growthWriters)
	for w := range growthWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[w] = f(w, func() bool { return ctx.Err() != nil }); errs[w] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// saveRate measures 1-event saves by growthWriters writers for d.
func (g *growthStore) saveRate(ctx context.Context, d time.Duration) (float64, error) {
	counts := make([]int, growthWriters)
	start := time.Now()
	end := start.Add(d)
	// A cap keeps a fast backend from growing the store much between
	// sizes (memory saves ~100k events a second).
	most := max(2000, g.aggs*30/50) / growthWriters
	err := g.writers(ctx, func(w int, stop func() bool) error {
		most := most
		if g.most != nil {
			most = g.most[w]
		}
		for time.Now().Before(end) && !stop() && counts[w] < most {
			if err := g.save(ctx, w, 1); err != nil {
				return err
			}
			counts[w]++
		}
		return nil
	})
	total := 0
	for _, c := range counts {
		total += c
	}
	return float64(total) / time.Since(start).Seconds(), err
}

// alternateSaves measures 1-event saves to g and to its small store in
// turn, growthAlternations times each for d, and returns the ratios of
// g's rate to the small store's, sorted.
func (g *growthStore) alternateSaves(ctx context.Context, d time.Duration) ([]float64, error) {
	if g.small == nil {
		return nil, nil
	}
	if _, err := g.small.saveRate(ctx, d/4); err != nil { // warm, as for g
		return nil, err
	}
	var ratios []float64
	for i := range growthAlternations {
		var big, small float64
		var err error
		first, second := &big, &small
		a, b := g, g.small
		if i%2 == 1 {
			first, second, a, b = second, first, b, a
		}
		if *first, err = a.saveRate(ctx, d); err != nil {
			return nil, err
		}
		if *second, err = b.saveRate(ctx, d); err != nil {
			return nil, err
		}
		ratios = append(ratios, big/small)
	}
	slices.Sort(ratios)
	return ratios, nil
}

// growthFigures are the figures measured at one size; NaN-free: a figure
// not measured is 0.
type growthFigures struct {
	events                  int
	fill                    float64 // events/s of the fill up to this size (saves of growthSave events)
	saves                   float64 // events/s
	load10, load1000        float64 // ms per load
	feedRate                float64 // events/s of the whole type feed
	first, last             float64 // ms per read of 1,000 entries, prepared
	firstOneOff, lastOneOff float64 // the same, one-off statements
	// lastVsFirst and lastVsFirstOneOff are the medians of the ratios of
	// the reads of each pair (the last 1,000 entries and the first, read
	// one after the other, in turn first).
	lastVsFirst, lastVsFirstOneOff float64
	single, aggregated             float64 // events/s of the rebuilds
	// singleSplit and aggregatedSplit say where each rebuild's time went
	// (see growthStore.splitNote).
	singleSplit, aggregatedSplit string
	bytesPerEvent, payload       float64
	bytesNote                    string
	// savesVsSmall are the ratios of the alternated saves, sorted (see
	// growthAlternations).
	savesVsSmall             []float64
	typeEvents, singleEvents int
}

// openGrowth opens the store of backend b for a run whose largest size is
// top; dir holds SQLite's file.
func openGrowth(ctx context.Context, b string, top int, dir string, env *pgEnv) (*growthStore, error) {
	g := &growthStore{backend: b, aggs: max(100, top/30), split: &projSplit{}}
	g.versions = make([]int64, g.aggs)
	g.next = make([]int, growthWriters)
	var s storage.Storage
	var err error
	switch b {
	case "memory":
		s = memory.New()
	case "sqlite":
		path := filepath.Join(dir, "growth.db")
		if s, err = sqlite.Open(path, nil); err != nil {
			return nil, err
		}
		g.bytes = func(context.Context) (int64, string, error) {
			var total int64
			for _, suffix := range []string{"", "-wal"} {
				fi, err := os.Stat(path + suffix)
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					return 0, "", err
				}
				if err == nil {
					total += fi.Size()
				}
			}
			return total, "", nil
		}
	case "postgres":
		schema := env.schema("growth")
		g.cleanup = func() error { return env.drop(context.Background(), schema) }
		if s, err = postgres.OpenURL(ctx, env.withParams(fmt.Sprintf("pool_max_conns=%d", env.conns)),
			&postgres.Options{Schema: schema}); err != nil {
			return nil, err
		}
		one, err := postgres.OpenURL(ctx, env.withParams(fmt.Sprintf("pool_max_conns=%d", env.conns),
			"default_query_exec_mode=exec"), &postgres.Options{Schema: schema})
		if err != nil {
			s.Close()
			return nil, err
		}
		if g.oneOff, err = eventstore.New(one, nil); err != nil {
			return nil, err
		}
		g.bytes = func(ctx context.Context) (int64, string, error) { return pgEventBytes(ctx, env, schema) }
		g.pgStats = func(ctx context.Context) ([4]int64, error) { return pgTableStats(ctx, env, schema) }
		g.env, g.schema = env, schema
	default:
		return nil, fmt.Errorf("growth: unknown backend %q", b)
	}
	if g.store, err = eventstore.New(s, nil); err != nil {
		return nil, err
	}
	timed, err := eventstore.New(timedStorage{s, g.split}, nil)
	if err != nil {
		return nil, err
	}
	g.proj = eventstore.NewProjector(timed, nil)
	// The aggregates loaded: 10 and 1,000 events, before size 0.
	for _, n := range []int{10, 1000} {
		for v := 0; v < n; v += 100 {
			k := min(100, n-v)
			events := make([]eventstore.NewEvent, k)
			for j := range events {
				events[j] = eventstore.NewEvent{ID: uuid.NewString(), Type: growthEventType, Data: growthPayload(j)}
			}
			if _, err := g.store.Save(ctx, growthFixture, fmt.Sprint("load", n), events,
				&eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(int64(v / 100))}); err != nil {
				return nil, err
			}
		}
	}
	return g, nil
}

// pgEventBytes returns the size of the events table of schema with its
// indexes and TOAST, and a note of each index's size.
func pgEventBytes(ctx context.Context, env *pgEnv, schema string) (int64, string, error) {
	table := schema + ".events_rows"
	var total, heap, events int64
	if err := env.admin.QueryRow(ctx, `SELECT pg_total_relation_size($1::regclass), pg_table_size($1::regclass),
	(SELECT count(*) FROM `+table+`)`, table).Scan(&total, &heap, &events); err != nil {
		return 0, "", err
	}
	rows, err := env.admin.Query(ctx, `SELECT c.relname, pg_relation_size(c.oid) FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = $1::regclass ORDER BY 2 DESC`, table)
	if err != nil {
		return 0, "", err
	}
	defer rows.Close()
	notes := []string{fmt.Sprintf("table %.0f", float64(heap)/float64(max(events, 1)))}
	for rows.Next() {
		var name string
		var size int64
		if err := rows.Scan(&name, &size); err != nil {
			return 0, "", err
		}
		notes = append(notes, fmt.Sprintf("%s %.0f", strings.TrimPrefix(name, "events_"), float64(size)/float64(max(events, 1))))
	}
	return total, strings.Join(notes, ", "), rows.Err()
}

// close releases the stores and what they created.
func (g *growthStore) close() error {
	errs := []error{g.store.Close()}
	if g.small != nil {
		errs = append(errs, g.small.close())
	}
	if g.oneOff != nil {
		errs = append(errs, g.oneOff.Close())
	}
	if g.cleanup != nil {
		errs = append(errs, g.cleanup())
	}
	return errors.Join(errs...)
}

// measure takes the figures at the store's current size (all but fill).
func (g *growthStore) measure(ctx context.Context, appendFor time.Duration, reads int) (growthFigures, error) {
	f := growthFigures{events: g.events}
	// Unmeasured saves first, so that the pool's connections are open and
	// statements prepared (the first size measures a new store).
	if _, err := g.saveRate(ctx, appendFor/4); err != nil {
		return f, fmt.Errorf("saves: %w", err)
	}
	f.events = g.events
	var err error
	runtime.GC()
	if f.saves, err = g.saveRate(ctx, appendFor); err != nil {
		return f, fmt.Errorf("saves: %w", err)
	}
	if f.savesVsSmall, err = g.alternateSaves(ctx, appendFor/2); err != nil {
		return f, fmt.Errorf("alternated saves: %w", err)
	}
	for _, l := range []struct {
		n  int
		ms *float64
	}{{10, &f.load10}, {1000, &f.load1000}} {
		if *l.ms, err = timeMedian(reads, func() error {
			a, err := g.store.Load(ctx, growthFixture, fmt.Sprint("load", l.n))
			if err == nil && len(a.Events) != l.n {
				err = fmt.Errorf("load %d: %d events", l.n, len(a.Events))
			}
			return err
		}); err != nil {
			return f, err
		}
	}
	// The whole type feed, keeping every entry's cursor.
	var cursors []int64
	start := time.Now()
	var after int64
	for {
		r, err := g.store.ReadFeed(ctx, growthTypes[0], after, &eventstore.FeedOptions{Limit: growthPage})
		if err != nil {
			return f, fmt.Errorf("feed: %w", err)
		}
		for _, e := range r.Entries {
			f.typeEvents += len(e.Events)
			cursors = append(cursors, e.Cursor)
		}
		if len(r.Entries) == 0 {
			break
		}
		after = r.Next
	}
	f.feedRate = float64(f.typeEvents) / time.Since(start).Seconds()
	if len(cursors) > 0 {
		// After the entry before the last growthPage: the last page.
		var last int64
		if len(cursors) > growthPage {
			last = cursors[len(cursors)-growthPage-1]
		}
		stores := []struct {
			s                  *eventstore.Store
			first, last, ratio *float64
		}{{g.store, &f.first, &f.last, &f.lastVsFirst}, {g.oneOff, &f.firstOneOff, &f.lastOneOff, &f.lastVsFirstOneOff}}
		for _, st := range stores {
			if st.s == nil {
				continue
			}
			var firsts, lasts []float64
			for i := range reads {
				pair := []struct {
					after int64
					into  *[]float64
				}{{0, &firsts}, {last, &lasts}}
				if i%2 == 1 {
					// In turn first: with the first page always read
					// first, the second read of a pair took 1.37× (SQLite)
					// and 1.68× (PostgreSQL) the first's time at size 0,
					// where both read the same page (the type has fewer
					// than 1,000 entries; run of 2026-12-06).
					pair[0], pair[1] = pair[1], pair[0]
				}
				for _, c := range pair {
					t0 := time.Now()
					r, err := st.s.ReadFeed(ctx, growthTypes[0], c.after, &eventstore.FeedOptions{Limit: growthPage})
					if err != nil {
						return f, fmt.Errorf("feed page: %w", err)
					}
					if len(r.Entries) == 0 {
						return f, fmt.Errorf("feed page after %d: empty", c.after)
					}
					*c.into = append(*c.into, float64(time.Since(t0).Microseconds())/1000)
				}
			}
			*st.first, *st.last = median(firsts), median(lasts)
			ratios := make([]float64, len(firsts))
			for i := range firsts {
				ratios[i] = lasts[i] / firsts[i]
			}
			*st.ratio = median(ratios)
		}
	}
	for _, aggregated := range []bool{false, true} {
		g.nproj++
		name := fmt.Sprintf("growth%d", g.nproj)
		def := eventstore.Definition{Name: name, Feed: growthTypes[0], Aggregated: aggregated,
			Handlers: []eventstore.Handler{{EventType: growthEventType, Functions: []eventstore.Function{
				{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"},
				{Name: eventstore.FuncSet, TargetSelector: "$.projection.status", EventSelector: "$.event.status"},
			}}}}
		if aggregated {
			def.Handlers[0].Functions[1] = eventstore.Function{Name: eventstore.FuncAdd,
				TargetSelector: "$.projection.total", EventSelector: "$.event.amount"}
		}
		var before [4]int64
		if g.pgStats != nil {
			if before, err = g.pgStats(ctx); err != nil {
				return f, err
			}
		}
		*g.split = projSplit{}
		runtime.GC()
		t0 := time.Now()
		if err := g.proj.Create(ctx, def); err != nil {
			return f, err
		}
		if err := g.proj.CatchUp(ctx, name); err != nil {
			return f, fmt.Errorf("rebuild: %w", err)
		}
		took := time.Since(t0)
		rate := float64(f.typeEvents) / took.Seconds()
		if st, err := g.proj.Status(ctx, name); err != nil || len(st.Errors) > 0 {
			return f, fmt.Errorf("rebuild status: %v %v", err, st.Errors)
		}
		note := g.split.note(took)
		if g.pgStats != nil {
			after, err := g.pgStats(ctx)
			if err != nil {
				return f, err
			}
			note += fmt.Sprintf("; states rows ins %d upd %d hot %d, dead %d after",
				after[0]-before[0], after[1]-before[1], after[2]-before[2], after[3])
		}
		if aggregated {
			f.aggregated, f.aggregatedSplit = rate, note
		} else {
			f.single, f.singleSplit = rate, note
		}
		if err := g.proj.Delete(ctx, name); err != nil {
			return f, err
		}
	}
	f.payload = float64(g.payload) / float64(max(g.events, 1))
	if g.bytes != nil {
		total, note, err := g.bytes(ctx)
		if err != nil {
			return f, fmt.Errorf("bytes: %w", err)
		}
		f.bytesPerEvent, f.bytesNote = float64(total)/float64(g.events+1010), note
	}
	return f, nil
}

// timeMedian runs f n times and returns the median duration in ms.
func timeMedian(n int, f func() error) (float64, error) {
	var ms []float64
	for range n {
		t0 := time.Now()
		if err := f(); err != nil {
			return 0, err
		}
		ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
	}
	return median(ms), nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s[len(s)/2]
}

// runGrowth runs the growth benchmark on every backend of cfg and prints
// a table per backend, then the ratios between backends.
func runGrowth(ctx context.Context, cfg config, sizes growthSizes, reads int, wal *growthWAL, uuidIDs bool, out io.Writer) error {
	var env *pgEnv
	if has(cfg.backends, "postgres") {
		var err error
		if env, err = newPGEnv(ctx, cfg.pgURL, cfg.pgConns, 1); err != nil {
			return err
		}
	}
	dir, err := os.MkdirTemp(cfg.dir, "eventstore-growth-")
	if err != nil {
		return err
	}
	figs, err := growBackends(ctx, cfg.backends, sizes, cfg.sizes.appendFor, reads, dir, env, wal, uuidIDs)
	if rerr := os.RemoveAll(dir); err == nil {
		err = rerr
	}
	if env != nil {
		if cerr := env.close(context.Background()); err == nil {
			err = cerr
		}
	}
	for _, b := range cfg.backends {
		printGrowth(out, b, figs[b])
	}
	printAcross(out, cfg.backends, figs)
	return err
}

// growBackends opens a store of every backend, fills each to every size in
// turn and measures them there one after the other, starting with the next
// backend at each size, so that the load of a shared machine falls on all
// of them alike. It returns the figures per backend.
func growBackends(ctx context.Context, backends []string, sizes growthSizes, appendFor time.Duration, reads int,
	dir string, env *pgEnv, wal *growthWAL, uuidIDs bool) (map[string][]growthFigures, error) {
	stores := make([]*growthStore, len(backends))
	closeAll := func() error {
		var errs []error
		for _, g := range stores {
			if g != nil {
				errs = append(errs, g.close())
			}
		}
		return errors.Join(errs...)
	}
	for i, b := range backends {
		d := filepath.Join(dir, b)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, errors.Join(err, closeAll())
		}
		g, err := openGrowth(ctx, b, sizes[len(sizes)-1], d, env)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("%s: %w", b, err), closeAll())
		}
		stores[i] = g
		g.uuidIDs = uuidIDs
		ds := filepath.Join(dir, b+"-small")
		if err := os.MkdirAll(ds, 0o755); err != nil {
			return nil, errors.Join(err, closeAll())
		}
		if g.small, err = openGrowth(ctx, b, 0, ds, env); err != nil {
			return nil, errors.Join(fmt.Errorf("%s, small store: %w", b, err), closeAll())
		}
		g.small.uuidIDs = uuidIDs
	}
	figs := make(map[string][]growthFigures)
	for k, size := range sizes {
		fills := make([]float64, len(stores))
		for i, g := range stores {
			before, t0 := g.events, time.Now()
			if err := g.fill(ctx, size); err != nil {
				return figs, errors.Join(fmt.Errorf("%s: fill to %d: %w", g.backend, size, err), closeAll())
			}
			if g.events > before {
				fills[i] = float64(g.events-before) / time.Since(t0).Seconds()
			}
		}
		for _, g := range stores {
			if wal == nil || g.env == nil {
				continue
			}
			g.walCompression = wal.compression
			if err := g.walPhases(ctx, size, appendFor, wal.out); err != nil {
				return figs, errors.Join(fmt.Errorf("%s: WAL at %d: %w", g.backend, size, err), closeAll())
			}
		}
		for j := range stores {
			i := (k + j) % len(stores)
			g := stores[i]
			f, err := g.measure(ctx, appendFor, reads)
			if err != nil {
				return figs, errors.Join(fmt.Errorf("%s: at %d: %w", g.backend, size, err), closeAll())
			}
			f.fill = fills[i]
			figs[g.backend] = append(figs[g.backend], f)
		}
	}
	return figs, closeAll()
}

// printAcross prints, per size, the ratios of PostgreSQL's figures to
// SQLite's that the issue sets targets for.
func printAcross(w io.Writer, backends []string, figs map[string][]growthFigures) {
	pg, lite := figs["postgres"], figs["sqlite"]
	if len(pg) == 0 || len(pg) != len(lite) {
		return
	}
	fmt.Fprintln(w, "| postgres ÷ sqlite | "+strings.Repeat("| ", len(pg)-1)+"|")
	fmt.Fprintln(w, strings.Repeat("|---", len(pg)+1)+"|")
	for _, r := range []struct {
		name string
		get  func(growthFigures) float64
	}{
		{"type feed, whole", func(f growthFigures) float64 { return f.feedRate }},
		{"new single projection", func(f growthFigures) float64 { return f.single }},
		{"new aggregated projection", func(f growthFigures) float64 { return f.aggregated }},
	} {
		cells := []string{r.name}
		for i := range pg {
			cells = append(cells, fmt.Sprintf("%.2f (at %d / %d events)", r.get(pg[i])/r.get(lite[i]), pg[i].events, lite[i].events))
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	}
	fmt.Fprintln(w)
}

// printGrowth prints the figures of one backend, a column per size, each
// with its ratio to size 0 (bytes: to the payload).
func printGrowth(w io.Writer, b string, figs []growthFigures) {
	if len(figs) == 0 {
		return
	}
	cols := []string{b}
	for _, f := range figs {
		cols = append(cols, fmt.Sprintf("%d events", f.events))
	}
	fmt.Fprintln(w, "| "+strings.Join(cols, " | ")+" |")
	fmt.Fprintln(w, strings.Repeat("|---", len(cols))+"|")
	line := func(name, unit string, get func(growthFigures) float64) {
		if get(figs[0]) == 0 {
			return
		}
		cells := []string{name}
		for _, f := range figs {
			v := get(f)
			ratio := v / get(figs[0])
			cells = append(cells, fmt.Sprintf("%s%s (%.2f)", formatFig(v), unit, ratio))
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	}
	if len(figs) > 1 && figs[1].fill > 0 {
		cells := []string{"fill to this size, 10-event saves, 8 writers"}
		for _, f := range figs {
			cells = append(cells, formatFig(f.fill)+" ev/s")
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	}
	line("1-event saves, 8 writers", " ev/s", func(f growthFigures) float64 { return f.saves })
	if len(figs[0].savesVsSmall) > 0 {
		cells := []string{fmt.Sprintf("1-event saves ÷ a small store's, alternating (median of %d; range)", growthAlternations)}
		for _, f := range figs {
			r := f.savesVsSmall
			cells = append(cells, fmt.Sprintf("%.2f (%.2f–%.2f)", median(r), r[0], r[len(r)-1]))
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	}
	line("load of 10 events", " ms", func(f growthFigures) float64 { return f.load10 })
	line("load of 1,000 events", " ms", func(f growthFigures) float64 { return f.load1000 })
	line("type feed, whole", " ev/s", func(f growthFigures) float64 { return f.feedRate })
	line("type feed, first 1,000", " ms", func(f growthFigures) float64 { return f.first })
	line("type feed, last 1,000", " ms", func(f growthFigures) float64 { return f.last })
	line("type feed, first 1,000, one-off", " ms", func(f growthFigures) float64 { return f.firstOneOff })
	line("type feed, last 1,000, one-off", " ms", func(f growthFigures) float64 { return f.lastOneOff })
	line("new single projection", " ev/s", func(f growthFigures) float64 { return f.single })
	line("new aggregated projection", " ev/s", func(f growthFigures) float64 { return f.aggregated })
	// Ratios within a size.
	cells := []string{"last ÷ first 1,000, median of the pairs (prepared / one-off)"}
	for _, f := range figs {
		c := fmt.Sprintf("%.2f", f.lastVsFirst)
		if f.firstOneOff > 0 {
			c += fmt.Sprintf(" / %.2f", f.lastVsFirstOneOff)
		}
		cells = append(cells, c)
	}
	fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	if figs[0].bytesPerEvent > 0 {
		cells = []string{"bytes per event (× payload)"}
		for _, f := range figs {
			cells = append(cells, fmt.Sprintf("%.0f (%.2f×)", f.bytesPerEvent, f.bytesPerEvent/f.payload))
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
		if figs[len(figs)-1].bytesNote != "" {
			fmt.Fprintf(w, "\n%s bytes per event at %d events: %s; payload %.0f bytes\n", b, figs[len(figs)-1].events,
				figs[len(figs)-1].bytesNote, figs[len(figs)-1].payload)
		}
	}
	for i, f := range figs {
		if f.singleSplit != "" {
			fmt.Fprintf(w, "\n%s at %d events, new single projection: %s\n", b, f.events, f.singleSplit)
		}
		if f.aggregatedSplit != "" {
			fmt.Fprintf(w, "%s at %d events, new aggregated projection: %s\n", b, f.events, f.aggregatedSplit)
		}
		if i == len(figs)-1 {
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintln(w)
}

func formatFig(v float64) string {
	if v >= 100 {
		return formatRate(v)
	}
	return fmt.Sprintf("%.2f", v)
}
