package storagetest

import (
	"errors"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func bulkCases() []testCase {
	return []testCase{
		{"AppendAll", "AppendAll stores every batch as Append would, in request order (positions and FeedSequences rise with the index), and results[i] describes reqs[i]", testAppendAll},
		{"AppendAllIsAtomic", "when one batch of AppendAll fails its checks nothing at all is written, not even the FeedSequence or head of a type, and the error is a *BatchError naming that batch and wrapping ErrConflict", testAppendAllAtomic},
		{"AppendAllDuplicates", "in AppendAll a batch whose events are all stored is a Duplicate with its original result while the others are written; a retried AppendAll writes nothing", testAppendAllDuplicates},
		{"FeedCompleteUnderConcurrentAppendAll", "a reader following the feed while writers use Append and AppendAll concurrently sees every acknowledged event exactly once, in order, with FeedSequences 1..n per type", func(t *testing.T, h *harness) {
			testFeedConcurrent(t, h, "", true)
		}},
		{"FilteredFeedCompleteUnderConcurrentAppendAll", "a reader following one aggregate type's feed while writers use Append and AppendAll concurrently sees every acknowledged event of that type exactly once, in order, with FeedSequences 1..n", func(t *testing.T, h *harness) {
			testFeedConcurrent(t, h, "alpha", true)
		}},
	}
}

// mustAppendAll calls AppendAll and fails the test on error or on a wrong
// number of results.
func mustAppendAll(t testing.TB, h *harness, reqs []storage.AppendRequest) []storage.AppendResult {
	t.Helper()
	results, err := h.s.AppendAll(t.Context(), reqs)
	if err != nil {
		t.Fatalf("AppendAll of %d batches: %v", len(reqs), err)
	}
	if len(results) != len(reqs) {
		t.Fatalf("AppendAll of %d batches must return one result per batch, got %d", len(reqs), len(results))
	}
	return results
}

// batchEvents loads the events that the batch of req stored at version v.
func batchEvents(t testing.TB, h *harness, req storage.AppendRequest, v int64) []storage.Event {
	t.Helper()
	agg, err := h.s.Load(t.Context(), storage.LoadQuery{AggregateType: req.AggregateType, AggregateID: req.AggregateID, AfterVersion: v - 1, Limit: 1})
	if err != nil {
		t.Fatalf("Load %s/%s version %d: %v", req.AggregateType, req.AggregateID, v, err)
	}
	return agg.Events
}

func testAppendAll(t *testing.T, h *harness) {
	mustSave(t, h, "alpha", "1", evs("Opened", 2), nil)
	secret := evs("Sealed", 2)
	secret[1].EncryptedData = "c2VjcmV0"
	reqs := []storage.AppendRequest{
		request("alpha", "1", evs("Added", 3), storage.ExpectVersion(1)),
		request("beta", "1", evs("Opened", 1), storage.ExpectVersion(0)),
		request("alpha", "2", secret, storage.VersionCheck{}),
		request("gamma", "1", evs("Opened", 4), storage.VersionCheck{}),
	}
	want := []struct {
		version, feedSeq int64
	}{{2, 2}, {1, 1}, {1, 3}, {1, 1}}
	results := mustAppendAll(t, h, reqs)
	var last int64
	for i, req := range reqs {
		res := results[i]
		if res.Duplicate || res.Version != want[i].version {
			t.Errorf("results[%d] (%s/%s) must report version %d and no Duplicate, got %+v", i, req.AggregateType, req.AggregateID, want[i].version, res)
			continue
		}
		got := batchEvents(t, h, req, res.Version)
		if len(got) != len(req.Events) {
			t.Errorf("batch %d: %s/%s version %d must hold the batch's %d events, got %d", i, req.AggregateType, req.AggregateID, res.Version, len(req.Events), len(got))
			continue
		}
		for k, e := range got {
			w := req.Events[k]
			if e.ID != w.ID || e.Type != w.Type || string(e.Data) != string(w.Data) || e.EncryptedData != w.EncryptedData || !e.RecordedAt.Equal(w.RecordedAt) {
				t.Errorf("batch %d event %d must be stored as given: got %+v, want %+v", i, k, e, w)
			}
			if e.Position <= last {
				t.Errorf("batch %d event %d: batches are stored in request order with rising positions: position %d after %d", i, k, e.Position, last)
			}
			if k > 0 && e.Position != last+1 {
				t.Errorf("batch %d: the events of a batch have consecutive positions: event %d at %d after %d", i, k, e.Position, last)
			}
			last = e.Position
			if e.FeedSequence != want[i].feedSeq {
				t.Errorf("batch %d (%s) event %d: FeedSequence must be %d, got %d", i, req.AggregateType, k, want[i].feedSeq, e.FeedSequence)
			}
		}
		if res.Position != last {
			t.Errorf("results[%d].Position must be the batch's last position %d, got %d", i, last, res.Position)
		}
	}
	if got := mustFeedHead(t, h, ""); got != results[len(results)-1].Position {
		t.Errorf("FeedHead(\"\") after AppendAll must be the last batch's position %d, got %d", results[len(results)-1].Position, got)
	}
	if got := mustFeedHead(t, h, "alpha"); got != 3 {
		t.Errorf("FeedHead(\"alpha\") after a save and two alpha batches of AppendAll must be 3, got %d", got)
	}
	one := mustAppendAll(t, h, []storage.AppendRequest{request("beta", "1", evs("Closed", 1), storage.ExpectVersion(1))})
	if one[0].Version != 2 || one[0].Position <= last {
		t.Errorf("AppendAll of one batch is an Append: want version 2 at a position after %d, got %+v", last, one[0])
	}
}

func testAppendAllAtomic(t *testing.T, h *harness) {
	ctx := t.Context()
	stored := evs("Opened", 2)
	mustSave(t, h, "alpha", "1", stored, nil)
	mustSave(t, h, "beta", "1", evs("Opened", 1), nil)
	before, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 100})
	heads := map[string]int64{"": mustFeedHead(t, h, ""), "alpha": 1, "beta": 1}

	mixed := []eventstore.NewEvent{stored[1], ev("New", "")}
	for _, c := range []struct {
		name  string
		index int
		bad   storage.AppendRequest
	}{
		{"a stale expected version", 2, request("alpha", "1", evs("Late", 1), storage.ExpectVersion(5))},
		{"stored and new ids mixed", 0, request("alpha", "1", mixed, storage.VersionCheck{})},
		{"ExpectVersion(0) on an existing aggregate", 3, request("alpha", "1", evs("Again", 2), storage.ExpectVersion(0))},
		{"an expected version on a missing aggregate", 1, request("gamma", "9", evs("Ghost", 1), storage.ExpectVersion(1))},
	} {
		good := []storage.AppendRequest{
			request("alpha", "2", evs("Opened", 3), storage.VersionCheck{}),
			request("beta", "1", evs("Added", 1), storage.ExpectVersion(1)),
			request("gamma", "1", evs("Opened", 2), storage.ExpectVersion(0)),
			request("delta", "1", evs("Opened", 1), storage.VersionCheck{}),
		}
		reqs := append(good[:c.index:c.index], c.bad)
		reqs = append(reqs, good[c.index+1:]...)
		results, err := h.s.AppendAll(ctx, reqs)
		var be *storage.BatchError
		switch {
		case err == nil:
			t.Errorf("%s: AppendAll must fail when batch %d fails its checks, got results %+v", c.name, c.index, results)
		case !errors.As(err, &be):
			t.Errorf("%s: the error of AppendAll must be a *BatchError, got %T: %v", c.name, err, err)
		default:
			if be.Index != c.index || be.AggregateType != c.bad.AggregateType || be.AggregateID != c.bad.AggregateID {
				t.Errorf("%s: the *BatchError must name batch %d (%s/%s), got index %d (%s/%s)", c.name, c.index, c.bad.AggregateType, c.bad.AggregateID, be.Index, be.AggregateType, be.AggregateID)
			}
			if !errors.Is(err, storage.ErrConflict) {
				t.Errorf("%s: the *BatchError must wrap ErrConflict, got %v", c.name, err)
			}
		}
		after, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 100})
		if msg := sameEvents(after, before); msg != "" {
			t.Errorf("%s: a refused AppendAll must write nothing, but the feed changed: %s", c.name, msg)
		}
		for typ, want := range heads {
			if got := mustFeedHead(t, h, typ); got != want {
				t.Errorf("%s: a refused AppendAll must not move FeedHead(%q) from %d, got %d", c.name, typ, want, got)
			}
		}
		for _, typ := range []string{"gamma", "delta"} {
			if head, err := h.s.FeedHead(ctx, typ); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("%s: a refused AppendAll must not create type %s: FeedHead returned %d, %v", c.name, typ, head, err)
			}
		}
	}
	// The numbers the refused calls did not use are the next ones.
	results := mustAppendAll(t, h, []storage.AppendRequest{
		request("alpha", "2", evs("Opened", 1), storage.ExpectVersion(0)),
		request("beta", "1", evs("Added", 1), storage.ExpectVersion(1)),
	})
	for i, want := range []struct {
		req     storage.AppendRequest
		feedSeq int64
	}{{storage.AppendRequest{AggregateType: "alpha", AggregateID: "2"}, 2}, {storage.AppendRequest{AggregateType: "beta", AggregateID: "1"}, 2}} {
		for _, e := range batchEvents(t, h, want.req, results[i].Version) {
			if e.FeedSequence != want.feedSeq {
				t.Errorf("after refused AppendAll calls the next %s batch must get FeedSequence %d (no number is used up), got %d", want.req.AggregateType, want.feedSeq, e.FeedSequence)
			}
		}
	}
}

