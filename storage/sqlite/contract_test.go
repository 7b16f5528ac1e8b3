package sqlite_test

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/sqlite"
)

// restoreDump creates a database file in t's temporary directory from the
// SQL dump at src, through the driver with the Storage's settings.
func restoreDump(t *testing.T, src string) string {
	t.Helper()
	dump, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", sqlite.DSN(path, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(string(dump)); err != nil {
		t.Fatalf("restore %s: %v", src, err)
	}
	return path
}

// TestMigratesVersion1 opens the database of testdata/v1.sql, written by the schema of
// migration 1 (order/1: batches of 2, 1 and 2 events; invoice/9: 3;
// order/2: 1; projection "totals" with instances "1" and "2"), and checks
// that the migrated store numbers the old batches and keeps working.
func TestMigratesVersion1(t *testing.T) {
	s, err := sqlite.Open(restoreDump(t, "testdata/v1.sql"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	wantFS := []int64{1, 1, 1, 1, 1, 2, 3, 4, 4} // order, order, invoice×3, order…
	if len(page.Events) != len(wantFS) || page.Head != 9 {
		t.Fatalf("feed: %d events, head %d", len(page.Events), page.Head)
	}
	for i, e := range page.Events {
		if e.FeedSequence != wantFS[i] || e.Position != int64(i+1) || e.EncryptedData != "" {
			t.Errorf("event %d: position %d, feed sequence %d, want %d", i, e.Position, e.FeedSequence, wantFS[i])
		}
	}
	feeds, err := s.Feeds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []storage.FeedInfo{
		{AggregateType: "invoice", AggregateCount: 1, BatchCount: 1, EventCount: 3},
		{AggregateType: "order", AggregateCount: 2, BatchCount: 4, EventCount: 6},
	}
	if len(feeds) != 2 || feeds[0] != want[0] || feeds[1] != want[1] {
		t.Fatalf("feeds: %+v, want %+v", feeds, want)
	}
	aggs, err := s.ListAggregates(ctx, storage.AggregateQuery{AggregateType: "order", Limit: 10})
	if err != nil || aggs.Total != 2 || len(aggs.Aggregates) != 2 || aggs.Aggregates[0].ID != "1" || aggs.Aggregates[0].Version != 3 ||
		aggs.Aggregates[1].ID != "2" || aggs.Aggregates[1].Version != 1 {
		t.Fatalf("migrated aggregate list: %+v, %v; want order/1 at version 3 and order/2 at 1", aggs, err)
	}
	res, err := s.Append(ctx, request("order", "2", storage.ExpectVersion(1), 2))
	if err != nil || res.Version != 2 || res.Position != 11 {
		t.Fatalf("append after migration: %+v, %v", res, err)
	}
	if head, err := s.FeedHead(ctx, "order"); err != nil || head != 5 {
		t.Fatalf("order feed head %d, %v; want 5", head, err)
	}
	st, err := s.LoadProjection(ctx, "totals", "1")
	if err != nil || string(st.Data) != `{"n":5}` || !st.CreatedAt.Equal(st.UpdatedAt) || st.Reference.Kind != storage.RefNone {
		t.Fatalf("migrated state: %+v, %v", st, err)
	}
	list, err := s.ListProjections(ctx, storage.ProjectionQuery{Name: "totals", Sort: storage.SortByUpdatedAt, Limit: 10})
	if err != nil || list.Total != 2 || len(list.States) != 2 || list.States[0].InstanceID != "2" {
		t.Fatalf("migrated list: %+v, %v", list, err)
	}
}

// TestPositionsAndFeedSequencesAreNotReused deletes the last events of the
// feed, reopens the file, and appends: positions and feed sequences go on
// from the deleted ones.
func TestPositionsAndFeedSequencesAreNotReused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "es.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, request("a", "1", storage.VersionCheck{}, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, request("b", "1", storage.VersionCheck{}, 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAggregate(ctx, "b", "1"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAggregate(ctx, "b", "1"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if head, err := s.FeedHead(ctx, ""); err != nil || head != 5 {
		t.Fatalf("head after deleting the tail: %d, %v; want 5", head, err)
	}
	if head, err := s.FeedHead(ctx, "b"); err != nil || head != 1 {
		t.Fatalf("head of a deleted type: %d, %v; want 1 (the head never goes down)", head, err)
	}
	if _, err := s.FeedHead(ctx, "never"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("head of an unknown type: %v, want ErrNotFound", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Append(ctx, request("b", "1", storage.ExpectVersion(0), 1))
	if err != nil || res.Position != 6 || res.Version != 1 {
		t.Fatalf("append after deletion: %+v, %v; want position 6, version 1", res, err)
	}
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 10, AggregateType: "b"})
	if err != nil || len(page.Events) != 1 || page.Events[0].FeedSequence != 2 || page.Events[0].Sequence != 1 {
		t.Fatalf("feed of b: %+v, %v; want one event at feed sequence 2", page.Events, err)
	}
	if err := s.DeleteAggregateType(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAggregateType(ctx, "a"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("second type delete: %v, want ErrNotFound", err)
	}
	feeds, err := s.Feeds(ctx)
	if err != nil || len(feeds) != 1 || feeds[0] != (storage.FeedInfo{AggregateType: "b", AggregateCount: 1, BatchCount: 1, EventCount: 1}) {
		t.Fatalf("feeds: %+v, %v", feeds, err)
	}
	res, err = s.Append(ctx, request("a", "1", storage.ExpectVersion(0), 1))
	if err != nil || res.Position != 7 {
		t.Fatalf("append to a deleted type: %+v, %v", res, err)
	}
	if head, err := s.FeedHead(ctx, "a"); err != nil || head != 2 {
		t.Fatalf("head of a: %d, %v; want 2", head, err)
	}
}

// TestAppendAllIsAtomic: one refused request of several writes nothing,
// also when it comes last, and the error names it.
func TestAppendAllIsAtomic(t *testing.T) {
	s := openTemp(t)
	if _, err := s.Append(ctx, request("a", "taken", storage.VersionCheck{}, 1)); err != nil {
		t.Fatal(err)
	}
	reqs := []storage.AppendRequest{
		request("a", "1", storage.ExpectVersion(0), 3),
		request("b", "2", storage.VersionCheck{}, 1),
		request("a", "taken", storage.ExpectVersion(0), 2),
	}
	_, err := s.AppendAll(ctx, reqs)
	var be *storage.BatchError
	if !errors.As(err, &be) || be.Index != 2 || be.AggregateID != "taken" || !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("AppendAll with a stale request: %v", err)
	}
	if page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 10}); err != nil || len(page.Events) != 1 {
		t.Fatalf("feed after a refused AppendAll: %d events, %v", len(page.Events), err)
	}
	reqs[2].ExpectedVersion = storage.ExpectVersion(1)
	reqs[2].Events[0].EncryptedData = "sealed\x00bytes"
	results, err := s.AppendAll(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	want := []storage.AppendResult{{Version: 1, Position: 4}, {Version: 1, Position: 5}, {Version: 2, Position: 7}}
	for i := range want {
		if results[i] != want[i] {
			t.Errorf("result %d: %+v, want %+v", i, results[i], want[i])
		}
	}
	// A retry writes nothing and reports duplicates.
	again, err := s.AppendAll(ctx, reqs)
	if err != nil || !again[0].Duplicate || !again[2].Duplicate || again[2].Position != 7 {
		t.Fatalf("retried AppendAll: %+v, %v", again, err)
	}
	agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "a", AggregateID: "taken"})
	if err != nil || len(agg.Events) != 3 || agg.Events[1].EncryptedData != "sealed\x00bytes" ||
		agg.Events[1].FeedSequence != 3 || agg.Events[2].FeedSequence != 3 {
		t.Fatalf("a/taken: %+v, %v", agg.Events, err)
	}
}

