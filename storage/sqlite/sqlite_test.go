package sqlite_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/eventkit-go/eventstore/storage/storagetest"
	"github.com/google/uuid"
)

// openTemp opens a Storage on a new file in tb's temporary directory and
// closes it when tb ends.
func openTemp(tb testing.TB) storage.Storage {
	tb.Helper()
	s, err := sqlite.Open(filepath.Join(tb.TempDir(), "es.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(tb testing.TB) storage.Storage { return openTemp(tb) })
}

var ctx = context.Background()

// request builds an append request of n new events.
func request(typ, id string, expect storage.VersionCheck, n int) storage.AppendRequest {
	now := time.Now().UTC().Truncate(time.Microsecond)
	req := storage.AppendRequest{AggregateType: typ, AggregateID: id, ExpectedVersion: expect}
	for i := range n {
		req.Events = append(req.Events, storage.Event{
			ID: uuid.NewString(), Type: "Happened", RecordedAt: now,
			Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
		})
	}
	return req
}

func TestDataSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "es.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := request("order", "1", storage.ExpectVersion(0), 3)
	req.Events[1].Data = nil
	if _, err := s.Append(ctx, req); err != nil {
		t.Fatal(err)
	}
	rec := storage.DefinitionRecord{Name: "p", Spec: json.RawMessage(`{"x":1}`), CreatedAt: req.Events[0].RecordedAt}
	if err := s.CreateDefinition(ctx, rec); err != nil {
		t.Fatal(err)
	}
	commit := storage.ProjectionCommit{Name: "p", From: 0, To: 3,
		States: []storage.ProjectionState{{InstanceID: "1", Data: json.RawMessage(`{"n":3}`), Position: 3, UpdatedAt: rec.CreatedAt}},
		Errors: []storage.ProjectionError{{Position: 2, EventID: req.Events[1].ID, EventType: "Happened", InstanceID: "1", Message: "bad"}},
	}
	if err := s.CommitProjection(ctx, commit); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Load(ctx, storage.LoadQuery{AggregateType: "order", AggregateID: "1"}); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Load after Close: %v, want ErrClosed", err)
	}
	if _, err := s.Append(ctx, request("order", "2", storage.VersionCheck{}, 1)); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}

	s, err = sqlite.Open(path, nil) // migrations are idempotent
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "order", AggregateID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if agg.Version != 1 || len(agg.Events) != 3 {
		t.Fatalf("reopened aggregate: version %d, %d events", agg.Version, len(agg.Events))
	}
	for i, e := range agg.Events {
		want := req.Events[i]
		if e.ID != want.ID || e.Type != want.Type || string(e.Data) != string(want.Data) ||
			(e.Data == nil) != (want.Data == nil) || !e.RecordedAt.Equal(want.RecordedAt) ||
			e.Sequence != int64(i+1) || e.Position != int64(i+1) || e.AggregateType != "order" || e.AggregateID != "1" {
			t.Errorf("event %d: got %+v, want %+v", i, e, want)
		}
	}
	def, err := s.Definition(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if def.Checkpoint != 3 || string(def.Spec) != `{"x":1}` || !def.CreatedAt.Equal(rec.CreatedAt) ||
		len(def.Errors) != 1 || def.Errors[0] != commit.Errors[0] {
		t.Fatalf("reopened definition: %+v", def)
	}
	st, err := s.LoadProjection(ctx, "p", "1")
	if err != nil || string(st.Data) != `{"n":3}` || st.Position != 3 || !st.UpdatedAt.Equal(rec.CreatedAt) {
		t.Fatalf("reopened state: %+v, %v", st, err)
	}
	// Positions continue after the reopened store's last one.
	res, err := s.Append(ctx, request("order", "1", storage.ExpectVersion(1), 1))
	if err != nil || res.Version != 2 || res.Position != 4 {
		t.Fatalf("append after reopen: %+v, %v", res, err)
	}
}

