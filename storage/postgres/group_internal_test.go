package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
)

// xmins returns how many distinct transactions (or subtransactions) wrote
// the events at positions from..to: 1 when appendGroup wrote them all, one
// per request when they ran in savepoints.
func xmins(t *testing.T, s *store, schema string, from, to int64) int {
	t.Helper()
	var n int
	err := s.pool.QueryRow(context.Background(), qualify(schema,
		`SELECT count(DISTINCT xmin::text) FROM {{schema}}.events WHERE position BETWEEN $1 AND $2`), from, to).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkResults compares the results of a batch with what is wanted; a nil
// want error means success with that value.
func checkResults(t *testing.T, results []appendResult, want []appendResult) {
	t.Helper()
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d", len(results), len(want))
	}
	for i, w := range want {
		r := results[i]
		if w.Err == nil && (r.Err != nil || r.Value != w.Value) || w.Err != nil && !errors.Is(r.Err, w.Err) {
			t.Errorf("request %d = %+v, %v; want %+v, %v", i, r.Value, r.Err, w.Value, w.Err)
		}
	}
}

func ok(version, position int64) appendResult {
	return appendResult{Value: storage.AppendResult{Version: version, Position: position}}
}

func TestRunBatchGroupStatement(t *testing.T) {
	s, schema := openBatchTestSchema(t)
	ctx := context.Background()
	// x at version 1 (position 1), y at version 2 (positions 2, 3).
	checkResults(t, s.runBatch(ctx, []storage.AppendRequest{request("x", 0, batchEvent("A"))}), []appendResult{ok(1, 1)})
	checkResults(t, s.runBatch(ctx, []storage.AppendRequest{request("y", -1, batchEvent("A"))}), []appendResult{ok(1, 2)})
	checkResults(t, s.runBatch(ctx, []storage.AppendRequest{request("y", 1, batchEvent("B"))}), []appendResult{ok(2, 3)})

	results := s.runBatch(ctx, []storage.AppendRequest{
		request("x", 1, batchEvent("B"), batchEvent("C")),                   // positions 4, 5
		request("z", 0, batchEvent("A")),                                    // 6
		request("y", -1, batchEvent("C"), batchEvent("D"), batchEvent("E")), // 7..9
	})
	checkResults(t, results, []appendResult{ok(2, 5), ok(1, 6), ok(3, 9)})
	if n := xmins(t, s, schema, 4, 9); n != 1 {
		t.Errorf("the group was written by %d transactions, want 1 (one statement)", n)
	}
	for _, c := range []struct {
		id      string
		version int64
		seqs    int
	}{{"x", 2, 3}, {"y", 3, 5}, {"z", 1, 1}} {
		agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: c.id})
		if err != nil || agg.Version != c.version || len(agg.Events) != c.seqs {
			t.Fatalf("load %s = %+v, %v; want version %d with %d events", c.id, agg, err, c.version, c.seqs)
		}
		for i, e := range agg.Events {
			if e.Sequence != int64(i+1) {
				t.Errorf("%s: event %d has sequence %d", c.id, i, e.Sequence)
			}
		}
	}
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 100})
	if err != nil || len(page.Events) != 9 || page.Head != 9 {
		t.Fatalf("feed holds %d events up to %d (%v), want 9", len(page.Events), page.Head, err)
	}
	for i, e := range page.Events {
		if e.Position != int64(i+1) {
			t.Errorf("feed event %d at position %d", i, e.Position)
		}
	}
}

