package storagetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

func feedDateCases() []testCase {
	return []testCase{
		{"ReadFeedByDate", "ReadFeed with From and To returns exactly the events whose RecordedAt is within [From, To] (both inclusive, at microsecond precision; a zero bound is open; From after To selects nothing), in position order, on the feed of all types and a type's feed, also when RecordedAt does not rise with the position; paging with Limit and After = Head neither skips nor repeats an event", testReadFeedByDate},
		{"ReadFeedByDateLargeRange", "ReadFeed with a range that holds many events (all of them, or all but a few) returns exactly those within it, paged with small and large Limits", testReadFeedByDateLarge},
		{"ReadFeedByDateAfterFeedSequence", "ReadFeed with From, To, an AggregateType and AfterFeedSequence returns the type's events within the range whose FeedSequence is greater, and reading on with After = Head continues them", testReadFeedByDateFeedSequence},
	}
}

// dateBase is the day the date cases record their events on.
var dateBase = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// datePlan saves batches directly through Append with chosen RecordedAt
// times, in minutes after dateBase (one batch, one time, as the Store
// stamps them), not rising with the position.
var datePlan = []struct {
	typ, id string
	n       int
	minute  int
}{
	{"alpha", "1", 2, 10}, {"beta", "1", 1, 5}, {"alpha", "2", 3, 30}, {"gamma", "1", 1, 20},
	{"alpha", "1", 1, 20}, {"beta", "2", 4, 60}, {"alpha", "2", 1, 0}, {"gamma", "1", 2, 45},
	{"beta", "1", 3, 30}, {"alpha", "3", 1, 90}, {"beta", "3", 2, -60}, {"alpha", "1", 2, 31},
}

// saveDatePlan appends datePlan and returns the whole feed.
func saveDatePlan(t *testing.T, h *harness) []storage.Event {
	t.Helper()
	for i, p := range datePlan {
		req := request(p.typ, p.id, evs(p.typ+"Happened", p.n), storage.VersionCheck{})
		at := dateBase.Add(time.Duration(p.minute) * time.Minute)
		for j := range req.Events {
			req.Events[j].RecordedAt = at
		}
		if _, err := h.s.Append(t.Context(), req); err != nil {
			t.Fatalf("Append of batch %d (%s/%s): %v", i, p.typ, p.id, err)
		}
	}
	feed, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 100})
	return feed
}

// dateRange is one From, To of the date cases.
type dateRange struct {
	name     string
	from, to time.Time
}

func dateRanges() []dateRange {
	m := func(minute int) time.Time { return dateBase.Add(time.Duration(minute) * time.Minute) }
	return []dateRange{
		{"inside", m(15), m(40)},
		{"at the bounds", m(10), m(30)},
		{"one instant", m(20), m(20)},
		{"a microsecond inside the bounds", m(10).Add(time.Microsecond), m(30).Add(-time.Microsecond)},
		{"bounds between microseconds", m(10).Add(time.Nanosecond), m(30).Add(999 * time.Nanosecond)},
		{"only From", m(30), time.Time{}},
		{"only To", time.Time{}, m(20)},
		{"the whole day", dateBase, dateBase.Add(24*time.Hour - time.Microsecond)},
		{"far past to far future", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)},
		{"nothing recorded", m(100), m(200)},
		{"before everything", time.Time{}, m(-61)},
		{"From after To", m(40), m(15)},
	}
}

// nthFeedSeq returns the FeedSequence of the batch of typ at index n of
// feed (a batch being a run of events with one FeedSequence), and fails
// the test when there are not that many.
func nthFeedSeq(t testing.TB, feed []storage.Event, typ string, n int) int64 {
	t.Helper()
	var seqs []int64
	for _, e := range feed {
		if e.AggregateType == typ && (len(seqs) == 0 || seqs[len(seqs)-1] != e.FeedSequence) {
			seqs = append(seqs, e.FeedSequence)
		}
	}
	if n >= len(seqs) {
		t.Fatalf("the feed must hold at least %d batches of type %s (runs of one FeedSequence), it holds %d", n+1, typ, len(seqs))
	}
	return seqs[n]
}

// inRange returns the events of feed within r, of typ when not "", and
// with a FeedSequence above afterFS.
func inRange(feed []storage.Event, r dateRange, typ string, afterFS int64) []storage.Event {
	var want []storage.Event
	for _, e := range feed {
		if typ != "" && e.AggregateType != typ || e.FeedSequence <= afterFS && typ != "" {
			continue
		}
		if !r.from.IsZero() && e.RecordedAt.Before(r.from) || !r.to.IsZero() && e.RecordedAt.After(r.to) {
			continue
		}
		want = append(want, e)
	}
	return want
}