// TestGroupCommitIsolatesFailures runs many concurrent saves, some with a
// wrong expected version or a partly stored batch, so that batches mix
// failing and succeeding requests: only the failing ones fail.
func TestGroupCommitIsolatesFailures(t *testing.T) {
	s := openTemp(t)
	const writers, saves = 16, 20
	stored := request("shared", "dup", storage.VersionCheck{}, 2)
	if _, err := s.Append(ctx, stored); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		kind string // "ok", "stale", "partial", "retry"
		res  storage.AppendResult
		err  error
	}
	out := make(chan outcome, writers*saves)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprint("agg-", w)
			version := int64(0)
			for i := range saves {
				switch i % 4 {
				case 1: // wrong expected version
					_, err := s.Append(ctx, request("acc", id, storage.ExpectVersion(version+5), 1))
					out <- outcome{kind: "stale", err: err}
				case 2: // one stored id, one new: refused as a whole
					req := request("shared", "dup", storage.VersionCheck{}, 1)
					req.Events = append(req.Events, stored.Events[0])
					_, err := s.Append(ctx, req)
					out <- outcome{kind: "partial", err: err}
				case 3: // retry of a stored batch
					res, err := s.Append(ctx, stored)
					out <- outcome{kind: "retry", res: res, err: err}
				default:
					res, err := s.Append(ctx, request("acc", id, storage.ExpectVersion(version), 2))
					if err == nil {
						version = res.Version
					}
					out <- outcome{kind: "ok", res: res, err: err}
				}
			}
		}()
	}
	wg.Wait()
	close(out)
	for o := range out {
		switch o.kind {
		case "ok":
			if o.err != nil {
				t.Errorf("valid save failed: %v", o.err)
			}
		case "stale", "partial":
			if !errors.Is(o.err, storage.ErrConflict) {
				t.Errorf("%s save: %v, want ErrConflict", o.kind, o.err)
			}
		case "retry":
			if o.err != nil || !o.res.Duplicate || o.res.Version != 1 || o.res.Position != 2 {
				t.Errorf("retried save: %+v, %v", o.res, o.err)
			}
		}
	}
	for w := range writers {
		agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "acc", AggregateID: fmt.Sprint("agg-", w)})
		if err != nil {
			t.Fatal(err)
		}
		if want := saves / 4 * 2; len(agg.Events) != want || agg.Version != int64(want/2) {
			t.Errorf("aggregate %d: %d events at version %d, want %d", w, len(agg.Events), agg.Version, want)
		}
	}
	if agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "shared", AggregateID: "dup"}); err != nil || len(agg.Events) != 2 {
		t.Fatalf("shared/dup: %d events, %v", len(agg.Events), err)
	}
	// The feed is gap-free: positions 1..n.
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 10_000})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range page.Events {
		if e.Position != int64(i+1) {
			t.Fatalf("feed[%d] at position %d", i, e.Position)
		}
	}
	if want := 2 + writers*saves/4*2; len(page.Events) != want || page.Head != int64(want) {
		t.Fatalf("feed: %d events, head %d; want %d", len(page.Events), page.Head, want)
	}
}

func TestProjectionErrorsAreTrimmed(t *testing.T) {
	s := openTemp(t)
	if err := s.CreateDefinition(ctx, storage.DefinitionRecord{Name: "p", Spec: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateDefinition(ctx, storage.DefinitionRecord{Name: "p", Spec: json.RawMessage(`{}`)}); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("duplicate definition: %v, want ErrConflict", err)
	}
	total := storage.MaxRecordedErrors + 30
	for from := 0; from < total; from += 10 {
		c := storage.ProjectionCommit{Name: "p", From: int64(from), To: int64(from + 10)}
		for p := from + 1; p <= from+10; p++ {
			c.Errors = append(c.Errors, storage.ProjectionError{Position: int64(p), EventID: "e", EventType: "t", Message: "m"})
		}
		if err := s.CommitProjection(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	def, err := s.Definition(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	if len(def.Errors) != storage.MaxRecordedErrors || def.Errors[0].Position != 31 ||
		def.Errors[len(def.Errors)-1].Position != int64(total) {
		t.Fatalf("%d errors kept, from %d to %d", len(def.Errors), def.Errors[0].Position, def.Errors[len(def.Errors)-1].Position)
	}
	err = s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: 0, To: 5})
	if !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("stale checkpoint: %v, want ErrConflict", err)
	}
	err = s.CommitProjection(ctx, storage.ProjectionCommit{Name: "nope", From: 0, To: 5})
	if !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("unknown projection: %v, want ErrNotFound", err)
	}
}

