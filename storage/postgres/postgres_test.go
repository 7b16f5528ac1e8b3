package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/storagetest"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const defaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// databaseURL returns the URL of the test database.
func databaseURL() string {
	if u := os.Getenv("EVENTSTORE_POSTGRES_URL"); u != "" {
		return u
	}
	return defaultURL
}

// urlWith returns the database URL with a query parameter set, or skips
// the test when EVENTSTORE_POSTGRES_URL is not a URL.
func urlWith(tb testing.TB, key, value string) string {
	tb.Helper()
	u, err := url.Parse(databaseURL())
	if err != nil || u.Scheme == "" {
		tb.Skipf("EVENTSTORE_POSTGRES_URL is not a URL (%v); this test needs one", err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// sharedPool is one pool for the tests that do not need their own.
var sharedPool = sync.OnceValues(func() (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL())
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 8
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
})

// testPool returns the shared pool, or skips the test (fails it when
// EVENTSTORE_POSTGRES_REQUIRED=1) when the database cannot be reached.
func testPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, err := sharedPool()
	if err != nil {
		msg := "PostgreSQL at " + databaseURL() + " is unreachable (" + err.Error() + "); " +
			"to run these tests start PostgreSQL and set EVENTSTORE_POSTGRES_URL " +
			"(default " + defaultURL + ")"
		if os.Getenv("EVENTSTORE_POSTGRES_REQUIRED") == "1" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	return pool
}

// newSchema returns a fresh schema name, dropped with everything in it when
// the test ends.
func newSchema(tb testing.TB) string {
	tb.Helper()
	pool := testPool(tb)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "es_test_" + hex.EncodeToString(b[:])
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// newStorage opens a Storage on the shared pool in a fresh schema.
func newStorage(tb testing.TB) storage.Storage {
	tb.Helper()
	return openIn(tb, newSchema(tb))
}

// openIn opens a Storage on the shared pool in schema, closed when the test
// ends.
func openIn(tb testing.TB, schema string) storage.Storage {
	tb.Helper()
	s, err := postgres.Open(context.Background(), testPool(tb), &postgres.Options{Schema: schema})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// openURLIn opens a Storage with its own pool in schema, like another
// process would.
func openURLIn(tb testing.TB, schema string) storage.Storage {
	tb.Helper()
	testPool(tb)
	s, err := postgres.OpenURL(context.Background(), databaseURL(), &postgres.Options{Schema: schema})
	if err != nil {
		tb.Fatalf("open url: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, newStorage)
}

// event returns a new event for a request.
func event(typ, data string) storage.Event {
	e := storage.Event{ID: uuid.NewString(), Type: typ,
		RecordedAt: time.Now().UTC().Truncate(time.Microsecond)}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

func TestAppendLoadRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := newStorage(t)
	// Spacing and key order must survive: data is stored as bytes.
	e1, e2 := event("Opened", `{ "b":1,  "a" : [1, 2.50] }`), event("Noted", "")
	res, err := s.Append(ctx, storage.AppendRequest{AggregateType: "acct", AggregateID: "a-1",
		ExpectedVersion: storage.ExpectVersion(0), Events: []storage.Event{e1, e2}})
	if err != nil {
		t.Fatal(err)
	}
	if res != (storage.AppendResult{Version: 1, Position: 2}) {
		t.Fatalf("append = %+v, want version 1 position 2", res)
	}
	agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "acct", AggregateID: "a-1"})
	if err != nil {
		t.Fatal(err)
	}
	if agg.Version != 1 || len(agg.Events) != 2 {
		t.Fatalf("load = version %d with %d events", agg.Version, len(agg.Events))
	}
	got := agg.Events[0]
	if string(got.Data) != string(e1.Data) || got.ID != e1.ID || got.Type != "Opened" ||
		!got.RecordedAt.Equal(e1.RecordedAt) || got.RecordedAt.Location() != time.UTC ||
		got.Sequence != 1 || got.Position != 1 || got.AggregateType != "acct" || got.AggregateID != "a-1" {
		t.Errorf("first event = %+v, want %+v", got, e1)
	}
	if agg.Events[1].Data != nil {
		t.Errorf("event saved without data loads with data %q", agg.Events[1].Data)
	}
	if _, err := s.Load(ctx, storage.LoadQuery{AggregateType: "acct", AggregateID: "nope"}); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("load unknown: %v, want ErrNotFound", err)
	}
}

func TestAppendRules(t *testing.T) {
	ctx := context.Background()
	s := newStorage(t)
	req := func(v *int64, events ...storage.Event) storage.AppendRequest {
		r := storage.AppendRequest{AggregateType: "t", AggregateID: "x", Events: events}
		if v != nil {
			r.ExpectedVersion = storage.ExpectVersion(*v)
		}
		return r
	}
	a, b, c := event("A", ""), event("B", ""), event("C", "")
	if _, err := s.Append(ctx, req(nil, a, b)); err != nil {
		t.Fatal(err)
	}
	dup, err := s.Append(ctx, req(nil, a, b))
	if err != nil || !dup.Duplicate || dup.Version != 1 || dup.Position != 2 {
		t.Errorf("retry = %+v, %v; want duplicate of version 1 position 2", dup, err)
	}
	if _, err := s.Append(ctx, req(nil, a, c)); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("mixed batch: %v, want ErrConflict", err)
	}
	zero := int64(0)
	if _, err := s.Append(ctx, req(&zero, c)); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("wrong expected version: %v, want ErrConflict", err)
	}
	one := int64(1)
	// The refused appends may have left positions unused: the next one is
	// above every earlier one, not necessarily 3.
	res, err := s.Append(ctx, req(&one, c))
	if err != nil || res.Version != 2 || res.Position <= 2 {
		t.Errorf("append at version 1 = %+v, %v; want version 2 at a position above 2", res, err)
	}
	agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: "x"})
	if err != nil || len(agg.Events) != 3 || agg.Events[2].Sequence != 3 || agg.Events[2].Version != 2 ||
		agg.Events[2].Position != res.Position || agg.Events[2].FeedSequence <= agg.Events[1].FeedSequence {
		t.Errorf("load after refused appends = %+v, %v; want sequence 3, version 2 at position %d, with a FeedSequence above the first batch's", agg, err, res.Position)
	}
	if head, err := s.FeedHead(ctx, "t"); err != nil || head != agg.Events[2].FeedSequence {
		t.Errorf("FeedHead(\"t\") = %d, %v; want the last batch's FeedSequence %d", head, err, agg.Events[2].FeedSequence)
	}
}

