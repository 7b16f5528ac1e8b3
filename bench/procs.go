package main

// The cross-process workload: W writers spread over P operating-system
// processes, each process a re-execution of this binary (os.Executable)
// with workerEnv set, all appending to one PostgreSQL schema, as several
// replicas of one service behind a load balancer do. The parent starts the
// workers, waits until every one has opened its pool and warmed up, tells
// them when to start (a wall-clock time, same machine), and sums what each
// reports as one JSON line when its writers are done.
//
// Protocol, one JSON object per line:
//
//	parent → worker stdin:  procSpec
//	worker → parent stdout: procMsg{Ready: true} (or Error)
//	parent → worker stdin:  procGo
//	worker → parent stdout: procMsg{Result: ...} (or Error)
//
// A worker whose stdin closes before the start exits; so does one whose
// parent's context ends (exec.CommandContext kills it).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// workerEnv, set to "1" in a process's environment, makes this binary (or
// the test binary, see TestMain) a worker of the cross-process workload
// instead of the command.
const workerEnv = "EVENTSTORE_BENCH_WORKER"

// Limits of the cross-process workload.
const (
	// maxAckSamples is the most acknowledgements a worker reports per
	// writer (evenly spaced over its saves) for the follower's latency.
	maxAckSamples = 1000
	// procWarmUp is how long every worker appends, unmeasured, before it
	// reports ready: its pool has opened its connections and prepared
	// its statements when the measurement starts.
	procWarmUp = 50 * time.Millisecond
	// procReadyTimeout bounds how long the parent waits for its workers
	// to start, connect and warm up.
	procReadyTimeout = 60 * time.Second
	// procResultGrace is how long after the end of a measurement the
	// parent waits for the workers' results (a save in flight at the end
	// is waited for; the backends bound a save at 30 s).
	procResultGrace = 60 * time.Second
	// followerCatchUp bounds how long the follower may take, after the
	// workers have reported, to see every acknowledged save.
	followerCatchUp = 15 * time.Second
	// latBuckets is the size of a latHist.
	latBuckets = 128
)

// procSpec is what a worker is told to do.
type procSpec struct {
	Proc    int           `json:"proc"`    // index of the worker, for messages
	Subject string        `json:"subject"` // "ours" or "raw"
	URL     string        `json:"url"`     // database URL with the pool's settings
	Schema  string        `json:"schema"`  // the schema the parent created
	Writers int           `json:"writers"` // writer goroutines in this worker
	Batch   int           `json:"batch"`   // events per save
	For     time.Duration `json:"for"`     // how long the writers save
}

// procGo starts a worker's writers at Start (unix nanoseconds).
type procGo struct {
	Start int64 `json:"start"`
}

// procMsg is one line a worker writes.
type procMsg struct {
	Ready  bool        `json:"ready,omitempty"`
	Error  string      `json:"error,omitempty"`
	Result *procResult `json:"result,omitempty"`
}

// procResult is what one worker did in the measurement.
type procResult struct {
	Proc   int    `json:"proc"`
	Saves  int64  `json:"saves"`  // acknowledged saves
	Events int64  `json:"events"` // events of the acknowledged saves
	Errors int64  `json:"errors"` // failed saves (each stops its writer)
	Error  string `json:"error,omitempty"`
	// End is when the worker's last save returned (unix nanoseconds).
	End int64 `json:"end"`
	// Hist counts the latencies of the acknowledged saves (latHist).
	Hist    latHist        `json:"hist"`
	Writers []writerResult `json:"writers"`
}

// writerResult is what one writer did: it saved to aggregate Agg of type
// aggType only, up to Version.
type writerResult struct {
	Agg     string `json:"agg"`
	Version int64  `json:"version"` // the version of its last acknowledged save
	Saves   int64  `json:"saves"`
	Events  int64  `json:"events"`
	// Acks are samples of its acknowledged saves: the version the save
	// produced and when Save returned (unix nanoseconds).
	Acks [][2]int64 `json:"acks"`
}

