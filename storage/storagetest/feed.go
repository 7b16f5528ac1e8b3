package storagetest

import (
	"testing"

	"github.com/eventkit-go/eventstore/storage"
)

func feedCases() []testCase {
	return []testCase{
		{"ReadFeedAll", "ReadFeed from 0 returns every event in position order, as Load returns them", testFeedAll},
		{"ReadFeedAfter", "ReadFeed returns only events with a position greater than After", testFeedAfter},
		{"ReadFeedPaging", "ReadFeed returns at most Limit events, and paging with After = Head reads every event exactly once", testFeedPaging},
		{"ReadFeedFilter", "ReadFeed with AggregateType returns exactly that type's events, in position order", testFeedFilter},
		{"ReadFeedHeadKeepsUp", "on a quiet or filtered feed Head reaches the store's last position, so an idle reader keeps up", testFeedHead},
		{"FeedCompleteUnderConcurrentWriters", "a reader following the feed while writers save concurrently sees every acknowledged event exactly once, in increasing position order, each aggregate's versions and sequences without gaps, each batch with one FeedSequence, strictly increasing per type (gaps allowed)", func(t *testing.T, h *harness) {
			testFeedConcurrent(t, h, "", false)
		}},
		{"FilteredFeedCompleteUnderConcurrentWriters", "a reader following one aggregate type's feed while writers save concurrently sees every acknowledged event of that type exactly once, in order, each batch with one FeedSequence, strictly increasing (gaps allowed)", func(t *testing.T, h *harness) {
			testFeedConcurrent(t, h, "alpha", false)
		}},
	}
}

// seedFeed saves a mixed history over three types and returns every event
// as loaded, in position order.
func seedFeed(t *testing.T, h *harness) []storage.Event {
	t.Helper()
	plan := []struct {
		typ, id string
		n       int
	}{
		{"alpha", "1", 2}, {"beta", "1", 1}, {"alpha", "2", 3}, {"gamma", "1", 1},
		{"alpha", "1", 1}, {"beta", "2", 4}, {"alpha", "2", 1}, {"gamma", "1", 2},
	}
	for _, p := range plan {
		mustSave(t, h, p.typ, p.id, evs(p.typ+"Happened", p.n), nil)
	}
	var all []storage.Event
	for _, k := range [][2]string{{"alpha", "1"}, {"alpha", "2"}, {"beta", "1"}, {"beta", "2"}, {"gamma", "1"}} {
		all = append(all, mustLoad(t, h, k[0], k[1]).Events...)
	}
	sortByPosition(all)
	return all
}

func sortByPosition(events []storage.Event) {
	for i := 1; i < len(events); i++ {
		for j := i; j > 0 && events[j].Position < events[j-1].Position; j-- {
			events[j], events[j-1] = events[j-1], events[j]
		}
	}
}

func filterType(events []storage.Event, typ string) []storage.Event {
	var out []storage.Event
	for _, e := range events {
		if e.AggregateType == typ {
			out = append(out, e)
		}
	}
	return out
}

