package postgres

import (
	"context"
	"errors"
	"math"
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
		`SELECT count(DISTINCT xmin::text) FROM {{schema}}.events_rows WHERE position BETWEEN $1 AND $2`), from, to).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// inDefaultTenant starts a string of statements run with the simple
// protocol (Exec without arguments, one implicit transaction) that reads
// or writes the views of the tables: it sets the default tenant.
const inDefaultTenant = `SELECT set_config('eventstore.tenant', '` + DefaultTenant + `', true);
`

// numbering maps the positions a test expects, numbered 1, 2, 3, ... as
// if no append left a number unused, to those the store gave. Positions
// may have gaps (a refused request, or an attempt that fell back to
// savepoints, leaves its reserved numbers unused), so a test states the
// order of its positions by these expected numbers: the store's must be
// in the same order, equal where they are equal (a duplicate reports its
// original's), and above every number given before.
type numbering struct{ want, got []int64 }

// match records that the store gave got where the test expects want, and
// reports whether that agrees with every earlier pair.
func (n *numbering) match(want, got int64) bool {
	for i, w := range n.want {
		g := n.got[i]
		if (w < want) != (g < got) || (w == want) != (g == got) {
			return false
		}
	}
	n.want, n.got = append(n.want, want), append(n.got, got)
	return true
}

// pos returns the position the store gave where the test expects want.
func (n *numbering) pos(t *testing.T, want int64) int64 {
	t.Helper()
	for i, w := range n.want {
		if w == want {
			return n.got[i]
		}
	}
	t.Fatalf("no result has had expected position %d yet", want)
	return 0
}

// checkResults compares the results of a batch with what is wanted; a nil
// want error means success with that value, its Position an expected
// number of n (see numbering).
func (n *numbering) checkResults(t *testing.T, results []appendResult, want []appendResult) {
	t.Helper()
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d", len(results), len(want))
	}
	for i, w := range want {
		r := results[i]
		okValue := r.Err == nil && r.Value.Version == w.Value.Version && r.Value.Duplicate == w.Value.Duplicate
		if okValue && !n.match(w.Value.Position, r.Value.Position) {
			t.Errorf("request %d = %+v: its position %d is out of order with the earlier ones %v, expected as %v", i, r.Value, r.Value.Position, n.got, n.want)
			continue
		}
		if w.Err == nil && !okValue || w.Err != nil && !errors.Is(r.Err, w.Err) {
			t.Errorf("request %d = %+v, %v; want %+v (the position as numbered without gaps), %v", i, r.Value, r.Err, w.Value, w.Err)
		}
	}
}

// checkFeedNumbers checks the numbers of a feed read from the start: n
// events, positions strictly increasing, the events of a batch at
// consecutive positions with one FeedSequence, a type's FeedSequences
// strictly increasing from batch to batch, and head the last position.
func checkFeedNumbers(t *testing.T, page storage.FeedPage, n int) {
	t.Helper()
	if len(page.Events) != n {
		t.Fatalf("feed holds %d events, want %d", len(page.Events), n)
	}
	var last int64
	lastSeq := make(map[string]int64)
	for i, e := range page.Events {
		sameBatch := i > 0 && page.Events[i-1].AggregateType == e.AggregateType &&
			page.Events[i-1].AggregateID == e.AggregateID && page.Events[i-1].Version == e.Version
		switch {
		case e.Position <= last:
			t.Errorf("feed event %d at position %d after %d", i, e.Position, last)
		case sameBatch && (e.Position != last+1 || e.FeedSequence != page.Events[i-1].FeedSequence):
			t.Errorf("feed event %d (%s/%s v%d) at position %d with FeedSequence %d: the batch's event before is at %d with %d",
				i, e.AggregateType, e.AggregateID, e.Version, e.Position, e.FeedSequence, last, page.Events[i-1].FeedSequence)
		case !sameBatch && e.FeedSequence <= lastSeq[e.AggregateType]:
			t.Errorf("feed event %d (%s/%s v%d) has FeedSequence %d after %d: a type's FeedSequences strictly increase",
				i, e.AggregateType, e.AggregateID, e.Version, e.FeedSequence, lastSeq[e.AggregateType])
		}
		last, lastSeq[e.AggregateType] = e.Position, e.FeedSequence
	}
	if page.Head != last {
		t.Errorf("feed Head %d, want the last position %d", page.Head, last)
	}
}

