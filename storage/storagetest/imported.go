package storagetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func importedCases() []testCase {
	return []testCase{
		{"ImportedRecordedTimes", "Append and AppendAll store each event's RecordedAt as given, also years before the events stored already and out of order (an import keeps the source's times, eventstore.Store.SaveImported): Load, ReadFeed and ListAggregates return them at microsecond precision, positions follow the order of the appends, and a feed read by date (From, To), of all types or of one, paged with After = Head, returns exactly the events recorded within the range in position order", testImportedRecordedTimes},
	}
}

// importPlan is batches imported after live events: RecordedAt in days
// before dateBase, not rising with the order of the import.
var importPlan = []struct {
	typ, id string
	n       int
	day     int
}{
	{"alpha", "i1", 2, -3000}, {"beta", "i1", 1, -10}, {"alpha", "i2", 1, -2999}, {"alpha", "i1", 3, -5},
	{"beta", "i2", 2, -3001}, {"gamma", "i1", 1, -400}, {"alpha", "i3", 1, -10}, {"beta", "i1", 1, -2},
}

func testImportedRecordedTimes(t *testing.T, h *harness) {
	ctx := t.Context()
	// Live events first, recorded at dateBase.
	for _, id := range []string{"l1", "l2"} {
		req := request("alpha", id, evs("alphaHappened", 1), storage.VersionCheck{})
		for j := range req.Events {
			req.Events[j].RecordedAt = dateBase
		}
		if _, err := h.s.Append(ctx, req); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	at := func(day int) time.Time {
		return dateBase.Add(time.Duration(day)*24*time.Hour + 123456*time.Microsecond)
	}
	// The import: runs of distinct aggregates through AppendAll, the
	// rest through Append, as an importer groups them.
	var group []storage.AppendRequest
	flush := func() {
		if len(group) == 0 {
			return
		}
		if _, err := h.s.AppendAll(ctx, group); err != nil {
			t.Fatalf("AppendAll: %v", err)
		}
		group = nil
	}
	for i, p := range importPlan {
		req := request(p.typ, p.id, evs(p.typ+"Happened", p.n), storage.VersionCheck{})
		for j := range req.Events {
			req.Events[j].RecordedAt = at(p.day)
		}
		if i%3 == 2 {
			flush()
			if _, err := h.s.Append(ctx, req); err != nil {
				t.Fatalf("Append of batch %d: %v", i, err)
			}
			continue
		}
		for _, g := range group {
			if g.AggregateType == p.typ && g.AggregateID == p.id {
				flush()
				break
			}
		}
		group = append(group, req)
	}
	flush()

	feed, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 100})
	if len(feed) != 2+12 {
		t.Fatalf("the feed must hold the 14 events appended, got %d", len(feed))
	}
	// Positions in the order of the appends, times as given.
	k := 2
	for i, p := range importPlan {
		for j := 0; j < p.n; j++ {
			e := feed[k]
			if e.AggregateType != p.typ || e.AggregateID != p.id {
				t.Fatalf("feed event %d must be of batch %d (%s/%s) in the order of the appends, got %s/%s", k, i, p.typ, p.id, e.AggregateType, e.AggregateID)
			}
			if !e.RecordedAt.Equal(at(p.day)) || e.RecordedAt.Location() != time.UTC {
				t.Errorf("ReadFeed: event %d of %s/%s must come back recorded at %v (UTC), got %v", j, p.typ, p.id, at(p.day), e.RecordedAt)
			}
			k++
		}
	}
	agg := mustLoad(t, h, "alpha", "i1")
	if len(agg.Events) != 5 || !agg.Events[0].RecordedAt.Equal(at(-3000)) || !agg.Events[4].RecordedAt.Equal(at(-5)) {
		t.Errorf("Load of alpha/i1 must return its 5 events recorded at %v and %v, got %v", at(-3000), at(-5), agg.Events)
	}
	list, err := h.s.ListAggregates(ctx, storage.AggregateQuery{AggregateType: "alpha", Limit: 10})
	if err != nil {
		t.Fatalf("ListAggregates: %v", err)
	}
	for _, a := range list.Aggregates {
		if a.ID == "i1" && (!a.CreatedAt.Equal(at(-3000)) || !a.UpdatedAt.Equal(at(-5))) {
			t.Errorf("ListAggregates: alpha/i1 must be created at %v and updated at %v (its events' times), got %v and %v", at(-3000), at(-5), a.CreatedAt, a.UpdatedAt)
		}
	}

	for _, r := range []dateRange{
		{"the oldest imported", at(-3002), at(-2999)},
		{"the latest imported", at(-11), at(-1)},
		{"imported and live", at(-10), dateBase},
		{"only the live", dateBase, time.Time{}},
		{"everything before the live", time.Time{}, dateBase.Add(-time.Microsecond)},
		{"one imported instant", at(-400), at(-400)},
		{"between the imported", at(-2998), at(-401)},
	} {
		for _, typ := range []string{"", "alpha", "beta"} {
			want := inRange(feed, r, typ, 0)
			for _, limit := range []int{1, 2, 100} {
				what := fmt.Sprintf("range %s [%v, %v] of feed %q with Limit %d", r.name, r.from, r.to, typ, limit)
				got, _, err := readFeed(ctx, h.s, storage.FeedQuery{Limit: limit, AggregateType: typ, From: r.from, To: r.to})
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if msg := sameEvents(got, want); msg != "" {
					t.Errorf("%s, paged with After = Head, must return exactly the imported events recorded within it: %s", what, msg)
				}
			}
		}
	}

	// Through the Store: SaveImported keeps the batch's time.
	st, err := eventstore.New(h.s, nil)
	if err != nil {
		t.Fatalf("eventstore.New: %v", err)
	}
	res, err := st.SaveImported(ctx, []eventstore.ImportedBatch{
		{AggregateType: "gamma", AggregateID: "s1", Events: evs("gammaHappened", 1), RecordedAt: at(-7)},
		{AggregateType: "alpha", AggregateID: "s1", Events: evs("alphaHappened", 2), RecordedAt: at(-8)},
	})
	if err != nil {
		t.Fatalf("SaveImported: %v", err)
	}
	if res[0].Position >= res[1].Position {
		t.Errorf("SaveImported must give positions in the batches' order, got %d then %d", res[0].Position, res[1].Position)
	}
	got, _, err := readFeed(ctx, h.s, storage.FeedQuery{Limit: 100, From: at(-8), To: at(-7)})
	if err != nil {
		t.Fatalf("ReadFeed: %v", err)
	}
	if len(got) != 3 || got[0].AggregateType != "gamma" || !got[0].RecordedAt.Equal(at(-7)) || !got[2].RecordedAt.Equal(at(-8)) {
		t.Errorf("a feed read by date must return the 3 events of SaveImported with their times, gamma first, got %v", got)
	}
}
