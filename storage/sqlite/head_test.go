package sqlite_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/sqlite"
)

// TestTwoWritersOnOneFile: a Storage that keeps its numbering in memory
// between batches sees what another Storage on the same file (standing for
// another process), or a plain connection, committed in between: positions
// and feed sequences stay gap-free and the counts add up.
func TestTwoWritersOnOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "es.db")
	var stores [2]storage.Storage
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
			res, err := s.Append(ctx, request(typ, fmt.Sprint(k, "-", i), storage.ExpectVersion(0), n))
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
			res, err = s.Append(ctx, request("b", "shared", storage.ExpectVersion(shared), 2))
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
			// A write by a plain connection, as a Storage writes a
			// batch of a type that has a row in the feeds table: one
			// event, left out of the row's counts.
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
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	page, err := stores[0].ReadFeed(ctx, storage.FeedQuery{Limit: 1000})
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
		page, err := stores[1].ReadFeed(ctx, storage.FeedQuery{Limit: 1000, AggregateType: typ})
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
		if _, err := s.Append(ctx, request("a", "1", storage.ExpectVersion(v), 2)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteAggregate(ctx, "a", "1"); err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, request("a", "1", storage.ExpectVersion(0), 1))
	if err != nil || res.Version != 1 || res.Position != 5 {
		t.Fatalf("after delete: %+v, %v; want version 1 at position 5", res, err)
	}
	if err := s.DeleteAggregateType(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	res, err = s.Append(ctx, request("a", "1", storage.ExpectVersion(0), 1))
	if err != nil || res.Version != 1 || res.Position != 6 {
		t.Fatalf("after type delete: %+v, %v; want version 1 at position 6", res, err)
	}
	agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "a", AggregateID: "1"})
	if err != nil || len(agg.Events) != 1 || agg.Events[0].Sequence != 1 {
		t.Fatalf("load: %+v, %v", agg, err)
	}
}

// TestFeedCountsBetweenSettlements: Feeds and FeedHead count the batches
// the feeds table has not settled yet, also when deletions come in
// between and after reopening.
func TestFeedCountsBetweenSettlements(t *testing.T) {
	path := filepath.Join(t.TempDir(), "es.db")
	s, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	type counts struct{ aggs, batches, events, head int64 }
	model := map[string]*counts{"a": {}, "b": {}}
	versions := map[string]int64{}
	check := func(when string) {
		t.Helper()
		feeds, err := s.Feeds(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]storage.FeedInfo{}
		for _, f := range feeds {
			got[f.AggregateType] = f
		}
		for typ, c := range model {
			f := got[typ]
			if f.AggregateCount != c.aggs || f.BatchCount != c.batches || f.EventCount != c.events {
				t.Fatalf("%s: feed %s %+v, want %+v", when, typ, f, *c)
			}
			if head, err := s.FeedHead(ctx, typ); err != nil || head != c.head {
				t.Fatalf("%s: head of %s %d, %v; want %d", when, typ, head, err, c.head)
			}
		}
	}
	appendTo := func(typ, id string, n int) {
		t.Helper()
		key := typ + "/" + id
		if _, err := s.Append(ctx, request(typ, id, storage.ExpectVersion(versions[key]), n)); err != nil {
			t.Fatal(err)
		}
		c := model[typ]
		if versions[key] == 0 {
			c.aggs++
		}
		versions[key]++
		c.batches++
		c.events += int64(n)
		c.head++
	}
	for i := range 150 {
		appendTo("a", fmt.Sprint(i%7), 1+i%3)
		if i%5 == 0 {
			appendTo("b", fmt.Sprint(i%4), 2)
		}
		if i%10 == 9 {
			check(fmt.Sprint("after append ", i))
		}
		if i == 70 || i == 133 {
			// Delete an aggregate of a whose batches are partly unsettled.
			id := fmt.Sprint(i % 7)
			c := model["a"]
			agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "a", AggregateID: id})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteAggregate(ctx, "a", id); err != nil {
				t.Fatal(err)
			}
			c.aggs--
			c.batches -= versions["a/"+id]
			c.events -= int64(len(agg.Events))
			versions["a/"+id] = 0
			check(fmt.Sprint("after delete ", i))
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = sqlite.Open(path, nil); err != nil {
		t.Fatal(err)
	}
	check("after reopen")
	appendTo("b", "new", 1)
	check("after reopen and append")
	if err := s.DeleteAggregateType(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	headB := model["b"].head
	delete(model, "b") // Feeds leaves out a type without events
	check("after type delete")
	if head, err := s.FeedHead(ctx, "b"); err != nil || head != headB {
		t.Fatalf("head of deleted type b: %d, %v; want %d", head, err, headB)
	}
	versions = map[string]int64{}
	model["b"] = &counts{head: headB}
	appendTo("b", "again", 1)
	check("after append to a deleted type")
}
