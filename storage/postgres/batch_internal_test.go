package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// openBatchTest opens a Storage in a fresh schema for white-box tests of
// runBatch, which build batches by hand instead of hoping that concurrent
// calls coalesce. The rules about an unreachable database are those of
// postgres_test.go.
func openBatchTest(t *testing.T) *store {
	t.Helper()
	s, _ := openBatchTestSchema(t)
	return s
}

// openBatchTestSchema is openBatchTest, also returning the quoted schema
// name, for tests that look at the tables.
func openBatchTestSchema(t testing.TB) (*store, string) {
	t.Helper()
	url := os.Getenv("EVENTSTORE_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	// The schema's migrations run within this too: on a machine loaded by
	// other test suites they took over 5 s.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err == nil {
		err = pool.Ping(ctx)
	}
	if err != nil {
		msg := "PostgreSQL at " + url + " is unreachable (" + err.Error() + "); set EVENTSTORE_POSTGRES_URL to run these tests"
		if os.Getenv("EVENTSTORE_POSTGRES_REQUIRED") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "es_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		pool.Close()
	})
	s, err := open(ctx, pool, &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, pgx.Identifier{schema}.Sanitize()
}

func batchEvent(typ string) storage.Event {
	return storage.Event{ID: uuid.NewString(), Type: typ, Data: []byte(`{"k":1}`),
		RecordedAt: time.Now().UTC().Truncate(time.Microsecond)}
}

// request returns a request of one event on aggregate id; a type with a
// NUL byte makes the server reject it.
func request(id string, expect int64, events ...storage.Event) storage.AppendRequest {
	r := storage.AppendRequest{AggregateType: "t", AggregateID: id, Events: events}
	if expect >= 0 {
		r.ExpectedVersion = storage.ExpectVersion(expect)
	}
	return r
}

func TestRunBatchFailingRequestsRollBackAlone(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	good := func() storage.AppendRequest { return request(uuid.NewString(), -1, batchEvent("Good")) }
	bad := func() storage.AppendRequest { return request(uuid.NewString(), -1, batchEvent("Bad\x00")) }
	batches := map[string][]storage.AppendRequest{
		"bad alone":        {bad()},
		"bad last":         {good(), good(), bad()},
		"bad first":        {bad(), good()},
		"bad in between":   {good(), bad(), good(), bad(), good()},
		"bad in a row":     {bad(), bad(), good()},
		"only good ones":   {good(), good(), good()},
		"bad ones at ends": {bad(), good(), good(), bad()},
	}
	var head int64 // the last position written
	written := 0
	for name, reqs := range batches {
		results := s.runBatch(ctx, reqs)
		if len(results) != len(reqs) {
			t.Fatalf("%s: %d results for %d requests", name, len(results), len(reqs))
		}
		for i, r := range reqs {
			isBad := r.Events[0].Type != "Good"
			switch {
			case isBad && !errors.Is(results[i].Err, storage.ErrInvalid):
				t.Errorf("%s: bad request %d: %v, want ErrInvalid", name, i, results[i].Err)
			case !isBad && results[i].Err != nil:
				t.Errorf("%s: good request %d failed: %v", name, i, results[i].Err)
			case !isBad:
				// The bad requests may leave positions unused: a good
				// one is above every earlier one, not necessarily next.
				if results[i].Value.Position <= head || results[i].Value.Version != 1 || results[i].Value.Duplicate {
					t.Errorf("%s: good request %d = %+v, want version 1 at a position above %d", name, i, results[i].Value, head)
				}
				head = results[i].Value.Position
				written++
				if _, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: r.AggregateID}); err != nil {
					t.Errorf("%s: good request %d not stored: %v", name, i, err)
				}
			default:
				if _, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: r.AggregateID}); !errors.Is(err, storage.ErrNotFound) {
					t.Errorf("%s: bad request %d: load = %v, want ErrNotFound", name, i, err)
				}
			}
		}
	}
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	checkFeedNumbers(t, page, written)
	if page.Head != head {
		t.Errorf("feed Head %d, want the last good request's position %d", page.Head, head)
	}
}

func TestRunBatchSameAggregate(t *testing.T) {
	s := openBatchTest(t)
	ctx := context.Background()
	a, b, c := batchEvent("A"), batchEvent("B"), batchEvent("C")
	reqs := []storage.AppendRequest{
		request("x", 0, a),    // creates x at version 1
		request("x", -1, a),   // duplicate of the first, in the same transaction
		request("x", 0, b),    // refused: x is at version 1 now
		request("x", 1, b, c), // version 2
		request("x", -1, c, batchEvent("D")),
	}
	results := s.runBatch(ctx, reqs)
	// Positions as numbered without gaps (see numbering).
	var nums numbering
	nums.checkResults(t, results, []appendResult{
		ok(1, 1),
		{Value: storage.AppendResult{Version: 1, Position: 1, Duplicate: true}},
		{Err: storage.ErrConflict},
		ok(2, 3),
		{Err: storage.ErrConflict},
	})
	agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: "x"})
	if err != nil || agg.Version != 2 || len(agg.Events) != 3 || agg.Events[2].ID != c.ID || agg.Events[2].Sequence != 3 {
		t.Fatalf("load = %+v, %v; want a, b, c at version 2", agg, err)
	}
}
