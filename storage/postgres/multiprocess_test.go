package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/google/uuid"
)

// TestFeedCompleteAcrossProcesses runs many concurrent writers through two
// Storages with separate pools (as two processes would) on one schema,
// while a reader on each follows the global feed. Every acknowledged event
// must be seen exactly once by each reader, at strictly increasing
// positions (which may have gaps), each batch at consecutive positions
// with one FeedSequence, strictly increasing from batch to batch, and
// nothing unacknowledged may appear.
func TestFeedCompleteAcrossProcesses(t *testing.T) {
	schema := newSchema(t)
	instances := []storage.Storage{openURLIn(t, schema), openURLIn(t, schema)}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()

	const writersPerInstance, savesPerWriter, aggregates = 8, 25, 5
	var (
		ackMu sync.Mutex
		acked = make(map[string]bool) // event id -> acknowledged
	)
	var writing atomic.Int32
	var writers sync.WaitGroup
	for w := range 2 * writersPerInstance {
		s := instances[w%2]
		writing.Add(1)
		writers.Go(func() {
			defer writing.Add(-1)
			for i := range savesPerWriter {
				events := make([]storage.Event, 1+i%3)
				for k := range events {
					events[k] = event("E", fmt.Sprintf(`{"w":%d,"i":%d}`, w, i))
				}
				_, err := s.Append(ctx, storage.AppendRequest{
					AggregateType: "acct", AggregateID: fmt.Sprint("a", (w+i)%aggregates), Events: events})
				if err != nil {
					t.Errorf("writer %d save %d: %v", w, i, err)
					return
				}
				ackMu.Lock()
				for _, e := range events {
					acked[e.ID] = true
				}
				ackMu.Unlock()
			}
		})
	}

	type seen struct {
		ids []string
		err error
	}
	results := make([]seen, len(instances))
	var readers sync.WaitGroup
	for r, s := range instances {
		readers.Go(func() {
			var ids []string
			var after, lastSeq int64
			var last storage.Event
			for {
				done := writing.Load() == 0 // read before the page: a later empty page means the end
				page, err := s.ReadFeed(ctx, storage.FeedQuery{After: after, Limit: 37})
				if err != nil {
					results[r] = seen{err: err}
					return
				}
				for _, e := range page.Events {
					sameBatch := e.AggregateID == last.AggregateID && e.Version == last.Version
					switch {
					case e.Position <= after:
						results[r] = seen{err: fmt.Errorf("reader %d: position %d after %d", r, e.Position, after)}
						return
					case sameBatch && (e.Position != after+1 || e.FeedSequence != lastSeq):
						results[r] = seen{err: fmt.Errorf("reader %d: %s v%d at position %d with FeedSequence %d, its batch's event before at %d with %d",
							r, e.AggregateID, e.Version, e.Position, e.FeedSequence, after, lastSeq)}
						return
					case !sameBatch && e.FeedSequence <= lastSeq:
						results[r] = seen{err: fmt.Errorf("reader %d: batch %s v%d at position %d has FeedSequence %d after %d",
							r, e.AggregateID, e.Version, e.Position, e.FeedSequence, lastSeq)}
						return
					}
					after, lastSeq, last = e.Position, e.FeedSequence, e
					ids = append(ids, e.ID)
				}
				if page.Head != after {
					results[r] = seen{err: fmt.Errorf("reader %d: head %d, last event %d", r, page.Head, after)}
					return
				}
				if len(page.Events) == 0 {
					if done {
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
			results[r] = seen{ids: ids}
		})
	}
	writers.Wait()
	readers.Wait()
	if t.Failed() {
		return
	}
	for r, res := range results {
		if res.err != nil {
			t.Fatal(res.err)
		}
		count := make(map[string]int, len(res.ids))
		for _, id := range res.ids {
			count[id]++
			if count[id] == 2 {
				t.Errorf("reader %d saw event %s twice", r, id)
			}
			if !acked[id] {
				t.Errorf("reader %d saw event %s that no save acknowledged", r, id)
			}
		}
		for id := range acked {
			if count[id] == 0 {
				t.Errorf("reader %d never saw acknowledged event %s", r, id)
			}
		}
		if len(res.ids) != len(acked) {
			t.Errorf("reader %d saw %d events, %d were acknowledged", r, len(res.ids), len(acked))
		}
	}
	// Versions and sequences of every aggregate are contiguous.
	for a := range aggregates {
		agg, err := instances[0].Load(ctx, storage.LoadQuery{AggregateType: "acct", AggregateID: fmt.Sprint("a", a)})
		if err != nil {
			t.Fatal(err)
		}
		var version int64
		for i, e := range agg.Events {
			if e.Sequence != int64(i)+1 || (e.Version != version && e.Version != version+1) {
				t.Fatalf("aggregate a%d event %d: sequence %d version %d after version %d", a, i, e.Sequence, e.Version, version)
			}
			version = e.Version
		}
	}
}

// TestCommitProjectionRace has two Storages with separate pools race
// CommitProjection from the same checkpoint: exactly one wins each round,
// and the stored state is the winner's.
func TestCommitProjectionRace(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	a, b := openURLIn(t, schema), openURLIn(t, schema)
	if err := a.CreateDefinition(ctx, storage.DefinitionRecord{Name: "p", Spec: json.RawMessage(`{"x":1}`),
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond)}); err != nil {
		t.Fatal(err)
	}
	var from int64
	for round := range 20 {
		to := from + 3
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, s := range []storage.Storage{a, b} {
			wg.Go(func() {
				errs[i] = s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: from, To: to,
					States: []storage.ProjectionState{{InstanceID: "i", Data: json.RawMessage(fmt.Sprintf(`{"by":%d}`, i)),
						Position: to, UpdatedAt: time.Now().UTC()}}})
			})
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("round %d: both commits from %d won", round, from)
				}
				winner = i
			case !errors.Is(err, storage.ErrConflict):
				t.Fatalf("round %d: losing commit: %v, want ErrConflict", round, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no commit won: %v", round, errs)
		}
		st, err := b.LoadProjection(ctx, "p", "i")
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf(`{"by":%d}`, winner); string(st.Data) != want || st.Position != to {
			t.Fatalf("round %d: state %s at %d, want the winner's %s at %d", round, st.Data, st.Position, want, to)
		}
		from = to
	}
	def, err := a.Definition(ctx, "p")
	if err != nil || def.Checkpoint != from {
		t.Fatalf("definition = %+v, %v; want checkpoint %d", def, err, from)
	}
	err = a.CommitProjection(ctx, storage.ProjectionCommit{Name: "nope", From: 0, To: 1})
	if !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("commit of an unknown projection: %v, want ErrNotFound", err)
	}
}