// latHist counts durations in buckets a quarter of a power of two wide:
// bucket 0 holds those under 1 µs, bucket i > 0 those in
// [2^((i-1)/4), 2^(i/4)) µs, the last everything longer.
type latHist []int64

func newLatHist() latHist { return make(latHist, latBuckets) }

func latBucket(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	return min(latBuckets-1, int(math.Log2(us)*4)+1)
}

func (h latHist) add(d time.Duration) { h[latBucket(d)]++ }

// merge adds o's counts to h.
func (h latHist) merge(o latHist) {
	for i := range min(len(h), len(o)) {
		h[i] += o[i]
	}
}

// quantile returns the upper bound of the bucket that holds quantile q
// (0 < q ≤ 1), or 0 for an empty histogram.
func (h latHist) quantile(q float64) time.Duration {
	var total int64
	for _, n := range h {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(total)))
	var seen int64
	for i, n := range h {
		seen += n
		if seen >= rank {
			return time.Duration(math.Pow(2, float64(i)/4) * float64(time.Microsecond))
		}
	}
	return time.Duration(math.Pow(2, float64(len(h)-1)/4) * float64(time.Microsecond))
}

// workerMain is the whole life of a worker process: read the spec, open
// the subject, warm up, report ready, wait for the start, save, report.
// Failures are reported as an Error line (and as a non-zero exit).
func workerMain(ctx context.Context, in io.Reader, out io.Writer) error {
	enc := json.NewEncoder(out)
	err := worker(ctx, bufio.NewReader(in), enc)
	if err != nil {
		_ = enc.Encode(procMsg{Error: err.Error()})
	}
	return err
}

func worker(ctx context.Context, in *bufio.Reader, enc *json.Encoder) error {
	var spec procSpec
	if err := readLine(in, &spec); err != nil {
		return fmt.Errorf("worker: read spec: %w", err)
	}
	if spec.Writers < 1 || spec.Batch < 1 || spec.For <= 0 {
		return fmt.Errorf("worker %d: bad spec %+v", spec.Proc, spec)
	}
	s, err := openProcSubject(ctx, spec)
	if err != nil {
		return fmt.Errorf("worker %d: open %s: %w", spec.Proc, spec.Subject, err)
	}
	defer s.close()
	if _, err := appendDistinct(ctx, s, spec.Writers, 1, procWarmUp); err != nil {
		return fmt.Errorf("worker %d: warm-up: %w", spec.Proc, err)
	}
	if err := enc.Encode(procMsg{Ready: true}); err != nil {
		return fmt.Errorf("worker %d: report ready: %w", spec.Proc, err)
	}
	var g procGo
	if err := readLine(in, &g); err != nil {
		return fmt.Errorf("worker %d: read start: %w", spec.Proc, err)
	}
	start := time.Unix(0, g.Start)
	res := saveUntil(ctx, s, spec, start, start.Add(spec.For))
	if err := enc.Encode(procMsg{Result: &res}); err != nil {
		return fmt.Errorf("worker %d: report result: %w", spec.Proc, err)
	}
	return nil
}

// readLine decodes one JSON line of r into v.
func readLine(r *bufio.Reader, v any) error {
	line, err := r.ReadBytes('\n')
	if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
		return err
	}
	return json.Unmarshal(line, v)
}

// openProcSubject opens the subject of spec on the schema the parent
// made: ours is eventstore.Store on storage/postgres, raw the rawPG
// baseline, each on a pool of its own as in the single-process workloads.
func openProcSubject(ctx context.Context, spec procSpec) (subject, error) {
	switch spec.Subject {
	case "ours":
		st, err := postgres.OpenURL(ctx, spec.URL, &postgres.Options{Schema: spec.Schema})
		if err != nil {
			return nil, err
		}
		return newOurs(st, nil)
	case "raw":
		p, err := pgxpool.New(ctx, withParams(spec.URL, "search_path="+spec.Schema))
		if err != nil {
			return nil, err
		}
		return &rawPG{pool: p, cleanup: func() error { p.Close(); return nil }}, nil
	}
	return nil, fmt.Errorf("unknown subject %q", spec.Subject)
}

