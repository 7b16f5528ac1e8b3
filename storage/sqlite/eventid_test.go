package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/sqlite"
)

// TestEventIDsStoredAsUUIDBytes checks schema version 12: a file of
// version 11 (with version 11's index events_by_type_time, which version 13
// drops) holding ids as text migrates the UUIDs in canonical text to
// their 16 bytes and keeps other ids as text; every id reads back as
// given, before and after, and a retry of a save under an id of either
// kind is a duplicate, not a second event.
func TestEventIDsStoredAsUUIDBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "es.db")
	ids := []string{
		"0b9d6a4e-6f1c-4c1e-9a57-3f2a1d0c8e11", // canonical: stored as 16 bytes
		"0B9D6A4E-6F1C-4C1E-9A57-3F2A1D0C8E11", // upper case: text, another id
		"{0b9d6a4e-6f1c-4c1e-9a57-3f2a1d0c8e12}",
		"0b9d6a4e6f1c4c1e9a573f2a1d0c8e13",
		"0b9d6a4e-6f1c-4c1e-9a57-3f2a1d0c8e1g", // not hexadecimal
		"order-1",
	}
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i, id := range ids {
		if _, err := s.Append(ctx, storage.AppendRequest{AggregateType: "order", AggregateID: "new",
			ExpectedVersion: storage.ExpectVersion(int64(i)),
			Events:          []storage.Event{{ID: id, Type: "Happened", RecordedAt: now}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The same ids as version 11 stored them, in another aggregate.
	db, err := sql.Open("sqlite", sqlite.DSN(path, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		if _, err := db.ExecContext(ctx, `INSERT INTO events (position, aggregate_type, aggregate_id, event_id, event_type,
	version, sequence, recorded_at, feed_sequence) VALUES (?, 'order', 'old', ?, 'Happened', ?, ?, ?, ?)`,
			100+i, id, i+1, i+1, now.UnixMicro(), 100+i); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `CREATE INDEX events_by_type_time ON events (aggregate_type, recorded_at);
PRAGMA user_version = 11`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, agg := range []string{"new", "old"} {
		got, err := s.Load(ctx, storage.LoadQuery{AggregateType: "order", AggregateID: agg})
		if err != nil || len(got.Events) != len(ids) {
			t.Fatalf("load %s: %d events, %v", agg, len(got.Events), err)
		}
		for i, e := range got.Events {
			if e.ID != ids[i] {
				t.Errorf("%s, event %d: id %q, want %q", agg, i, e.ID, ids[i])
			}
			res, err := s.Append(ctx, storage.AppendRequest{AggregateType: "order", AggregateID: agg,
				Events: []storage.Event{{ID: ids[i], Type: "Happened", RecordedAt: now}}})
			if err != nil || !res.Duplicate {
				t.Errorf("%s: retry of %q: %+v, %v; want a duplicate", agg, ids[i], res, err)
			}
		}
	}
	db, err = sql.Open("sqlite", sqlite.DSN(path, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var blobs, texts int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE typeof(event_id) = 'blob' AND length(event_id) = 16),
	count(*) FILTER (WHERE typeof(event_id) = 'text') FROM events`).Scan(&blobs, &texts); err != nil {
		t.Fatal(err)
	}
	if blobs != 2 || texts != 2*(len(ids)-1) {
		t.Errorf("%d ids stored as 16 bytes, %d as text; want 2 and %d", blobs, texts, 2*(len(ids)-1))
	}
}
