package storagetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func deleteCases() []testCase {
	return []testCase{
		{"DeleteAggregate", "DeleteAggregate removes the aggregate's events from Load and ReadFeed and leaves every other aggregate as it was; the id starts again at version 1; an aggregate without events is ErrNotFound", testDeleteAggregate},
		{"DeleteNeverReusesNumbers", "after the latest batch is deleted FeedHead does not go down, and the next append gets a Position and a FeedSequence above every one given before, never a deleted one", testDeleteLatest},
		{"DeleteAggregateType", "DeleteAggregateType removes every aggregate of the type and nothing else, Feeds drops the type, a type without events is ErrNotFound, and later appends of the type get FeedSequences above every one the type had", testDeleteType},
	}
}

// without returns events minus those of aggregate (typ, id); id "" drops
// the whole type.
func without(events []storage.Event, typ, id string) []storage.Event {
	return slices.DeleteFunc(slices.Clone(events), func(e storage.Event) bool {
		return e.AggregateType == typ && (id == "" || e.AggregateID == id)
	})
}

// checkFeedIs reads the whole feed, and the feed of each type in want,
// and compares them with want.
func checkFeedIs(t *testing.T, h *harness, want []storage.Event, rule string) {
	t.Helper()
	feed, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 3})
	if msg := sameEvents(feed, want); msg != "" {
		t.Errorf("%s: the feed: %s", rule, msg)
	}
	for _, typ := range []string{"alpha", "beta", "gamma"} {
		typed, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 3, AggregateType: typ})
		if msg := sameEvents(typed, filterType(want, typ)); msg != "" {
			t.Errorf("%s: the %s feed: %s", rule, typ, msg)
		}
	}
}

func testDeleteAggregate(t *testing.T, h *harness) {
	ctx := t.Context()
	saveBatchPlan(t, h)
	before, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 100})
	headAlpha := mustFeedHead(t, h, "alpha")
	loaded := make(map[[2]string]storage.Aggregate)
	for _, k := range [][2]string{{"alpha", "2"}, {"beta", "1"}, {"beta", "2"}, {"gamma", "1"}} {
		loaded[k] = mustLoad(t, h, k[0], k[1])
	}

	if err := h.s.DeleteAggregate(ctx, "alpha", "1"); err != nil {
		t.Fatalf("DeleteAggregate alpha/1: %v", err)
	}
	for _, q := range []storage.LoadQuery{{AggregateType: "alpha", AggregateID: "1"}, {AggregateType: "alpha", AggregateID: "1", AfterVersion: 1, Limit: 1}} {
		if agg, err := h.s.Load(ctx, q); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Load %+v of a deleted aggregate must wrap ErrNotFound, got %v (%d events)", q, err, len(agg.Events))
		}
	}
	checkFeedIs(t, h, without(before, "alpha", "1"), "a deleted aggregate's events must leave the feed, and only they")
	for k, agg := range loaded {
		if msg := sameEvents(mustLoad(t, h, k[0], k[1]).Events, agg.Events); msg != "" {
			t.Errorf("deleting alpha/1 must leave %s/%s as it was: %s", k[0], k[1], msg)
		}
	}
	for _, k := range [][2]string{{"alpha", "1"}, {"alpha", "3"}, {"delta", "1"}, {"alph", "1"}, {"alpha", ""}} {
		if err := h.s.DeleteAggregate(ctx, k[0], k[1]); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("DeleteAggregate of %s/%s, which has no events, must wrap ErrNotFound, got %v", k[0], k[1], err)
		}
	}
	checkFeedIs(t, h, without(before, "alpha", "1"), "a refused DeleteAggregate must delete nothing")

	// The id is free again, from version 1.
	res, err := h.store.Save(ctx, "alpha", "1", evs("Reborn", 2), &eventstore.SaveOptions{ExpectedVersion: storage.ExpectVersion(0)})
	if err != nil {
		t.Fatalf("a deleted aggregate's id must be usable again with ExpectVersion(0): %v", err)
	}
	if res.Version != 1 || res.Duplicate {
		t.Errorf("the first save to a deleted aggregate's id must produce version 1, got %+v", res)
	}
	agg := mustLoad(t, h, "alpha", "1")
	if msg := contiguous(agg.Events); msg != "" || len(agg.Events) != 2 || agg.Version != 1 {
		t.Errorf("a re-created aggregate holds only its new events, from sequence 1 and version 1: %d events at version %d; %s", len(agg.Events), agg.Version, msg)
	}
	last := before[len(before)-1].Position
	for _, e := range agg.Events {
		if e.Position <= last {
			t.Errorf("positions are never reused: a new event got position %d, at or below the deleted ones' highest %d", e.Position, last)
		}
		if e.FeedSequence <= headAlpha || e.FeedSequence != agg.Events[0].FeedSequence {
			t.Errorf("the next alpha batch after a deletion must get one FeedSequence above the type's head %d before it, got %d (event 0: %d)", headAlpha, e.FeedSequence, agg.Events[0].FeedSequence)
		}
	}
}