// saveUntil runs spec.Writers writers from start, each saving batches of
// spec.Batch events to an aggregate of its own until deadline (at least
// one save each), and returns what they did.
func saveUntil(ctx context.Context, s subject, spec procSpec, start, deadline time.Time) procResult {
	time.Sleep(time.Until(start))
	res := procResult{Proc: spec.Proc, Hist: newLatHist(), Writers: make([]writerResult, spec.Writers)}
	hists := make([]latHist, spec.Writers)
	errs := make([]error, spec.Writers)
	var wg sync.WaitGroup
	for i := range spec.Writers {
		wg.Go(func() {
			w := &res.Writers[i]
			w.Agg = uuid.NewString()
			h := newLatHist()
			hists[i] = h
			var acks [][2]int64
			for first := true; first || time.Now().Before(deadline); first = false {
				t0 := time.Now()
				v, err := s.append(ctx, w.Agg, w.Version, spec.Batch)
				t1 := time.Now()
				if err != nil {
					errs[i] = fmt.Errorf("writer %d: save at version %d: %w", i, w.Version, err)
					break
				}
				h.add(t1.Sub(t0))
				acks = append(acks, [2]int64{v, t1.UnixNano()})
				w.Version = v
				w.Saves++
				w.Events += int64(spec.Batch)
			}
			w.Acks = sample(acks, maxAckSamples)
		})
	}
	wg.Wait()
	res.End = time.Now().UnixNano()
	for i, w := range res.Writers {
		res.Saves += w.Saves
		res.Events += w.Events
		res.Hist.merge(hists[i])
		if errs[i] != nil {
			res.Errors++
			if res.Error == "" {
				res.Error = errs[i].Error()
			}
		}
	}
	return res
}

// sample returns at most n elements of s, evenly spaced, the last always
// among them.
func sample[T any](s []T, n int) []T {
	if len(s) <= n {
		return s
	}
	out := make([]T, 0, n)
	for i := range n {
		out = append(out, s[(i+1)*len(s)/n-1])
	}
	return out
}

// withParams returns rawURL with extra query parameters.
func withParams(rawURL string, params ...string) string {
	sep := "?"
	if strings.Contains(rawURL, "?") {
		sep = "&"
	}
	return rawURL + sep + strings.Join(params, "&")
}

// procOutcome is one measurement of the cross-process workload.
type procOutcome struct {
	results []procResult
	elapsed time.Duration // from the common start to the last save's return
	events  int64
	hist    latHist
	follow  *followStats // nil without a follower
}

// rate is the events per second of the whole measurement.
func (o procOutcome) rate() float64 { return float64(o.events) / o.elapsed.Seconds() }

// procPlan is one measurement to run: writers writers of subject over
// procs worker processes, each running exe.
type procPlan struct {
	exe     string
	subject string
	url     string // with the pool's settings
	schema  string
	writers int
	procs   int
	batch   int
	dur     time.Duration
}

// procWorker is a running worker process and its pipes.
type procWorker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan procLine
	stderr *bytes.Buffer
}

// procLine is one decoded line of a worker, or why there was none.
type procLine struct {
	msg procMsg
	err error
}