// TestBadRequestFailsAlone sends, concurrently, requests that the server
// rejects (a NUL byte in a text column) among good ones: only the bad ones
// fail, and the feed holds every good one exactly once, in strictly
// increasing positions and FeedSequences (the bad ones may leave numbers
// unused).
func TestBadRequestFailsAlone(t *testing.T) {
	ctx := context.Background()
	s := newStorage(t)
	const n = 40
	errs := make([]error, n)
	results := make([]storage.AppendResult, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e := event("Good", `{}`)
			if i%4 == 0 {
				e.Type = "Bad\x00"
			}
			results[i], errs[i] = s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: uuid.NewString(),
				Events: []storage.Event{e}})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i%4 == 0 && !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("request %d with a NUL byte: %v, want ErrInvalid", i, err)
		}
		if i%4 != 0 && err != nil {
			t.Errorf("good request %d: %v", i, err)
		}
	}
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != n-n/4 {
		t.Fatalf("feed holds %d events, want %d", len(page.Events), n-n/4)
	}
	acked := make(map[int64]bool)
	for i, res := range results {
		if i%4 != 0 {
			acked[res.Position] = true
		}
	}
	var last, lastSeq int64
	for i, e := range page.Events {
		if e.Position <= last || e.FeedSequence <= lastSeq {
			t.Errorf("feed[%d] at position %d with FeedSequence %d after %d and %d: both must strictly increase", i, e.Position, e.FeedSequence, last, lastSeq)
		}
		if !acked[e.Position] {
			t.Errorf("feed[%d] at position %d: no good request was told that position", i, e.Position)
		}
		delete(acked, e.Position)
		last, lastSeq = e.Position, e.FeedSequence
	}
	if len(acked) > 0 {
		t.Errorf("%d acknowledged positions are not in the feed", len(acked))
	}
	if head, err := s.FeedHead(ctx, ""); err != nil || head != last {
		t.Errorf("FeedHead(\"\") = %d, %v; want the last position %d", head, err, last)
	}
}