func testDeleteLatest(t *testing.T, h *harness) {
	ctx := t.Context()
	mustSave(t, h, "alpha", "1", evs("Placed", 2), nil)
	mustSave(t, h, "beta", "1", evs("Placed", 1), nil)
	mustSave(t, h, "alpha", "2", evs("Placed", 2), nil)
	latest := mustSave(t, h, "alpha", "2", evs("Placed", 3), nil) // the latest batch of the store and of alpha
	before, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 100})
	head, headAlpha, headBeta := mustFeedHead(t, h, ""), mustFeedHead(t, h, "alpha"), mustFeedHead(t, h, "beta")
	wantAlpha, wantBeta := loadBatch(t, h, "alpha", "2", 2)[0].FeedSequence, loadBatch(t, h, "beta", "1", 1)[0].FeedSequence
	if head != latest.Position || headAlpha != wantAlpha || headBeta != wantBeta {
		t.Fatalf("FeedHead before the deletion: got %d, %d, %d, want %d, %d, %d", head, headAlpha, headBeta, latest.Position, wantAlpha, wantBeta)
	}

	if err := h.s.DeleteAggregate(ctx, "alpha", "2"); err != nil {
		t.Fatalf("DeleteAggregate alpha/2: %v", err)
	}
	checkFeedIs(t, h, without(before, "alpha", "2"), "a deleted aggregate's events must leave the feed")
	if got := mustFeedHead(t, h, ""); got < head {
		t.Errorf("FeedHead(\"\") must never go down: it was %d before the latest batch was deleted, %d after", head, got)
	}
	if got := mustFeedHead(t, h, "alpha"); got < headAlpha {
		t.Errorf("FeedHead(\"alpha\") must never go down: it was %d before the type's latest batch was deleted, %d after", headAlpha, got)
	}
	if got := mustFeedHead(t, h, "beta"); got != headBeta {
		t.Errorf("deleting an alpha aggregate must not change FeedHead(\"beta\") = %d, got %d", headBeta, got)
	}
	// A reader that had read everything sees nothing and stays put.
	q := storage.FeedQuery{After: head, Limit: 10}
	page, err := h.s.ReadFeed(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPage(q, page); err != nil {
		t.Error(err)
	}
	if len(page.Events) != 0 {
		t.Errorf("a reader at Head %d must see nothing new after a deletion, got %d events", head, len(page.Events))
	}

	// The highest FeedSequence each type was ever given.
	given := map[string]int64{"alpha": headAlpha, "beta": headBeta}
	for i, s := range []struct {
		typ, id string
		n       int
	}{
		{"alpha", "3", 2}, // a new aggregate
		{"alpha", "2", 1}, // the deleted id again
		{"beta", "1", 2},
	} {
		res := mustSave(t, h, s.typ, s.id, evs("After", s.n), nil)
		if res.Position-int64(s.n) < head {
			t.Errorf("save %d after the deletion: positions are never reused, but the batch ends at %d with %d events, and position %d was taken", i, res.Position, s.n, head)
		}
		head = res.Position
		agg := mustLoad(t, h, s.typ, s.id)
		batch := agg.Events[len(agg.Events)-s.n:]
		seq := batch[0].FeedSequence
		for _, e := range batch {
			if e.FeedSequence != seq || seq <= given[s.typ] {
				t.Errorf("save %d after the deletion (%s/%s): the batch must get one FeedSequence above every one its type was given, %d (deleted numbers are not reused), got %d", i, s.typ, s.id, given[s.typ], e.FeedSequence)
			}
		}
		given[s.typ] = seq
		if got := mustFeedHead(t, h, s.typ); got != seq {
			t.Errorf("save %d after the deletion: FeedHead(%q) must be the new batch's FeedSequence %d, got %d", i, s.typ, seq, got)
		}
	}
}