func ok(version, position int64) appendResult {
	return appendResult{Value: storage.AppendResult{Version: version, Position: position}}
}

func TestRunBatchGroupStatement(t *testing.T) {
	s, schema := openBatchTestSchema(t)
	ctx := context.Background()
	// x at version 1 (position 1), y at version 2 (positions 2, 3), as
	// numbered without gaps (see numbering).
	var nums numbering
	nums.checkResults(t, s.runBatch(ctx, []storage.AppendRequest{request("x", 0, batchEvent("A"))}), []appendResult{ok(1, 1)})
	nums.checkResults(t, s.runBatch(ctx, []storage.AppendRequest{request("y", -1, batchEvent("A"))}), []appendResult{ok(1, 2)})
	nums.checkResults(t, s.runBatch(ctx, []storage.AppendRequest{request("y", 1, batchEvent("B"))}), []appendResult{ok(2, 3)})

	results := s.runBatch(ctx, []storage.AppendRequest{
		request("x", 1, batchEvent("B"), batchEvent("C")),                   // positions 4, 5
		request("z", 0, batchEvent("A")),                                    // 6
		request("y", -1, batchEvent("C"), batchEvent("D"), batchEvent("E")), // 7..9
	})
	nums.checkResults(t, results, []appendResult{ok(2, 5), ok(1, 6), ok(3, 9)})
	if n := xmins(t, s, schema, nums.pos(t, 3)+1, math.MaxInt64); n != 1 {
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
	if err != nil {
		t.Fatal(err)
	}
	checkFeedNumbers(t, page, 9)
	if page.Head != nums.pos(t, 9) {
		t.Errorf("feed Head %d, want the group's last position %d", page.Head, nums.pos(t, 9))
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
	var nums numbering // positions as numbered without gaps
	nums.checkResults(t, s.runBatch(ctx, []storage.AppendRequest{request("d", 0, stored)}), []appendResult{ok(1, 1)})

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
		t.Run(c.name, func(t *testing.T) { nums.checkResults(t, results, c.want) })
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
		if n := xmins(t, s, schema, before+1, math.MaxInt64); int64(n) != want {
			t.Errorf("%s: written by %d (sub)transactions, want %d", c.name, n, want)
		}
	}
	agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "t", AggregateID: "d"})
	if err != nil || agg.Version != 5 || len(agg.Events) != 6 || agg.Events[5].Sequence != 6 {
		t.Fatalf("load d = %+v, %v; want version 5 with 6 events", agg, err)
	}
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	// The refused requests wrote nothing: the feed holds the 14 events
	// written, each batch of t with its own FeedSequence, rising (the
	// refused ones may have left numbers unused).
	checkFeedNumbers(t, page, 14)
	if page.Head != nums.pos(t, 14) {
		t.Errorf("feed Head %d, want the last position written %d", page.Head, nums.pos(t, 14))
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
	var nums numbering // positions as numbered without gaps
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
			nums.checkResults(t, s.runBatch(ctx, []storage.AppendRequest{c.req}), []appendResult{c.want})
		})
	}
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	// Five batches of type t, the fourth of two events.
	checkFeedNumbers(t, page, 6)
	if page.Events[3].FeedSequence != page.Events[4].FeedSequence {
		t.Errorf("the feed must hold 5 batches, the fourth of two events with one FeedSequence: %+v", page.Events)
	}
	if page.Events[2].EncryptedData != "sealed" || page.Events[0].EncryptedData != "" {
		t.Errorf("encrypted data %q and %q, want sealed and none", page.Events[2].EncryptedData, page.Events[0].EncryptedData)
	}
}