func TestReadFeedByType(t *testing.T) {
	ctx := context.Background()
	s := newStorage(t)
	for i, typ := range []string{"a", "b", "a", "b", "b"} {
		if _, err := s.Append(ctx, storage.AppendRequest{AggregateType: typ, AggregateID: "x",
			Events: []storage.Event{event("E", "")}}); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	page, err := s.ReadFeed(ctx, storage.FeedQuery{AggregateType: "a", Limit: 10})
	if err != nil || len(page.Events) != 2 || page.Events[1].Position != 3 || page.Head != 5 {
		t.Fatalf("feed a = %+v, %v; want positions 1, 3 and head 5", page, err)
	}
	page, err = s.ReadFeed(ctx, storage.FeedQuery{AggregateType: "b", Limit: 2})
	if err != nil || len(page.Events) != 2 || page.Head != 4 {
		t.Fatalf("feed b limit 2 = %+v, %v; want 2 events and head 4", page, err)
	}
	page, err = s.ReadFeed(ctx, storage.FeedQuery{AggregateType: "c", After: 2, Limit: 2})
	if err != nil || len(page.Events) != 0 || page.Head != 5 {
		t.Fatalf("feed c = %+v, %v; want no events and head 5", page, err)
	}
	page, err = s.ReadFeed(ctx, storage.FeedQuery{After: 5, Limit: 2})
	if err != nil || len(page.Events) != 0 || page.Head != 5 {
		t.Fatalf("feed after head = %+v, %v; want no events and head 5", page, err)
	}
}

func TestCloseAndOwnership(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	s := openIn(t, schema)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: "x"}); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("load after close: %v, want ErrClosed", err)
	}
	if _, err := s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "x",
		Events: []storage.Event{event("E", "")}}); !errors.Is(err, storage.ErrClosed) {
		t.Errorf("append after close: %v, want ErrClosed", err)
	}
	// Open does not own the pool: it still works.
	if err := testPool(t).Ping(ctx); err != nil {
		t.Errorf("shared pool after Close: %v", err)
	}
}

func TestUnavailable(t *testing.T) {
	testPool(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, databaseURL())
	if err != nil {
		t.Fatal(err)
	}
	s, err := postgres.Open(ctx, pool, &postgres.Options{Schema: newSchema(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pool.Close() // the database "goes away" under the Storage
	if _, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: "x"}); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("load on a closed pool: %v, want ErrUnavailable", err)
	}
	if _, err := s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "x",
		Events: []storage.Event{event("E", "")}}); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("append on a closed pool: %v, want ErrUnavailable", err)
	}

	_, err = postgres.OpenURL(ctx, "postgres://postgres@127.0.0.1:1/test?connect_timeout=2", nil)
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("open on a port nobody listens on: %v, want ErrUnavailable", err)
	}
}

func TestContextErrorsPassThrough(t *testing.T) {
	s := newStorage(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: "x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("load with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 1}); !errors.Is(err, context.Canceled) {
		t.Errorf("read feed with a cancelled context: %v, want context.Canceled", err)
	}
}

func TestOpenRefusesSimpleProtocol(t *testing.T) {
	testPool(t)
	_, err := postgres.OpenURL(context.Background(), urlWith(t, "default_query_exec_mode", "simple_protocol"), nil)
	if !errors.Is(err, storage.ErrInvalid) {
		t.Fatalf("open with the simple protocol: %v, want ErrInvalid", err)
	}
}