func testDeleteType(t *testing.T, h *harness) {
	ctx := t.Context()
	headAlpha := typeHeads(saveBatchPlan(t, h))["alpha"]
	before, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 100})
	for _, typ := range []string{"alph", "alpha%", "delta", "Alpha", ""} {
		if err := h.s.DeleteAggregateType(ctx, typ); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("DeleteAggregateType(%q), a type without events, must wrap ErrNotFound, got %v", typ, err)
		}
	}
	checkFeedIs(t, h, before, "a refused DeleteAggregateType must delete nothing")
	loaded := make(map[[2]string]storage.Aggregate)
	for _, k := range [][2]string{{"beta", "1"}, {"beta", "2"}, {"gamma", "1"}} {
		loaded[k] = mustLoad(t, h, k[0], k[1])
	}

	if err := h.s.DeleteAggregateType(ctx, "alpha"); err != nil {
		t.Fatalf("DeleteAggregateType alpha: %v", err)
	}
	checkFeedIs(t, h, without(before, "alpha", ""), "a deleted type's events must leave the feed, and only they")
	for _, id := range []string{"1", "2"} {
		if _, err := h.s.Load(ctx, storage.LoadQuery{AggregateType: "alpha", AggregateID: id}); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Load of alpha/%s after DeleteAggregateType must wrap ErrNotFound, got %v", id, err)
		}
		if err := h.s.DeleteAggregate(ctx, "alpha", id); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("DeleteAggregate of alpha/%s after DeleteAggregateType must wrap ErrNotFound, got %v", id, err)
		}
	}
	for k, agg := range loaded {
		if msg := sameEvents(mustLoad(t, h, k[0], k[1]).Events, agg.Events); msg != "" {
			t.Errorf("deleting type alpha must leave %s/%s as it was: %s", k[0], k[1], msg)
		}
	}
	feeds, err := h.s.Feeds(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(feeds, func(f storage.FeedInfo) bool { return f.AggregateType == "alpha" }); i >= 0 {
		t.Errorf("Feeds must list only types that have events; after DeleteAggregateType it still lists %+v", feeds[i])
	}
	if err := h.s.DeleteAggregateType(ctx, "alpha"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("a second DeleteAggregateType of the same type must wrap ErrNotFound, got %v", err)
	}

	res := mustSave(t, h, "alpha", "1", evs("Again", 2), nil)
	if res.Version != 1 {
		t.Errorf("after DeleteAggregateType an id of the type starts again at version 1, got %d", res.Version)
	}
	if res.Position-1 <= before[len(before)-1].Position {
		t.Errorf("positions are never reused: a new batch ends at %d, the deleted events went up to %d", res.Position, before[len(before)-1].Position)
	}
	for _, e := range mustLoad(t, h, "alpha", "1").Events {
		if e.FeedSequence <= headAlpha {
			t.Errorf("alpha's last FeedSequence before DeleteAggregateType was %d: the next alpha batch must get a greater one, got %d", headAlpha, e.FeedSequence)
		}
	}
	if got := mustFeedHead(t, h, "alpha"); got <= headAlpha {
		t.Errorf("alpha's last FeedSequence before DeleteAggregateType was %d: FeedHead(\"alpha\") after its next batch must be greater, got %d", headAlpha, got)
	}
}
