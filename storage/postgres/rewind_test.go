package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// rewindStore opens a Store with a running Projector of a counting
// projection in schema, like a server process would.
func rewindStore(t *testing.T, ctx context.Context, schema string, create bool) (*eventstore.Store, *eventstore.Projector, storage.Storage) {
	t.Helper()
	s, err := postgres.OpenURL(ctx, databaseURL(), &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventstore.New(s, &eventstore.Options{PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, nil)
	if create {
		err := p.Create(ctx, eventstore.Definition{
			Name: "count", Feed: "order", Aggregated: true,
			Handlers: []eventstore.Handler{{EventType: "Placed", Functions: []eventstore.Function{
				{Name: eventstore.FuncInc, TargetSelector: "$.projection.orders"},
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	return st, p, s
}

func placeOrder(t *testing.T, ctx context.Context, st *eventstore.Store) eventstore.SaveResult {
	t.Helper()
	res, err := st.Save(ctx, "order", uuid.NewString(), []eventstore.NewEvent{{ID: uuid.NewString(), Type: "Placed", Data: json.RawMessage(`{}`)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// loseTail makes the store in schema look like a standby promoted before
// it had received the commits after position keep: the events after it
// are gone, the positions sequence is back at keep, and the projection
// "count" at the checkpoint it had then (lost says whether its
// checkpoint is to stay ahead instead, as when projections live elsewhere).
func loseTail(t *testing.T, ctx context.Context, schema string, keep int64, projectionAhead bool) {
	t.Helper()
	q := pgx.Identifier{schema}.Sanitize()
	pool := testPool(t)
	stmts := []string{
		fmt.Sprintf(`DELETE FROM %s.events_rows WHERE position > %d`, q, keep),
		fmt.Sprintf(`SELECT setval('%s.positions', %d)`, strings.ReplaceAll(q, "'", "''"), keep),
	}
	if !projectionAhead {
		stmts = append(stmts, fmt.Sprintf(`UPDATE %s.definitions_rows SET checkpoint = %d`, q, keep),
			fmt.Sprintf(`UPDATE %s.projection_states_rows SET data = convert_to('{"orders":"%d"}', 'UTF8'), position = %d`, q, keep, keep))
	}
	for _, sql := range stmts {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// orders returns the count of the projection "count" as p answers it, and
// how long the answer took.
func orders(t *testing.T, ctx context.Context, p *eventstore.Projector) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	pj, err := p.Aggregated(qctx, "count")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Orders json.RawMessage `json:"orders"`
	}
	if err := json.Unmarshal(pj.Data, &v); err != nil {
		t.Fatal(err)
	}
	return strings.Trim(string(v.Orders), `"`), time.Since(start)
}

// TestRewindNeverGivesANumberTwice simulates a lossy failover (the
// events after position 10 gone, the positions sequence back at 10) under
// two running processes: A, which saved the lost events, and B, which
// read them in the feed. The first save after the rewind must take a
// position past everything either had handed out, a follower resuming
// from the last cursor it was given must get it, the processes must count
// the rewind, and their projection queries must answer at once with what
// the store holds (no wait for the lost positions).
func TestRewindNeverGivesANumberTwice(t *testing.T) {
	schema := newSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stA, pA, sA := rewindStore(t, ctx, schema, true)
	stB, pB, sB := rewindStore(t, ctx, schema, false)
	var last eventstore.SaveResult
	for range 20 {
		last = placeOrder(t, ctx, stA)
	}
	// B's follower reads everything: the cursor it keeps is the head.
	page, err := stB.ReadFeed(ctx, "", 0, &eventstore.FeedOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	cursor := page.Next
	if cursor != last.Position || len(page.Entries) != 20 {
		t.Fatalf("feed at %d with %d entries, want %d with 20", cursor, len(page.Entries), last.Position)
	}
	if got, _ := orders(t, ctx, pA); got != "20" {
		t.Fatalf("count = %s before the rewind, want 20", got)
	}
	keep := page.Entries[9].Cursor
	loseTail(t, ctx, schema, keep, false)

	// A query through A waits for A's last save (a Projector that does not
	// run catches up to it first), which is gone: it must find that out
	// and answer at once with what the store holds.
	got, took := orders(t, ctx, eventstore.NewProjector(stA, nil))
	if got != "10" || took > 2*time.Second {
		t.Errorf("A: count = %s after the rewind, in %v; want 10 at once", got, took)
	}
	if n := stA.Rewinds(); n != 1 {
		t.Errorf("A's Store counted %d rewinds, want 1", n)
	}

	// B saves first: past what either process handed out.
	res := placeOrder(t, ctx, stB)
	if res.Position <= cursor {
		t.Fatalf("the first save after the rewind took position %d, already handed out (the feed was at %d)", res.Position, cursor)
	}
	// One of the two storages moved the positions on: A's, for the query
	// above, or B's, whose running projector read the feed below what B
	// had seen first (the two race); the other found them moved.
	if a, b := postgres.Rewinds(sA), postgres.Rewinds(sB); a+b != 1 {
		t.Errorf("the storages counted %d (A) and %d (B) rewinds, want 1 in all", a, b)
	}
	// A saves next: the sequence is past what A saw too.
	resA := placeOrder(t, ctx, stA)
	if resA.Position <= res.Position {
		t.Fatalf("A's save took position %d, not after B's %d", resA.Position, res.Position)
	}
	// The follower goes on from its cursor and gets both saves.
	page, err = stB.ReadFeed(ctx, "", cursor, &eventstore.FeedOptions{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Entries) != 2 || page.Entries[0].Cursor != res.Position || page.Entries[1].Cursor != resA.Position {
		t.Fatalf("after cursor %d the feed has %d entries (%+v), want the two saved after the rewind", cursor, len(page.Entries), page.Entries)
	}
	// A answers at once with the 10 events kept and the 2 new; B, which
	// learns of A's save by notification, soon.
	if got, took := orders(t, ctx, pA); got != "12" || took > 2*time.Second {
		t.Errorf("A: count = %s after the rewind, in %v; want 12 at once", got, took)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, took := orders(t, ctx, pB)
		if took > 2*time.Second {
			t.Errorf("B: the query took %v after the rewind", took)
		}
		if got == "12" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("B: count = %s 10 s after the rewind, want 12", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRewindSeenByReadsOnly checks a process that only read the lost
// positions (its projector's feed reads): it finds the rewind when it
// reads the feed again, and moves the sequence past what it read, so that
// a save through another process that saw nothing, made afterwards, takes
// no number the reader handed out.
func TestRewindSeenByReadsOnly(t *testing.T) {
	schema := newSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	writer := openURLIn(t, schema)
	stW, err := eventstore.New(writer, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		placeOrder(t, ctx, stW)
	}
	reader := openURLIn(t, schema)
	page, err := reader.ReadFeed(ctx, storage.FeedQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	cursor := page.Head
	loseTail(t, ctx, schema, page.Events[9].Position, false)
	// The reader's next read (a projector's, after it reconnects) starts
	// below what it had seen.
	rw := reader.(storage.Rewinder)
	var got []storage.Rewind
	rw.OnRewind(func(r storage.Rewind) { got = append(got, r) })
	if _, err := reader.ReadFeed(ctx, storage.FeedQuery{Limit: 100}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Seen != cursor || got[0].Found != page.Events[9].Position || got[0].Resumed <= cursor {
		t.Fatalf("rewinds reported: %+v, want one from %d to %d", got, cursor, page.Events[9].Position)
	}
	// A process that saw nothing saves next: past the reader's cursor.
	fresh, err := eventstore.New(openURLIn(t, schema), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := placeOrder(t, ctx, fresh); res.Position <= cursor {
		t.Fatalf("a save after the rewind took position %d, which the reader had handed out (up to %d)", res.Position, cursor)
	}
	if last, err := rw.LastPosition(ctx); err != nil || last <= cursor {
		t.Fatalf("LastPosition = %d, %v; want past %d", last, err, cursor)
	}
}

// TestRewindRebuildsProjectionAhead checks a projection whose stored
// checkpoint is past what the store holds after a rewind (it applied
// events that are gone): the process that finds the rewind rebuilds it
// from the feed, and its query then counts only the events kept.
func TestRewindRebuildsProjectionAhead(t *testing.T) {
	schema := newSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, p, _ := rewindStore(t, ctx, schema, true)
	var positions []int64
	for range 20 {
		positions = append(positions, placeOrder(t, ctx, st).Position)
	}
	if got, _ := orders(t, ctx, p); got != "20" {
		t.Fatalf("count = %s, want 20", got)
	}
	loseTail(t, ctx, schema, positions[9], true)
	placeOrder(t, ctx, st) // finds the rewind
	if st.Rewinds() != 1 {
		t.Fatalf("Rewinds = %d, want 1", st.Rewinds())
	}
	got, took := orders(t, ctx, p)
	if got != "11" {
		t.Fatalf("count = %s after the rewind, want 11 (the 10 events kept and the new one)", got)
	}
	if took > 2*time.Second {
		t.Errorf("the query took %v", took)
	}
}