func testReadFeedByDate(t *testing.T, h *harness) {
	feed := saveDatePlan(t, h)
	last := feed[len(feed)-1].Position
	for _, r := range dateRanges() {
		for _, typ := range []string{"", "alpha", "beta"} {
			want := inRange(feed, r, typ, 0)
			for _, limit := range []int{1, 2, 3, 100} {
				what := fmt.Sprintf("range %s [%v, %v] of feed %q with Limit %d", r.name, r.from, r.to, typ, limit)
				q := storage.FeedQuery{Limit: limit, AggregateType: typ, From: r.from, To: r.to}
				got, head, err := readFeed(t.Context(), h.s, q)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if msg := sameEvents(got, want); msg != "" {
					t.Errorf("%s, paged with After = Head, must return exactly the events recorded within it: %s", what, msg)
				}
				if len(want) > 0 && head < want[len(want)-1].Position {
					t.Errorf("%s: Head %d ends before the last event read (%d)", what, head, want[len(want)-1].Position)
				}
				if head > last {
					t.Errorf("%s: Head %d is past the end of the feed (%d)", what, head, last)
				}
				// On from a position in the middle: the rest only.
				if len(want) > 1 {
					mid := want[len(want)/2-1].Position
					q.After = mid
					got, _, err := readFeed(t.Context(), h.s, q)
					if err != nil {
						t.Fatalf("%s after %d: %v", what, mid, err)
					}
					if msg := sameEvents(got, want[len(want)/2:]); msg != "" {
						t.Errorf("%s after position %d must return the events of the range after it: %s", what, mid, msg)
					}
				}
			}
		}
	}
}

func testReadFeedByDateFeedSequence(t *testing.T, h *harness) {
	feed := saveDatePlan(t, h)
	ranges := dateRanges()
	for _, r := range []dateRange{ranges[0], ranges[5], ranges[6]} {
		for _, typ := range []string{"alpha", "beta"} {
			// After each of the type's first four batches (FeedSequences
			// may have gaps, so the numbers come from the feed).
			for n := range 4 {
				k := nthFeedSeq(t, feed, typ, n)
				want := inRange(feed, r, typ, k)
				for _, limit := range []int{1, 100} {
					what := fmt.Sprintf("range %s of feed %s after FeedSequence %d with Limit %d", r.name, typ, k, limit)
					q := storage.FeedQuery{Limit: limit, AggregateType: typ, AfterFeedSequence: k, From: r.from, To: r.to}
					got, _, err := readFeed(t.Context(), h.s, q)
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					if msg := sameEvents(got, want); msg != "" {
						t.Errorf("%s, paged with After = Head, must return exactly the later batches recorded within it: %s", what, msg)
					}
				}
			}
		}
	}
}

func testReadFeedByDateLarge(t *testing.T, h *harness) {
	// 200 batches of 2 events, of two types, recorded a minute apart but
	// out of order in threes.
	var reqs []storage.AppendRequest
	for k := range 200 {
		typ := []string{"alpha", "beta"}[k%2]
		req := request(typ, fmt.Sprint("a", k%7), evs(typ+"Happened", 2), storage.VersionCheck{})
		at := dateBase.Add(time.Duration(k-(k%3)*2) * time.Minute)
		for j := range req.Events {
			req.Events[j].RecordedAt = at
		}
		reqs = append(reqs, req)
		if len(reqs) == 7 || k == 199 {
			for _, r := range reqs {
				if _, err := h.s.Append(t.Context(), r); err != nil {
					t.Fatalf("Append: %v", err)
				}
			}
			reqs = nil
		}
	}
	feed, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 1000})
	m := func(minute int) time.Time { return dateBase.Add(time.Duration(minute) * time.Minute) }
	for _, r := range []dateRange{
		{"everything", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)},
		{"only From, before everything", m(-10), time.Time{}},
		{"only To, after everything", time.Time{}, m(300)},
		{"exactly the first to the last", m(-4), m(199)},
		{"all but the ends", m(3), m(190)},
		{"only From, most", m(10), time.Time{}},
		{"only To, most", time.Time{}, m(180)},
	} {
		for _, typ := range []string{"", "beta"} {
			want := inRange(feed, r, typ, 0)
			for _, limit := range []int{1, 7, 100, 1000} {
				what := fmt.Sprintf("range %s [%v, %v] of feed %q with Limit %d", r.name, r.from, r.to, typ, limit)
				got, _, err := readFeed(t.Context(), h.s, storage.FeedQuery{Limit: limit, AggregateType: typ, From: r.from, To: r.to})
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if msg := sameEvents(got, want); msg != "" {
					t.Errorf("%s, paged with After = Head, must return exactly the events recorded within it: %s", what, msg)
				}
			}
			// A type's feed after its 30th batch's FeedSequence.
			if typ != "" {
				k := nthFeedSeq(t, feed, typ, 29)
				q := storage.FeedQuery{Limit: 7, AggregateType: typ, AfterFeedSequence: k, From: r.from, To: r.to}
				got, _, err := readFeed(t.Context(), h.s, q)
				if err != nil {
					t.Fatalf("%+v: %v", q, err)
				}
				if msg := sameEvents(got, inRange(feed, r, typ, k)); msg != "" {
					t.Errorf("range %s of feed %s after FeedSequence %d (the type's 30th batch) must return exactly its later events: %s", r.name, typ, k, msg)
				}
			}
		}
	}
}