func testAppendAllDuplicates(t *testing.T, h *harness) {
	a := request("alpha", "1", evs("Opened", 2), storage.VersionCheck{})
	b := request("beta", "1", evs("Opened", 1), storage.VersionCheck{})
	first := mustAppendAll(t, h, []storage.AppendRequest{a, b})
	before, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 100})

	retry := mustAppendAll(t, h, []storage.AppendRequest{a, b})
	for i := range retry {
		if !retry[i].Duplicate || retry[i].Version != first[i].Version || retry[i].Position != first[i].Position {
			t.Errorf("a retried AppendAll must report results[%d] as a Duplicate with the original Version and Position %+v, got %+v", i, first[i], retry[i])
		}
	}
	after, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 100})
	if msg := sameEvents(after, before); msg != "" {
		t.Errorf("a retried AppendAll must write nothing: %s", msg)
	}

	stale := a
	stale.ExpectedVersion = storage.ExpectVersion(0) // a retry asks whether the earlier save landed
	c := request("gamma", "1", evs("Opened", 2), storage.VersionCheck{})
	d := request("beta", "1", evs("Added", 1), storage.ExpectVersion(1))
	mixed := mustAppendAll(t, h, []storage.AppendRequest{stale, c, d})
	if !mixed[0].Duplicate || mixed[0].Version != first[0].Version || mixed[0].Position != first[0].Position {
		t.Errorf("a batch of AppendAll whose events are all stored must be a Duplicate with the original result %+v, got %+v", first[0], mixed[0])
	}
	if mixed[1].Duplicate || mixed[1].Version != 1 || mixed[2].Duplicate || mixed[2].Version != 2 {
		t.Errorf("the other batches of an AppendAll with a Duplicate must be written: got %+v and %+v, want versions 1 and 2", mixed[1], mixed[2])
	}
	if mixed[1].Position >= mixed[2].Position || mixed[1].Position <= before[len(before)-1].Position {
		t.Errorf("the written batches must follow the feed in request order: positions %d and %d after %d", mixed[1].Position, mixed[2].Position, before[len(before)-1].Position)
	}
	after, _ = mustReadAll(t, h, storage.FeedQuery{Limit: 100})
	if n := len(after) - len(before); n != 3 {
		t.Errorf("AppendAll with one Duplicate and batches of 2 and 1 events must add 3 events to the feed, added %d", n)
	}
	for _, want := range []struct {
		typ     string
		feedSeq int64
	}{{"alpha", 1}, {"beta", 2}, {"gamma", 1}} {
		if got := mustFeedHead(t, h, want.typ); got != want.feedSeq {
			t.Errorf("a Duplicate batch takes no FeedSequence: FeedHead(%q) must be %d, got %d", want.typ, want.feedSeq, got)
		}
	}
	if msg := checkBatches(after); msg != "" {
		t.Error(msg)
	}
}