// runProcs runs one measurement of plan. With a follower (a Store on the
// schema of "ours"), it follows the feed of all types from the head at the
// start and checks what it saw against what the workers acknowledged.
func runProcs(ctx context.Context, plan procPlan, follower *eventstore.Store) (procOutcome, error) {
	ctx, cancel := context.WithCancel(ctx)
	workers := make([]*procWorker, 0, plan.procs)
	defer func() {
		cancel() // kills the workers left running after an error
		for _, w := range workers {
			_ = w.stdin.Close()
			_ = w.cmd.Wait()
		}
	}()
	for i := range plan.procs {
		// Writers are dealt round-robin: 32 over 8 is 4 each.
		n := plan.writers / plan.procs
		if i < plan.writers%plan.procs {
			n++
		}
		spec := procSpec{Proc: i, Subject: plan.subject, URL: plan.url, Schema: plan.schema,
			Writers: n, Batch: plan.batch, For: plan.dur}
		w, err := startWorker(ctx, plan.exe, spec)
		if err != nil {
			return procOutcome{}, fmt.Errorf("start worker %d: %w", i, err)
		}
		workers = append(workers, w)
	}
	for i, w := range workers {
		m, err := w.next(ctx, procReadyTimeout)
		if err == nil && !m.Ready {
			err = fmt.Errorf("expected ready, got %+v", m)
		}
		if err != nil {
			return procOutcome{}, fmt.Errorf("worker %d: %w", i, err)
		}
	}

	lead := 100 * time.Millisecond
	var fol *follow
	if follower != nil {
		head, err := follower.FeedHead(ctx, "")
		if err != nil {
			return procOutcome{}, fmt.Errorf("follower: feed head: %w", err)
		}
		fol = startFollow(ctx, follower, head)
		defer fol.stop()
		// Give the follower's first long poll time to start the Store's
		// append watcher (LISTEN), so that the first saves wake it.
		lead = 500 * time.Millisecond
	}
	start := time.Now().Add(lead)
	line, err := json.Marshal(procGo{Start: start.UnixNano()})
	if err != nil {
		return procOutcome{}, err
	}
	for i, w := range workers {
		if _, err := w.stdin.Write(append(line, '\n')); err != nil {
			return procOutcome{}, fmt.Errorf("worker %d: send start: %w", i, err)
		}
	}

	out := procOutcome{hist: newLatHist()}
	var errs []error
	for i, w := range workers {
		m, err := w.next(ctx, time.Until(start)+plan.dur+procResultGrace)
		if err == nil && m.Result == nil {
			err = fmt.Errorf("expected a result, got %+v", m)
		}
		if err != nil {
			return procOutcome{}, fmt.Errorf("worker %d: %w", i, err)
		}
		r := *m.Result
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("worker %d: %d failed saves, first: %s", i, r.Errors, r.Error))
		}
		out.results = append(out.results, r)
		out.events += r.Events
		out.hist.merge(r.Hist)
		out.elapsed = max(out.elapsed, time.Unix(0, r.End).Sub(start))
	}
	for i, w := range workers {
		_ = w.stdin.Close()
		if err := w.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("worker %d: %w (stderr: %s)", i, err, tail(w.stderr.String())))
		}
	}
	workers = nil
	if len(errs) > 0 {
		return out, errors.Join(errs...)
	}
	if fol != nil {
		st, err := fol.check(ctx, out.results, followerCatchUp)
		if err != nil {
			return out, err
		}
		out.follow = &st
	}
	return out, nil
}

// startWorker starts exe as a worker and sends it spec.
func startWorker(ctx context.Context, exe string, spec procSpec) (*procWorker, error) {
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), workerEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	w := &procWorker{cmd: cmd, stdin: stdin, lines: make(chan procLine, 4), stderr: &bytes.Buffer{}}
	cmd.Stderr = &limitedBuffer{buf: w.stderr, limit: 64 << 10}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		r := bufio.NewReader(stdout)
		for {
			var m procMsg
			err := readLine(r, &m)
			if err != nil {
				w.lines <- procLine{err: err}
				close(w.lines)
				return
			}
			w.lines <- procLine{msg: m}
		}
	}()
	spec.For = max(spec.For, time.Millisecond)
	line, err := json.Marshal(spec)
	if err == nil {
		_, err = stdin.Write(append(line, '\n'))
	}
	if err != nil {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("send spec: %w", err)
	}
	return w, nil
}

