package storagetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func importedCases() []testCase {
	return []testCase{
		{"AppendAllRepeatedAggregates", "AppendAll takes several requests for one aggregate, new or stored, decided in request order: each sees the writes of those before it (versions follow, positions and the type's FeedSequences rise with the request index, Load returns the batches in order); the same call again is all Duplicates with the first call's versions and positions and writes nothing; a later request expecting a version the earlier ones moved past, or reusing the id of an earlier one's event with other data, is a *BatchError naming it, wrapping ErrConflict, and nothing of the call is written; Store.SaveImported takes them too", testAppendAllRepeats},
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

func testAppendAllRepeats(t *testing.T, h *harness) {
	ctx := t.Context()
	if _, err := h.s.Append(ctx, request("order", "o1", evs("Placed", 1), storage.ExpectVersion(0))); err != nil {
		t.Fatalf("Append: %v", err)
	}
	head := mustFeedHead(t, h, "")
	// o1 is stored at version 1, o2 and c1 are new.
	plan := []struct {
		typ, id string
		n       int
		after   int64 // the version expected
	}{
		{"order", "o2", 2, 0}, {"order", "o1", 1, 1}, {"customer", "c1", 1, 0}, {"order", "o2", 1, 1},
		{"order", "o1", 2, 2}, {"order", "o2", 1, 2}, {"customer", "c1", 1, 1},
	}
	reqs := make([]storage.AppendRequest, len(plan))
	for i, p := range plan {
		reqs[i] = request(p.typ, p.id, evs(p.typ+"Happened", p.n), storage.ExpectVersion(p.after))
	}
	res, err := h.s.AppendAll(ctx, reqs)
	if err != nil {
		t.Fatalf("AppendAll of %d requests, three on o2, two on o1 and c1: %v", len(reqs), err)
	}
	last := head
	for i, p := range plan {
		if res[i].Duplicate || res[i].Version != p.after+1 {
			t.Errorf("request %d (%s/%s after version %d) must be written at version %d, got %+v", i, p.typ, p.id, p.after, p.after+1, res[i])
		}
		if res[i].Position <= last {
			t.Errorf("request %d must end at a position above the request before it (%d), got %d", i, last, res[i].Position)
		}
		last = res[i].Position
	}
	feed, _ := mustReadAll(t, h, storage.FeedQuery{After: head, Limit: 100})
	if msg := checkBatches(feed); msg != "" {
		t.Errorf("the feed after AppendAll: %s", msg)
	}
	k := 0
	for i, p := range plan {
		for j := 0; j < p.n; j++ {
			if k >= len(feed) {
				t.Fatalf("the feed holds %d events after the AppendAll, want %d", len(feed), 9)
			}
			e := feed[k]
			if e.AggregateType != p.typ || e.AggregateID != p.id || e.Version != p.after+1 || e.ID != reqs[i].Events[j].ID {
				t.Errorf("feed event %d must be event %d of request %d (%s/%s version %d), got %s/%s version %d id %s",
					k, j, i, p.typ, p.id, p.after+1, e.AggregateType, e.AggregateID, e.Version, e.ID)
			}
			k++
		}
	}
	if agg := mustLoad(t, h, "order", "o2"); agg.Version != 3 || len(agg.Events) != 4 || agg.Events[3].ID != reqs[5].Events[0].ID {
		t.Errorf("Load of order/o2 must return its 4 events of versions 1 to 3 in request order, got version %d, %v", agg.Version, agg.Events)
	}

	// The same call again: all Duplicates, nothing written.
	head = mustFeedHead(t, h, "")
	again, err := h.s.AppendAll(ctx, reqs)
	if err != nil {
		t.Fatalf("AppendAll again: %v", err)
	}
	for i := range reqs {
		if !again[i].Duplicate || again[i].Version != res[i].Version || again[i].Position != res[i].Position {
			t.Errorf("request %d again must be a Duplicate of version %d at position %d, got %+v", i, res[i].Version, res[i].Position, again[i])
		}
	}
	if got := mustFeedHead(t, h, ""); got != head {
		t.Errorf("AppendAll of duplicates moved FeedHead from %d to %d", head, got)
	}

	// Refused: nothing of the call is written.
	reused := request("order", "r2", evs("Placed", 1), storage.ExpectVersion(1))
	reused.Events[0].ID = strings.ToLower(newID())
	first := request("order", "r2", evs("Placed", 1), storage.ExpectVersion(0))
	first.Events[0].ID = reused.Events[0].ID
	first.Events[0].Data = []byte(`{"other":true}`)
	for name, c := range map[string]struct {
		reqs  []storage.AppendRequest
		index int
	}{
		"a stale version": {[]storage.AppendRequest{request("order", "r1", evs("Placed", 1), storage.ExpectVersion(0)),
			request("customer", "c9", evs("Joined", 1), storage.ExpectVersion(0)),
			request("order", "r1", evs("Placed", 1), storage.ExpectVersion(0))}, 2},
		"a version skipped": {[]storage.AppendRequest{request("order", "o1", evs("Paid", 1), storage.ExpectVersion(3)),
			request("order", "o1", evs("Paid", 1), storage.ExpectVersion(4)), request("order", "o1", evs("Paid", 1), storage.ExpectVersion(6))}, 2},
		"a reused id": {[]storage.AppendRequest{first, reused}, 1},
	} {
		_, err := h.s.AppendAll(ctx, c.reqs)
		var be *storage.BatchError
		if !errors.As(err, &be) || be.Index != c.index || !errors.Is(err, storage.ErrConflict) {
			t.Errorf("%s: AppendAll must fail with a *BatchError for request %d wrapping ErrConflict, got %v", name, c.index, err)
		}
		if got := mustFeedHead(t, h, ""); got != head {
			t.Errorf("%s: a refused AppendAll moved FeedHead from %d to %d", name, head, got)
		}
	}
	if agg := mustLoad(t, h, "order", "o1"); agg.Version != 3 {
		t.Errorf("order/o1 must stay at version 3 after the refused calls, got %d", agg.Version)
	}

	// Through the Store.
	st, err := eventstore.New(h.s, nil)
	if err != nil {
		t.Fatalf("eventstore.New: %v", err)
	}
	at := time.Now().Add(-time.Hour)
	saved, err := st.SaveImported(ctx, []eventstore.ImportedBatch{
		{AggregateType: "order", AggregateID: "s1", Events: evs("Placed", 1), ExpectedVersion: eventstore.ExpectVersion(0), RecordedAt: at},
		{AggregateType: "customer", AggregateID: "s1", Events: evs("Joined", 1), ExpectedVersion: eventstore.ExpectVersion(0), RecordedAt: at},
		{AggregateType: "order", AggregateID: "s1", Events: evs("Paid", 2), ExpectedVersion: eventstore.ExpectVersion(1), RecordedAt: at},
	})
	if err != nil || saved[2].Version != 2 || saved[2].Position <= saved[1].Position {
		t.Errorf("SaveImported of two batches of order/s1 must save them at versions 1 and 2 in order, got %+v, %v", saved, err)
	}
}
