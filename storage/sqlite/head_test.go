package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/sqlite"
)

// TestTwoWritersOnOneFile: a Storage that keeps its numbering in memory
// between batches sees what another Storage on the same file (standing for
// another process), or a plain connection, committed in between: positions
// and feed sequences stay gap-free and the counts add up.
func TestTwoWritersOnOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "es.db")
	var stores [2]*sqlite.Storage
	for i := range stores {
		s, err := sqlite.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	const rounds = 20
	want, shared := int64(0), int64(0)
	feedSeq := map[string]int64{}
	batches := int64(0)
	for i := range rounds {
		for k, s := range stores {
			typ := []string{"a", "b"}[(i+k)%2]
			n := 1 + i%3
			res, err := s.Append(ctx, request(typ, fmt.Sprint(k, "-", i), eventstore.ExpectVersion(0), n))
			if err != nil {
				t.Fatal(err)
			}
			want += int64(n)
			feedSeq[typ]++
			batches++
			if res.Position != want {
				t.Fatalf("round %d, store %d: position %d, want %d", i, k, res.Position, want)
			}
			if head, err := s.FeedHead(ctx, typ); err != nil || head != feedSeq[typ] {
				t.Fatalf("round %d, store %d: feed head of %s %d, %v; want %d", i, k, typ, head, err, feedSeq[typ])
			}
			// One aggregate both write to, with version checks.
			res, err = s.Append(ctx, request("b", "shared", eventstore.ExpectVersion(shared), 2))
			if err != nil {
				t.Fatalf("round %d, store %d: shared aggregate at %d: %v", i, k, shared, err)
			}
			shared++
			want += 2
			feedSeq["b"]++
			batches++
			if res.Version != shared || res.Position != want {
				t.Fatalf("round %d, store %d: shared aggregate %+v, want version %d, position %d", i, k, res, shared, want)
			}
		}
		if i == rounds/2 {
			// A write by a plain connection: one more batch of type a.
			db, err := sql.Open("sqlite", sqlite.DSN(path, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			want++
			feedSeq["a"]++
			batches++
			_, err = db.Exec(`INSERT INTO events (position, aggregate_type, aggregate_id, event_id, event_type,
				version, sequence, recorded_at, feed_sequence) VALUES (?, 'a', 'plain', 'e-plain', 'Happened', 1, 1, 0, ?)`,
				want, feedSeq["a"])
			if err == nil {
				_, err = db.Exec(`UPDATE feeds SET feed_sequence = ?, aggregates = aggregates + 1,
					batches = batches + 1, events = events + 1 WHERE aggregate_type = 'a'`, feedSeq["a"])
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	page, err := stores[0].ReadFeed(ctx, eventstore.FeedQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(page.Events)) != want {
		t.Fatalf("feed holds %d events, want %d", len(page.Events), want)
	}
	for i, e := range page.Events {
		if e.Position != int64(i)+1 {
			t.Fatalf("event %d at position %d", i, e.Position)
		}
	}
	for _, typ := range []string{"a", "b"} {
		page, err := stores[1].ReadFeed(ctx, eventstore.FeedQuery{Limit: 1000, AggregateType: typ})
		if err != nil {
			t.Fatal(err)
		}
		var last int64
		for _, e := range page.Events {
			if e.FeedSequence != last && e.FeedSequence != last+1 {
				t.Fatalf("type %s: feed sequence %d after %d", typ, e.FeedSequence, last)
			}
			last = e.FeedSequence
		}
		if last != feedSeq[typ] {
			t.Fatalf("type %s: last feed sequence %d, want %d", typ, last, feedSeq[typ])
		}
	}
	feeds, err := stores[0].Feeds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var gotBatches, gotEvents int64
	for _, f := range feeds {
		gotBatches += f.BatchCount
		gotEvents += f.EventCount
	}
	if gotBatches != batches || gotEvents != want {
		t.Fatalf("feeds count %d batches, %d events; want %d, %d", gotBatches, gotEvents, batches, want)
	}
}

// TestAppendAfterDeleteInOneStorage: an aggregate deleted and written
// again by the same Storage starts over at version 1, its events at the
// next positions.
func TestAppendAfterDeleteInOneStorage(t *testing.T) {
	s := openTemp(t)
	for v := range int64(2) {
		if _, err := s.Append(ctx, request("a", "1", eventstore.ExpectVersion(v), 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteAggregate(ctx, "a", "1"); err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, request("a", "1", eventstore.ExpectVersion(0), 1))
	if err != nil || res.Version != 1 || res.Position != 5 {
		t.Fatalf("after delete: %+v, %v; want version 1 at position 5", res, err)
	}
	if err := s.DeleteAggregateType(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	res, err = s.Append(ctx, request("a", "1", eventstore.ExpectVersion(0), 1))
	if err != nil || res.Version != 1 || res.Position != 6 {
		t.Fatalf("after type delete: %+v, %v; want version 1 at position 6", res, err)
	}
	agg, err := s.Load(ctx, eventstore.LoadQuery{AggregateType: "a", AggregateID: "1"})
	if err != nil || len(agg.Events) != 1 || agg.Events[0].Sequence != 1 {
		t.Fatalf("load: %+v, %v", agg, err)
	}
}
