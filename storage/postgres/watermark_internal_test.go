package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// inFlightAppend starts an append of one event to aggregate typ/id exactly
// as runBatch does, but stops before the COMMIT: the state of an append whose commit is slow (or whose process
// stalls there). It returns the open transaction's connection and the
// event's id.
func inFlightAppend(t *testing.T, s *store, typ, id string) (*pgxpool.Conn, string) {
	t.Helper()
	ctx := t.Context()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	req := storage.AppendRequest{AggregateType: typ, AggregateID: id, Events: []storage.Event{{
		ID: uuid.NewString(), Type: "Happened", RecordedAt: time.Now().UTC().Truncate(time.Microsecond)}}}
	b := &pgx.Batch{}
	n := s.queueLock(b, []storage.AppendRequest{req})
	e := req.Events[0]
	b.Queue(s.sql.appendLean, typ, id, e.ID, e.Type, e.Data, e.RecordedAt, nil, nil, nil)
	br := conn.SendBatch(ctx, b)
	err = execN(br, n+1)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return conn, e.ID
}

// feedIDs reads the whole feed after after and returns the event ids and
// the page's head.
func feedIDs(t *testing.T, s *store, typ string, after int64) ([]string, int64) {
	t.Helper()
	page, err := s.ReadFeed(t.Context(), storage.FeedQuery{After: after, Limit: 100, AggregateType: typ})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range page.Events {
		ids = append(ids, e.ID)
	}
	return ids, page.Head
}

func TestWatermarkHoldsReadersBehindAppendsInFlight(t *testing.T) {
	for _, end := range []string{"COMMIT", "ROLLBACK"} {
		t.Run(end, func(t *testing.T) {
			s := openBatchTest(t)
			ctx := t.Context()
			first, err := s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "a",
				Events: []storage.Event{{ID: uuid.NewString(), Type: "Happened", RecordedAt: time.Now().UTC()}}})
			if err != nil {
				t.Fatal(err)
			}
			notes := make(chan struct{}, 100)
			wctx, stop := context.WithCancel(ctx)
			defer stop()
			go func() { _ = s.WatchAppends(wctx, func() { notes <- struct{}{} }) }()
			<-notes // listening

			conn, held := inFlightAppend(t, s, "t", "b")
			later := storage.Event{ID: uuid.NewString(), Type: "Happened", RecordedAt: time.Now().UTC()}
			res, err := s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "c", Events: []storage.Event{later}})
			if err != nil {
				t.Fatal(err)
			}
			// The later append is committed, the older one in flight: a
			// reader sees neither, and its head stays before both.
			for _, typ := range []string{"", "t"} {
				ids, head := feedIDs(t, s, typ, first.Position)
				if len(ids) != 0 || head != first.Position {
					t.Errorf("feed %q with an older append in flight: %d events, head %d; want none, head %d", typ, len(ids), head, first.Position)
				}
			}
			if h, err := s.FeedHead(ctx, ""); err != nil || h != first.Position {
				t.Errorf("FeedHead with an older append in flight = %d, %v; want %d", h, err, first.Position)
			}
			if lag, err := FeedLag(ctx, s); err != nil || lag < 1 {
				t.Errorf("FeedLag with a later append held back = %d, %v; want at least 1", lag, err)
			}

			for len(notes) > 0 {
				<-notes
			}
			if _, err := conn.Exec(ctx, end); err != nil {
				t.Fatal(err)
			}
			want := []string{held, later.ID}
			if end == "ROLLBACK" {
				want = want[1:]
			}
			for _, typ := range []string{"", "t"} {
				ids, head := feedIDs(t, s, typ, first.Position)
				if len(ids) != len(want) || ids[len(ids)-1] != later.ID || ids[0] != want[0] || head != res.Position {
					t.Errorf("feed %q after the %s: events %v, head %d; want %v, head %d", typ, end, ids, head, want, res.Position)
				}
			}
			if lag, err := FeedLag(ctx, s); err != nil || lag != 0 {
				t.Errorf("FeedLag after the %s = %d, %v; want 0", end, lag, err)
			}
			// A rolled-back append notifies nobody: the watcher, which
			// saw an append in flight, looks again and notifies.
			select {
			case <-notes:
			case <-time.After(5 * time.Second):
				t.Errorf("no notification within 5 s of the %s of the append in flight", end)
			}
		})
	}
}