// TestProjectionErrorsTrimmed checks that the last MaxRecordedErrors errors
// are kept, oldest first, and that a refused commit records nothing.
func TestProjectionErrorsTrimmed(t *testing.T) {
	ctx := context.Background()
	s := newStorage(t)
	for _, name := range []string{"p", "q"} {
		if err := s.CreateDefinition(ctx, storage.DefinitionRecord{Name: name, Spec: json.RawMessage(`{}`),
			CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateDefinition(ctx, storage.DefinitionRecord{Name: "p", Spec: json.RawMessage(`{}`)}); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("second definition named p: %v, want ErrConflict", err)
	}
	var from int64
	for batch := range 3 {
		errs := make([]storage.ProjectionError, 60)
		for i := range errs {
			pos := int64(batch*60 + i + 1)
			errs[i] = storage.ProjectionError{Position: pos, EventID: uuid.NewString(), EventType: "E", Message: fmt.Sprint("bad ", pos)}
		}
		if err := s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: from, To: from + 60, Errors: errs}); err != nil {
			t.Fatal(err)
		}
		from += 60
	}
	err := s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: 0, To: 999,
		Errors: []storage.ProjectionError{{Position: 999, Message: "stale"}}})
	if !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("stale commit: %v, want ErrConflict", err)
	}
	defs, err := s.Definitions(ctx)
	if err != nil || len(defs) != 2 || defs[0].Name != "p" || defs[1].Name != "q" {
		t.Fatalf("definitions = %+v, %v", defs, err)
	}
	got := defs[0].Errors
	if len(got) < storage.MaxRecordedErrors || len(got) > 180 {
		t.Fatalf("%d errors kept, want between %d and 180", len(got), storage.MaxRecordedErrors)
	}
	for i, e := range got {
		if want := int64(180 - len(got) + i + 1); e.Position != want {
			t.Fatalf("error %d at position %d, want %d (the last ones, oldest first)", i, e.Position, want)
		}
	}
	if defs[0].Checkpoint != 180 || len(defs[1].Errors) != 0 {
		t.Errorf("p checkpoint %d (want 180), q has %d errors (want 0)", defs[0].Checkpoint, len(defs[1].Errors))
	}
}

// TestConcurrentMigrations opens one fresh schema from several Storages at
// once: none fails, and the schema is migrated once.
func TestConcurrentMigrations(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	pool := testPool(t)
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var s storage.Storage
			s, errs[i] = postgres.Open(ctx, pool, &postgres.Options{Schema: schema})
			if errs[i] == nil {
				_ = s.Close()
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
		}
	}
	var versions, rows int
	err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), count(DISTINCT version) FROM %q.schema_migrations`, schema)).Scan(&rows, &versions)
	if err != nil || rows != versions || versions == 0 {
		t.Errorf("schema_migrations: %d rows, %d versions, %v", rows, versions, err)
	}
}

// TestRecoversFromTerminatedConnections kills every server connection of a
// Storage (as a database restart does): calls fail with ErrUnavailable, not
// with an error that looks like the caller's fault, and the Storage
// recovers by itself.
func TestRecoversFromTerminatedConnections(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	app := "es_" + schema
	s, err := postgres.OpenURL(ctx, urlWith(t, "application_name", app), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	save := func() error {
		_, err := s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "x",
			Events: []storage.Event{event("E", "")}})
		return err
	}
	if err := save(); err != nil {
		t.Fatal(err)
	}
	var killed int
	if err := testPool(t).QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE application_name = $1`, app).Scan(&killed); err != nil || killed == 0 {
		t.Fatalf("terminated %d connections: %v", killed, err)
	}
	// Each call may meet a dead connection of the pool once: it must fail
	// with ErrUnavailable, and a retry must eventually succeed.
	failures := 0
	eventually := func(what string, fn func() error) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := fn()
			if err == nil {
				return
			}
			failures++
			if !errors.Is(err, storage.ErrUnavailable) {
				t.Fatalf("%s after the connections died: %v, want ErrUnavailable", what, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no recovery after %d failures: %v", what, failures, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	eventually("save", save)
	var agg storage.Aggregate
	eventually("load", func() (err error) {
		agg, err = s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: "x"})
		return err
	})
	if agg.Version != 2 {
		t.Fatalf("load = version %d; want 2 (nothing lost, nothing doubled)", agg.Version)
	}
	t.Logf("%d calls failed with ErrUnavailable before recovery", failures)
}