// next returns the worker's next line, waiting at most d; an Error line
// is returned as an error.
func (w *procWorker) next(ctx context.Context, d time.Duration) (procMsg, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case l, ok := <-w.lines:
		switch {
		case !ok:
			return procMsg{}, fmt.Errorf("no more output (stderr: %s)", tail(w.stderr.String()))
		case l.err != nil:
			return procMsg{}, fmt.Errorf("read output: %w (stderr: %s)", l.err, tail(w.stderr.String()))
		case l.msg.Error != "":
			return procMsg{}, errors.New(l.msg.Error)
		}
		return l.msg, nil
	case <-t.C:
		return procMsg{}, fmt.Errorf("no answer within %v", d)
	case <-ctx.Done():
		return procMsg{}, ctx.Err()
	}
}

// limitedBuffer keeps the first limit bytes written to it; it is written
// by exec's copying goroutine and read after Wait.
type limitedBuffer struct {
	mu    sync.Mutex
	buf   *bytes.Buffer
	limit int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.limit - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// tail returns the last lines of a worker's stderr, for an error message.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	if s == "" {
		return "empty"
	}
	return s
}

// follow is a follower reading the feed of all types with long polls and
// noting when it first saw each aggregate version.
type follow struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	progress chan struct{} // signalled (without blocking) after every read
	aggs     map[string]*seenAgg
	err      error
}

// seenAgg is what the follower saw of one aggregate.
type seenAgg struct {
	last       int64           // the version of the last entry seen
	events     int64           // events seen
	at         map[int64]int64 // version → unix nanoseconds when seen
	duplicates int             // entries seen again
	disorder   int             // entries whose version was not above the last
}

// startFollow starts following the feed of all types of store after the
// cursor head.
func startFollow(ctx context.Context, store *eventstore.Store, head int64) *follow {
	ctx, cancel := context.WithCancel(ctx)
	f := &follow{cancel: cancel, done: make(chan struct{}), progress: make(chan struct{}, 1),
		aggs: make(map[string]*seenAgg)}
	go func() {
		defer close(f.done)
		after := head
		for {
			res, err := store.ReadFeed(ctx, "", after, &eventstore.FeedOptions{Limit: limits.MaxFeedLimit, Wait: time.Second})
			if ctx.Err() != nil {
				return
			}
			now := time.Now().UnixNano()
			if err != nil && !errors.Is(err, eventstore.ErrNotFound) {
				f.mu.Lock()
				f.err = fmt.Errorf("follower: read after %d: %w", after, err)
				f.mu.Unlock()
				f.signal()
				return
			}
			f.mu.Lock()
			for _, e := range res.Entries {
				a := f.aggs[e.AggregateID]
				if a == nil {
					a = &seenAgg{at: make(map[int64]int64)}
					f.aggs[e.AggregateID] = a
				}
				if _, dup := a.at[e.Version]; dup {
					a.duplicates++
					continue
				}
				if e.Version <= a.last {
					a.disorder++
				}
				a.last = max(a.last, e.Version)
				a.at[e.Version] = now
				a.events += int64(len(e.Events))
			}
			f.mu.Unlock()
			after = max(after, res.Next)
			f.signal()
		}
	}()
	return f
}

func (f *follow) signal() {
	select {
	case f.progress <- struct{}{}:
	default:
	}
}

// stop ends the follower and waits for it.
func (f *follow) stop() {
	f.cancel()
	<-f.done
}

// followStats is what the follower saw of the acknowledged saves.
type followStats struct {
	acked, seen   int64 // events acknowledged by the workers; of those, seen by the follower
	missing       int   // acknowledged saves the follower never saw
	duplicates    int   // entries seen more than once
	disorder      int   // entries out of their aggregate's version order
	unacked       int   // entries of the writers' aggregates after their last acknowledged save
	beforeAck     int   // sampled saves the follower saw before Save returned
	latencies     []time.Duration
	p50, p99, max time.Duration
}

