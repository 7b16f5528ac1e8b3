package storagetest

import (
	"errors"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func bulkCases() []testCase {
	return []testCase{
		{"AppendAll", "AppendAll stores every batch as Append would, in request order (positions rise with the index, and so do the FeedSequences of one type, each above the type's earlier ones), and results[i] describes reqs[i]", testAppendAll},
		{"AppendAllIsAtomic", "when one batch of AppendAll fails its checks nothing at all is written and no FeedHead moves, the error is a *BatchError naming that batch and wrapping ErrConflict, and the next batch of a type gets a FeedSequence above every earlier one (a refused call may leave numbers unused, never reuse one)", testAppendAllAtomic},
		{"AppendAllDuplicates", "in AppendAll a batch whose events are all stored is a Duplicate with its original result while the others are written; a retried AppendAll writes nothing", testAppendAllDuplicates},
		{"FeedCompleteUnderConcurrentAppendAll", "a reader following the feed while writers use Append and AppendAll concurrently sees every acknowledged event exactly once, in order, each batch with one FeedSequence, strictly increasing per type", func(t *testing.T, h *harness) {
			testFeedConcurrent(t, h, "", true)
		}},
		{"FilteredFeedCompleteUnderConcurrentAppendAll", "a reader following one aggregate type's feed while writers use Append and AppendAll concurrently sees every acknowledged event of that type exactly once, in order, each batch with one FeedSequence, strictly increasing", func(t *testing.T, h *harness) {
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
	return loadBatch(t, h, req.AggregateType, req.AggregateID, v)
}

func testAppendAll(t *testing.T, h *harness) {
	mustSave(t, h, "alpha", "1", evs("Opened", 2), nil)
	// The FeedSequence of each type's batch before, so far that of the save.
	seqs := map[string]int64{"alpha": mustFeedHead(t, h, "alpha")}
	secret := evs("Sealed", 2)
	secret[1].EncryptedData = "c2VjcmV0"
	reqs := []storage.AppendRequest{
		request("alpha", "1", evs("Added", 3), storage.ExpectVersion(1)),
		request("beta", "1", evs("Opened", 1), storage.ExpectVersion(0)),
		request("alpha", "2", secret, storage.VersionCheck{}),
		request("gamma", "1", evs("Opened", 4), storage.VersionCheck{}),
	}
	versions := []int64{2, 1, 1, 1}
	results := mustAppendAll(t, h, reqs)
	var last int64
	for i, req := range reqs {
		res := results[i]
		if res.Duplicate || res.Version != versions[i] {
			t.Errorf("results[%d] (%s/%s) must report version %d and no Duplicate, got %+v", i, req.AggregateType, req.AggregateID, versions[i], res)
			continue
		}
		got := batchEvents(t, h, req, res.Version)
		if len(got) != len(req.Events) {
			t.Errorf("batch %d: %s/%s version %d must hold the batch's %d events, got %d", i, req.AggregateType, req.AggregateID, res.Version, len(req.Events), len(got))
			continue
		}
		seq := got[0].FeedSequence
		if before, ok := seqs[req.AggregateType]; seq < 1 || ok && seq <= before {
			t.Errorf("batch %d (%s): a batch's FeedSequence is above every earlier one of its type (and at least 1): got %d after %d", i, req.AggregateType, seq, before)
		}
		seqs[req.AggregateType] = seq
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
			if e.FeedSequence != seq {
				t.Errorf("batch %d (%s) event %d: the events of a batch share one FeedSequence: got %d, event 0 has %d", i, req.AggregateType, k, e.FeedSequence, seq)
			}
		}
		if res.Position != last {
			t.Errorf("results[%d].Position must be the batch's last position %d, got %d", i, last, res.Position)
		}
	}
	if got := mustFeedHead(t, h, ""); got != results[len(results)-1].Position {
		t.Errorf("FeedHead(\"\") after AppendAll must be the last batch's position %d, got %d", results[len(results)-1].Position, got)
	}
	for typ, seq := range seqs {
		if got := mustFeedHead(t, h, typ); got != seq {
			t.Errorf("FeedHead(%q) after AppendAll must be the FeedSequence of the type's last batch %d, got %d", typ, seq, got)
		}
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
	heads := map[string]int64{"": mustFeedHead(t, h, ""), "alpha": mustFeedHead(t, h, "alpha"), "beta": mustFeedHead(t, h, "beta")}
	seqs := map[string]int64{"alpha": loadBatch(t, h, "alpha", "1", 1)[0].FeedSequence, "beta": loadBatch(t, h, "beta", "1", 1)[0].FeedSequence}
	for typ, seq := range seqs {
		if heads[typ] != seq {
			t.Fatalf("FeedHead(%q) must be the FeedSequence of the type's only batch %d, got %d", typ, seq, heads[typ])
		}
	}

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
	// The refused calls may have left numbers unused, but the next batches
	// get numbers above every earlier one, and move the heads to them.
	last := heads[""]
	reqs := []storage.AppendRequest{
		request("alpha", "2", evs("Opened", 1), storage.ExpectVersion(0)),
		request("beta", "1", evs("Added", 1), storage.ExpectVersion(1)),
	}
	results := mustAppendAll(t, h, reqs)
	for i, req := range reqs {
		if results[i].Position <= last {
			t.Errorf("after refused AppendAll calls the next %s batch must get a position above every earlier one: %d after %d", req.AggregateType, results[i].Position, last)
		}
		last = results[i].Position
		got := batchEvents(t, h, req, results[i].Version)
		if seq := got[0].FeedSequence; seq <= seqs[req.AggregateType] {
			t.Errorf("after refused AppendAll calls the next %s batch must get a FeedSequence above the type's earlier %d, got %d", req.AggregateType, seqs[req.AggregateType], seq)
		} else if head := mustFeedHead(t, h, req.AggregateType); head != seq {
			t.Errorf("after refused AppendAll calls and one more %s batch, FeedHead(%q) must be its FeedSequence %d, got %d", req.AggregateType, req.AggregateType, seq, head)
		}
	}
	if head := mustFeedHead(t, h, ""); head != last {
		t.Errorf("after refused AppendAll calls and one more AppendAll, FeedHead(\"\") must be its last position %d, got %d", last, head)
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
		what    string
	}{
		{"alpha", loadBatch(t, h, "alpha", "1", 1)[0].FeedSequence, "that of its first AppendAll, as its batch was a Duplicate"},
		{"beta", loadBatch(t, h, "beta", "1", 2)[0].FeedSequence, "that of its new batch"},
		{"gamma", loadBatch(t, h, "gamma", "1", 1)[0].FeedSequence, "that of its new batch"},
	} {
		if got := mustFeedHead(t, h, want.typ); got != want.feedSeq {
			t.Errorf("a Duplicate batch takes no FeedSequence: FeedHead(%q) must be %s, %d, got %d", want.typ, want.what, want.feedSeq, got)
		}
	}
	if seq := loadBatch(t, h, "alpha", "1", 1)[0].FeedSequence; seq != before[0].FeedSequence {
		t.Errorf("a Duplicate batch keeps its FeedSequence %d, got %d", before[0].FeedSequence, seq)
	}
	if msg := checkBatches(after); msg != "" {
		t.Error(msg)
	}
}