func testFeedAll(t *testing.T, h *harness) {
	page, err := h.s.ReadFeed(t.Context(), storage.FeedQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 0 || page.Head != 0 {
		t.Errorf("ReadFeed of an empty store must return no event and Head 0, got %d events and Head %d", len(page.Events), page.Head)
	}
	want := seedFeed(t, h)
	page, err = h.s.ReadFeed(t.Context(), storage.FeedQuery{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPage(storage.FeedQuery{Limit: 100}, page); err != nil {
		t.Error(err)
	}
	if msg := sameEvents(page.Events, want); msg != "" {
		t.Errorf("ReadFeed from 0 must return every event in position order, as Load returns them: %s", msg)
	}
	if last := want[len(want)-1].Position; page.Head != last {
		t.Errorf("after reading everything Head must be the last position %d, got %d", last, page.Head)
	}
}

func testFeedAfter(t *testing.T, h *harness) {
	all := seedFeed(t, h)
	for _, i := range []int{0, 1, 5, len(all) - 2, len(all) - 1} {
		q := storage.FeedQuery{After: all[i].Position, Limit: 100}
		page, err := h.s.ReadFeed(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkPage(q, page); err != nil {
			t.Error(err)
		}
		if msg := sameEvents(page.Events, all[i+1:]); msg != "" {
			t.Errorf("ReadFeed after position %d must return exactly the later events: %s", q.After, msg)
		}
	}
}

func testFeedPaging(t *testing.T, h *harness) {
	all := seedFeed(t, h)
	for _, limit := range []int{1, 2, 3, 7} {
		q := storage.FeedQuery{Limit: limit}
		var got []storage.Event
		for range 100 {
			page, err := h.s.ReadFeed(t.Context(), q)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkPage(q, page); err != nil {
				t.Fatalf("limit %d: %v", limit, err)
			}
			got = append(got, page.Events...)
			if n := len(got); n < len(all) {
				if page.Head >= all[n].Position {
					t.Errorf("limit %d: Head %d passes the unread event at position %d; reading on from Head would skip it", limit, page.Head, all[n].Position)
				}
			}
			if len(page.Events) == 0 && page.Head == q.After {
				break
			}
			q.After = page.Head
		}
		if msg := sameEvents(got, all); msg != "" {
			t.Errorf("limit %d: paging with After = Head must read every event exactly once, in order: %s", limit, msg)
		}
	}
}

func testFeedFilter(t *testing.T, h *harness) {
	all := seedFeed(t, h)
	for _, typ := range []string{"alpha", "beta", "gamma"} {
		want := filterType(all, typ)
		for _, limit := range []int{1, 2, 100} {
			got, _ := mustReadAll(t, h, storage.FeedQuery{Limit: limit, AggregateType: typ})
			if msg := sameEvents(got, want); msg != "" {
				t.Errorf("the %s feed with limit %d must return exactly that type's events, in order: %s", typ, limit, msg)
			}
		}
	}
	got, head := mustReadAll(t, h, storage.FeedQuery{Limit: 10, AggregateType: "delta"})
	if len(got) != 0 {
		t.Errorf("the feed of a type without events must be empty, got %d events", len(got))
	}
	if last := all[len(all)-1].Position; head != last {
		t.Errorf("the Head of an empty filtered feed must reach the store's last position %d, got %d", last, head)
	}
}

func testFeedHead(t *testing.T, h *harness) {
	all := seedFeed(t, h)
	last := all[len(all)-1].Position
	// The last saves were gamma: the alpha feed is quiet at its end.
	for _, typ := range []string{"", "alpha", "beta", "gamma"} {
		_, head := mustReadAll(t, h, storage.FeedQuery{Limit: 3, AggregateType: typ})
		if head != last {
			t.Errorf("feed %q: once drained, Head must reach the store's last position %d, got %d", typ, last, head)
		}
	}
	// A reader that has seen everything stays put, and resumes with the
	// next save.
	page, err := h.s.ReadFeed(t.Context(), storage.FeedQuery{After: last, Limit: 5, AggregateType: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) != 0 || page.Head != last {
		t.Errorf("a drained reader must get no events and keep Head %d, got %d events and Head %d", last, len(page.Events), page.Head)
	}
	res := mustSave(t, h, "beta", "9", evs("Late", 1), nil)
	_, head := mustReadAll(t, h, storage.FeedQuery{After: last, Limit: 5, AggregateType: "alpha"})
	if head != res.Position {
		t.Errorf("after a save of another type, the alpha feed's Head must reach the new last position %d, got %d", res.Position, head)
	}
	got, _ := mustReadAll(t, h, storage.FeedQuery{After: last, Limit: 5, AggregateType: "beta"})
	if len(got) != 1 || got[0].Position != res.Position {
		t.Errorf("a reader resuming after Head must see the next save at %d, got %+v", res.Position, got)
	}
}