// check waits up to d for the follower to see every save the workers
// acknowledged, then stops it and compares. Saves missing after d are
// counted, not returned as an error; an error is returned only when the
// follower itself failed.
func (f *follow) check(ctx context.Context, results []procResult, d time.Duration) (followStats, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	caught := func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.err != nil {
			return true
		}
		for _, r := range results {
			for _, w := range r.Writers {
				if a := f.aggs[w.Agg]; w.Saves > 0 && (a == nil || a.last < w.Version) {
					return false
				}
			}
		}
		return true
	}
wait:
	for !caught() {
		select {
		case <-f.progress:
		case <-deadline.C:
			break wait
		case <-ctx.Done():
			return followStats{}, ctx.Err()
		}
	}
	f.stop()
	// The follower has returned: its fields are ours to read.
	if f.err != nil {
		return followStats{}, f.err
	}
	var st followStats
	for _, r := range results {
		for _, w := range r.Writers {
			st.acked += w.Events
			a := f.aggs[w.Agg]
			if a == nil {
				st.missing += int(w.Saves)
				continue
			}
			st.seen += min(a.events, w.Events)
			st.missing += int(max(0, w.Saves-int64(len(a.at))))
			st.duplicates += a.duplicates
			for v := range a.at {
				if v > w.Version {
					st.unacked++
				}
			}
			st.disorder += a.disorder
			for _, ack := range w.Acks {
				at, ok := a.at[ack[0]]
				if !ok {
					continue // counted as missing above
				}
				lat := time.Duration(at - ack[1])
				if lat < 0 {
					st.beforeAck++
					lat = 0
				}
				st.latencies = append(st.latencies, lat)
			}
		}
	}
	slices.Sort(st.latencies)
	if n := len(st.latencies); n > 0 {
		st.p50 = st.latencies[quantileIndex(n, 0.50)]
		st.p99 = st.latencies[quantileIndex(n, 0.99)]
		st.max = st.latencies[n-1]
	}
	return st, nil
}

// quantileIndex is the index of quantile q in a sorted slice of n > 0
// elements (the nearest-rank method).
func quantileIndex(n int, q float64) int {
	return min(n-1, max(0, int(math.Ceil(q*float64(n)))-1))
}

// procRows measures the cross-process workload for every batch size,
// writer count and process count of cfg on env, one row each, and passes
// them to emit. Each row has fresh schemas for ours and raw; its
// repetitions alternate ours and raw; then one more measurement of ours
// runs with a follower in this process, whose latency goes in the row's
// last column.
func procRows(ctx context.Context, cfg config, env *pgEnv, emit func(row)) {
	exe, exeErr := os.Executable()
	if exeErr != nil {
		exeErr = fmt.Errorf("find this binary to start workers: %w", exeErr)
	}
	for _, n := range cfg.batches {
		for _, w := range cfg.procWriters {
			for _, p := range cfg.procs {
				if p > w || ctx.Err() != nil {
					continue
				}
				r := row{backend: "postgres", workload: fmt.Sprintf("append %d ev × %d w in %d procs", n, w, p), cells: make(map[string]*cell)}
				if p == 1 {
					r.workload = fmt.Sprintf("append %d ev × %d w in 1 proc", n, w)
				}
				r.note = procRow(ctx, cfg, env, exe, exeErr, r, n, w, p)
				emit(r)
			}
		}
	}
}