// TestRunBatchGroupDecides checks the results of groups that hold
// conflicts, retries of stored saves, ids stored in part and an aggregate
// twice: appendGroup decides all but the last itself, in one transaction
// (one round per request on the same aggregate); ids stored in part make
// the server refuse it, and the requests then run in savepoints, one
// subtransaction each.
func TestRunBatchGroupDecides(t *testing.T) {
	s, schema := openBatchTestSchema(t)
	ctx := context.Background()
	stored := batchEvent("A")
	twice := batchEvent("E")
	checkResults(t, s.runBatch(ctx, []storage.AppendRequest{request("d", 0, stored)}), []appendResult{ok(1, 1)})

	cases := []struct {
		name      string
		reqs      []storage.AppendRequest
		want      []appendResult
		savepoint bool // decided one by one, in savepoints
	}{{
		name: "version conflict",
		reqs: []storage.AppendRequest{
			request(uuid.NewString(), 0, batchEvent("A")),
			request("d", 0, batchEvent("B")), // d is at version 1
			request(uuid.NewString(), -1, batchEvent("A"), batchEvent("B")),
		},
		want: []appendResult{ok(1, 2), {Err: storage.ErrConflict}, ok(1, 4)},
	}, {
		name: "duplicate retry",
		reqs: []storage.AppendRequest{
			request(uuid.NewString(), -1, batchEvent("A")),
			request("d", 0, stored), // the first save, again
			request(uuid.NewString(), 0, batchEvent("A")),
		},
		want: []appendResult{ok(1, 5), {Value: storage.AppendResult{Version: 1, Position: 1, Duplicate: true}}, ok(1, 6)},
	}, {
		name: "some ids stored",
		reqs: []storage.AppendRequest{
			request("d", -1, batchEvent("B"), stored),
			request(uuid.NewString(), -1, batchEvent("A")),
		},
		want:      []appendResult{{Err: storage.ErrConflict}, ok(1, 7)},
		savepoint: true,
	}, {
		name: "same aggregate twice",
		reqs: []storage.AppendRequest{
			request("d", 1, batchEvent("B")),
			request(uuid.NewString(), -1, batchEvent("A")),
			request("d", 2, batchEvent("C"), batchEvent("D")),
		},
		want: []appendResult{ok(2, 8), ok(1, 9), ok(3, 11)},
	}, {
		// Writers contending for d: the second and fourth expect what
		// the first does, so they are doomed; the fourth repeats the
		// first save, which it finds stored.
		name: "same version expected twice",
		reqs: []storage.AppendRequest{
			request("d", 3, twice),
			request("d", 3, batchEvent("F")),
			request("e", 0, batchEvent("A")),
			request("d", 3, twice),
			request("d", 4, batchEvent("G")),
		},
		want: []appendResult{ok(4, 12), {Err: storage.ErrConflict}, ok(1, 13),
			{Value: storage.AppendResult{Version: 4, Position: 12, Duplicate: true}}, ok(5, 14)},
	}}
	for _, c := range cases {
		before := int64(0)
		if p, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 1000}); err == nil {
			before = p.Head
		}
		results := s.runBatch(ctx, c.reqs)
		t.Run(c.name, func(t *testing.T) { checkResults(t, results, c.want) })
		var written int64
		for _, w := range c.want {
			if w.Err == nil && !w.Value.Duplicate {
				written++
			}
		}
		// The savepoint path wrote each request in a subtransaction,
		// appendGroup all in one transaction.
		want := min(written, 1)
		if c.savepoint {
			want = written
		}
		if n := xmins(t, s, schema, before+1, before+100); int64(n) != want {
			t.Errorf("%s: written by %d (sub)transactions, want %d", c.name, n, want)
		}
	}
	agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: "d"})
	if err != nil || agg.Version != 5 || len(agg.Events) != 6 || agg.Events[5].Sequence != 6 {
		t.Fatalf("load d = %+v, %v; want version 5 with 6 events", agg, err)
	}
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 1000})
	if err != nil || len(page.Events) != 14 || page.Head != 14 {
		t.Fatalf("feed holds %d events up to %d (%v), want 14", len(page.Events), page.Head, err)
	}
	for i, e := range page.Events {
		if e.Position != int64(i+1) {
			t.Fatalf("feed event %d at position %d", i, e.Position)
		}
	}
	// The refused requests took no FeedSequence: t's batches are numbered
	// without gaps.
	var prev int64
	for _, e := range page.Events {
		if e.FeedSequence != prev && e.FeedSequence != prev+1 {
			t.Fatalf("FeedSequence %d after %d", e.FeedSequence, prev)
		}
		prev = e.FeedSequence
	}
}

// TestRunBatchLoneRequests checks the outcomes of batches of one request,
// which appendSingle decides for one event and appendOne for several:
// written, refused for its version, retries of a stored save (whatever
// version they expect), ids stored in part, and encrypted data kept.
func TestRunBatchLoneRequests(t *testing.T) {
	s, _ := openBatchTestSchema(t)
	ctx := context.Background()
	first, second := batchEvent("A"), batchEvent("B")
	secret := batchEvent("S")
	secret.EncryptedData = "sealed"
	pair := []storage.Event{batchEvent("C"), batchEvent("D")}
	for _, c := range []struct {
		name string
		req  storage.AppendRequest
		want appendResult
	}{
		{"first", request("x", 0, first), ok(1, 1)},
		{"no expectation", request("x", -1, second), ok(2, 2)},
		{"stale version", request("x", 1, batchEvent("B")), appendResult{Err: storage.ErrConflict}},
		{"retry of the first save", request("x", 0, first), appendResult{Value: storage.AppendResult{Version: 1, Position: 1, Duplicate: true}}},
		{"stored id, other version", request("x", 2, first), appendResult{Value: storage.AppendResult{Version: 1, Position: 1, Duplicate: true}}},
		{"stored id among new ones", request("x", 2, batchEvent("B"), first), appendResult{Err: storage.ErrConflict}},
		{"encrypted", request("y", 0, secret), ok(1, 3)},
		{"two events", request("x", 2, pair...), ok(3, 5)},
		{"retry of two events", request("x", 2, pair...), appendResult{Value: storage.AppendResult{Version: 3, Position: 5, Duplicate: true}}},
		{"two events, stale", request("x", 2, batchEvent("E"), batchEvent("F")), appendResult{Err: storage.ErrConflict}},
		{"after two events", request("y", 1, batchEvent("G")), ok(2, 6)},
	} {
		t.Run(c.name, func(t *testing.T) {
			checkResults(t, s.runBatch(ctx, []storage.AppendRequest{c.req}), []appendResult{c.want})
		})
	}
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 100})
	if err != nil || len(page.Events) != 6 || page.Head != 6 {
		t.Fatalf("feed holds %d events up to %d (%v), want 6", len(page.Events), page.Head, err)
	}
	wantSeq := []int64{1, 2, 3, 4, 4, 5} // every batch is of type t
	for i, e := range page.Events {
		if e.Position != int64(i+1) || e.FeedSequence != wantSeq[i] {
			t.Errorf("feed event %d: position %d, FeedSequence %d; want %d, %d", i, e.Position, e.FeedSequence, i+1, wantSeq[i])
		}
	}
	if page.Events[2].EncryptedData != "sealed" || page.Events[0].EncryptedData != "" {
		t.Errorf("encrypted data %q and %q, want sealed and none", page.Events[2].EncryptedData, page.Events[0].EncryptedData)
	}
}