// TestLoadRange loads parts of a history of five saves.
func TestLoadRange(t *testing.T) {
	s := openTemp(t)
	for v := range 5 {
		if _, err := s.Append(ctx, request("a", "1", storage.ExpectVersion(int64(v)), v%2+1)); err != nil {
			t.Fatal(err)
		}
	}
	// Versions 1..5 hold 1, 2, 1, 2, 1 events: sequences 1 | 2 3 | 4 | 5 6 | 7.
	for _, c := range []struct {
		after, limit int64
		first, n     int64
	}{{0, 0, 1, 7}, {1, 2, 2, 3}, {2, 0, 4, 4}, {4, 5, 7, 1}, {5, 0, 0, 0}, {9, 1, 0, 0}, {0, 1, 1, 1}} {
		agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "a", AggregateID: "1", AfterVersion: c.after, Limit: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		if agg.Version != 5 || int64(len(agg.Events)) != c.n || (c.n > 0 && agg.Events[0].Sequence != c.first) {
			t.Errorf("after %d limit %d: version %d, %d events; want %d from sequence %d", c.after, c.limit, agg.Version, len(agg.Events), c.n, c.first)
		}
	}
	if _, err := s.Load(ctx, storage.LoadQuery{AggregateType: "a", AggregateID: "2", AfterVersion: 1}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("missing aggregate: %v", err)
	}
}