// procRow measures one row of the cross-process workload into r's cells
// and returns the row's note: save latencies and the follower's figures.
func procRow(ctx context.Context, cfg config, env *pgEnv, exe string, exeErr error, r row, batch, writers, procs int) string {
	var subjects []string
	for _, s := range []string{"ours", "raw"} {
		if has(cfg.subjects, s) {
			subjects = append(subjects, s)
			r.cells[s] = &cell{err: exeErr}
		}
	}
	if exeErr != nil {
		return ""
	}
	plans := make(map[string]procPlan)
	var follower *eventstore.Store
	defer func() {
		if follower != nil {
			if err := follower.Close(); err != nil && r.cells["ours"].err == nil {
				r.cells["ours"].err = fmt.Errorf("close follower: %w", err)
			}
		}
		for s, pl := range plans {
			if err := env.drop(context.Background(), pl.schema); err != nil && r.cells[s].err == nil {
				r.cells[s].err = fmt.Errorf("drop schema: %w", err)
			}
		}
	}()
	poolURL := env.withParams(fmt.Sprintf("pool_max_conns=%d", env.conns))
	for _, s := range subjects {
		pl := procPlan{exe: exe, subject: s, url: poolURL, schema: env.schema("p" + s),
			writers: writers, procs: procs, batch: batch, dur: cfg.sizes.appendFor}
		plans[s] = pl
		var err error
		switch s {
		case "ours":
			follower, err = openFollower(ctx, env, pl.schema)
		case "raw":
			err = createRawSchema(ctx, env, pl.schema)
		}
		if err != nil {
			r.cells[s].err = fmt.Errorf("create schema: %w", err)
		}
	}
	hists := make(map[string]latHist)
	for range cfg.sizes.reps {
		for _, s := range subjects {
			c := r.cells[s]
			if c.err != nil || ctx.Err() != nil {
				continue
			}
			o, err := runProcs(ctx, plans[s], nil)
			if err != nil {
				c.err = err
				continue
			}
			c.rates = append(c.rates, o.rate())
			if hists[s] == nil {
				hists[s] = newLatHist()
			}
			hists[s].merge(o.hist)
		}
	}
	var notes []string
	for _, s := range subjects {
		if h := hists[s]; h != nil {
			notes = append(notes, fmt.Sprintf("%s save p50 %s p99 %s", s, ms(h.quantile(0.5)), ms(h.quantile(0.99))))
		}
	}
	if c := r.cells["ours"]; c != nil && c.err == nil && ctx.Err() == nil {
		o, err := runProcs(ctx, plans["ours"], follower)
		switch {
		case err != nil:
			notes = append(notes, fmt.Sprintf("follower run failed: %v", err))
		default:
			notes = append(notes, o.follow.String()+fmt.Sprintf(" (ours %s ev/s meanwhile)", formatRate(o.rate())))
		}
	}
	return strings.Join(notes, "; ")
}

// String is the follower's figures for the table.
func (st *followStats) String() string {
	s := fmt.Sprintf("follower p50 %s p99 %s max %s of %d samples", ms(st.p50), ms(st.p99), ms(st.max), len(st.latencies))
	if st.beforeAck > 0 {
		s += fmt.Sprintf(" (%d seen before Save returned, counted as 0)", st.beforeAck)
	}
	if err := st.problems(); err != nil {
		s += ", " + strings.ToUpper(err.Error())
	}
	return s
}

// problems returns an error that describes what the follower saw wrong,
// or nil when it saw every acknowledged save exactly once, in order.
func (st *followStats) problems() error {
	if st.missing == 0 && st.duplicates == 0 && st.disorder == 0 && st.unacked == 0 && st.seen == st.acked {
		return nil
	}
	return fmt.Errorf("follower saw %d of %d acknowledged events: %d saves missing, %d duplicates, %d out of order, %d never acknowledged",
		st.seen, st.acked, st.missing, st.duplicates, st.disorder, st.unacked)
}

// ms formats d in milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

// openFollower opens a Store on schema (creating the tables of "ours"),
// the follower's and the one that made the schema.
func openFollower(ctx context.Context, env *pgEnv, schema string) (*eventstore.Store, error) {
	s, err := postgres.OpenURL(ctx, env.withParams("pool_max_conns=4"), &postgres.Options{Schema: schema})
	if err != nil {
		return nil, err
	}
	st, err := eventstore.New(s, nil)
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	return st, nil
}

// createRawSchema creates schema with the raw baseline's tables.
func createRawSchema(ctx context.Context, env *pgEnv, schema string) error {
	if _, err := env.admin.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
		return err
	}
	p, err := env.pool(ctx, schema)
	if err != nil {
		return err
	}
	defer p.Close()
	_, err = p.Exec(ctx, rawPGSchema)
	return err
}