// TestAppendWaitsForItsAggregateOnly checks that reserve takes the lock of
// the aggregate written, and no other: an append to an aggregate whose
// lock another transaction holds waits for that transaction; an append to
// another aggregate does not.
func TestAppendWaitsForItsAggregateOnly(t *testing.T) {
	s := openBatchTest(t)
	ctx := t.Context()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", s.aggregateKey("t", "x")); err != nil {
		t.Fatal(err)
	}
	appendTo := func(id string) chan error {
		done := make(chan error, 1)
		go func() {
			_, err := s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: id,
				Events: []storage.Event{{ID: uuid.NewString(), Type: "Happened", RecordedAt: time.Now().UTC()}}})
			done <- err
		}()
		return done
	}
	if err := <-appendTo("y"); err != nil {
		t.Fatalf("append to another aggregate: %v", err)
	}
	blocked := appendTo("x")
	select {
	case err := <-blocked:
		t.Fatalf("append to t/x returned (%v) while its aggregate's lock was held", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-blocked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("append to t/x still waiting after the lock was released")
	}
}

// TestWatermarkIgnoresIDsAboveTheSnapshot: an append may take its id after
// the watermark statement's snapshot and register before that statement
// reads pg_locks. Its id is then above the snapshot's xmax and must not
// lower the watermark; rebuilt from its low 32 bits as if it were below,
// it put the watermark 2^32 too low and hid the whole feed (found by the
// e2e long-poll test). A registration of an id a little above the next
// one stands for it here.
func TestWatermarkIgnoresIDsAboveTheSnapshot(t *testing.T) {
	s, schema := openBatchTestSchema(t)
	ctx := t.Context()
	res, err := s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "a",
		Events: []storage.Event{{ID: uuid.NewString(), Type: "Happened", RecordedAt: time.Now().UTC()}}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	regKey := int32(lockKey("register", strings.Trim(schema, `"`)) & 0x7fffffff) // schema is quoted
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1,
	((pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000 + 2147483648) % 4294967296 - 2147483648)::int4)`, regKey); err != nil {
		t.Fatal(err)
	}
	ids, head := feedIDs(t, s, "", 0)
	if len(ids) != 1 || head != res.Position {
		t.Errorf("feed with a registration above the snapshot: %d events, head %d; want 1, head %d", len(ids), head, res.Position)
	}
	if h, err := s.FeedHead(ctx, "t"); err != nil || h == 0 {
		t.Errorf("FeedHead(t) with a registration above the snapshot = %d, %v", h, err)
	}
}

// TestDeleteWaitsForAppendsInFlight: a deletion raises the marks that the
// heads read without the watermark, so it must wait for the appends in
// flight (the drain lock): deleting a later, committed aggregate while an
// older append is in flight would otherwise move the head past the older
// append's position, and a reader continuing from that head would skip it.
func TestDeleteWaitsForAppendsInFlight(t *testing.T) {
	s := openBatchTest(t)
	ctx := t.Context()
	conn, held := inFlightAppend(t, s, "t", "x")
	later, err := s.Append(ctx, storage.AppendRequest{AggregateType: "t", AggregateID: "y",
		Events: []storage.Event{{ID: uuid.NewString(), Type: "Happened", RecordedAt: time.Now().UTC()}}})
	if err != nil {
		t.Fatal(err)
	}
	deleted := make(chan error, 1)
	go func() { deleted <- s.DeleteAggregate(ctx, "t", "y") }()
	select {
	case err := <-deleted:
		t.Fatalf("DeleteAggregate returned (%v) while an older append was in flight", err)
	case <-time.After(300 * time.Millisecond):
	}
	if h, err := s.FeedHead(ctx, ""); err != nil || h >= later.Position {
		t.Errorf("FeedHead while the deletion waits = %d, %v; want below the held append's position", h, err)
	}
	if _, err := conn.Exec(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("DeleteAggregate still waiting after the append in flight committed")
	}
	if ids, _ := feedIDs(t, s, "", 0); len(ids) != 1 || ids[0] != held {
		t.Errorf("feed after the deletion: %v; want only the held append's event %s", ids, held)
	}
	if h, err := s.FeedHead(ctx, ""); err != nil || h < later.Position {
		t.Errorf("FeedHead after the deletion = %d, %v; want at least the deleted position %d", h, err, later.Position)
	}
}