func TestOpenRejectsNewerSchemaAndEmptyPath(t *testing.T) {
	if _, err := sqlite.Open("", nil); !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("empty path: %v", err)
	}
	path := filepath.Join(t.TempDir(), "odd?name#1%.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, request("a", "1", storage.VersionCheck{}, 1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw, err := sql.Open("sqlite", sqlite.DSN(path, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if s, err := sqlite.Open(path, nil); err == nil {
		s.Close()
		t.Fatal("Open accepted a schema newer than the program's")
	}
	if matches, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "odd*")); len(matches) == 0 || matches[0] != path {
		t.Fatalf("file not created at %q: %v", path, matches)
	}
}

// TestLockedDatabaseIsUnavailable holds the write lock from another
// connection (as another process would): Append fails with ErrUnavailable
// after the busy timeout, and works again once the lock is released.
func TestLockedDatabaseIsUnavailable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "es.db")
	s, err := sqlite.Open(path, &sqlite.Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := sql.Open("sqlite", sqlite.DSN(path, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Append(ctx, request("a", "1", storage.VersionCheck{}, 1))
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Append while locked: %v, want ErrUnavailable", err)
	}
	err = s.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: 0, To: 1})
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("CommitProjection while locked: %v, want ErrUnavailable", err)
	}
	// Reads do not wait for writers.
	if _, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 10}); err != nil {
		t.Fatalf("ReadFeed while locked: %v", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, request("a", "1", storage.VersionCheck{}, 1)); err != nil {
		t.Fatalf("Append after the lock was released: %v", err)
	}
}

// TestReturnedDataIsTheCallers: events read together share buffers
// internally; a caller appending to one event's Data must not change
// another's, and a read feed carries the aggregate of every event.
func TestReturnedDataIsTheCallers(t *testing.T) {
	s := openTemp(t)
	if _, err := s.Append(ctx, request("a", "1", storage.VersionCheck{}, 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, request("b", "2", storage.VersionCheck{}, 1)); err != nil {
		t.Fatal(err)
	}
	agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "a", AggregateID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	_ = append(agg.Events[0].Data, "garbage"...)
	agg.Events[0].Data[0] = 'X'
	if got := string(agg.Events[1].Data); got != `{"i":1}` {
		t.Fatalf("event 1 data changed to %s", got)
	}
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	_ = append(page.Events[0].Data, "garbage"...)
	if len(page.Events) != 4 || string(page.Events[1].Data) != `{"i":1}` ||
		page.Events[0].AggregateType != "a" || page.Events[3].AggregateType != "b" || page.Events[3].AggregateID != "2" {
		t.Fatalf("feed: %+v", page.Events)
	}
	page, err = s.ReadFeed(ctx, storage.FeedQuery{Limit: 10, AggregateType: "b"})
	if err != nil || len(page.Events) != 1 || page.Events[0].Position != 4 || page.Head != 4 {
		t.Fatalf("feed of b: %+v, %v", page, err)
	}
}

// TestOpenRefusesURIAuthority: a path starting with // would be read as a
// URI authority; Open says so instead of echoing the driver's DSN.
func TestOpenRefusesURIAuthority(t *testing.T) {
	_, err := sqlite.Open("//eventstore.db", nil)
	if !errors.Is(err, storage.ErrInvalid) || strings.Contains(err.Error(), "_pragma") || !strings.Contains(err.Error(), "URI authority") {
		t.Errorf("Open(//eventstore.db) = %v, want ErrInvalid naming the mistake without the DSN", err)
	}
}
