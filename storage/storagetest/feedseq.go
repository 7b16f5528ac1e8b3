package storagetest

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func feedSequenceCases() []testCase {
	return []testCase{
		{"FeedSequenceNumbersBatches", "every event of a batch gets one FeedSequence, greater than every FeedSequence its aggregate type had before (numbers strictly increase per type and may have gaps: 1, 2, 3 is allowed, so is 3, 7, 12); the events of a batch have consecutive positions", testFeedSequence},
		{"ReadFeedAfterFeedSequence", "ReadFeed with AggregateType and AfterFeedSequence k returns that type's events whose FeedSequence is greater than k, in position order; reading on with After = Head continues without gap or repeat", testAfterFeedSequence},
		{"FeedHead", "FeedHead(\"\") is the highest position of the feed (0 when empty), FeedHead(type) the type's latest FeedSequence, which a save of another type does not move; a type without events is ErrNotFound", testFeedHeadValues},
		{"Feeds", "Feeds lists every aggregate type that has events, ordered by type, with its numbers of aggregates, batches and events", testFeeds},
		{"EncryptedDataRoundTrips", "EncryptedData is stored with each event and returned unchanged by Load and ReadFeed; \"\" stays \"\"", testEncryptedData},
	}
}

// savedBatch is one save of a plan and what the store said about it.
type savedBatch struct {
	typ, id string
	n       int
	res     eventstore.SaveResult
	// feedSeq is the FeedSequence the store gave the batch's first event,
	// as Load returns it.
	feedSeq int64
}

// batchPlan interleaves three types and batches of 1 to 4 events.
var batchPlan = []struct {
	typ, id string
	n       int
}{
	{"alpha", "1", 2}, {"beta", "1", 1}, {"alpha", "2", 3}, {"gamma", "1", 1},
	{"alpha", "1", 1}, {"beta", "2", 4}, {"alpha", "2", 1}, {"gamma", "1", 2},
	{"beta", "1", 3},
}

// saveBatchPlan saves batchPlan through the Store.
func saveBatchPlan(t *testing.T, h *harness) []savedBatch {
	t.Helper()
	var out []savedBatch
	for _, p := range batchPlan {
		res := mustSave(t, h, p.typ, p.id, evs(p.typ+"Happened", p.n), nil)
		out = append(out, savedBatch{typ: p.typ, id: p.id, n: p.n, res: res, feedSeq: loadBatch(t, h, p.typ, p.id, res.Version)[0].FeedSequence})
	}
	return out
}

// typeHeads returns the FeedSequence of each type's last batch of batches.
func typeHeads(batches []savedBatch) map[string]int64 {
	heads := make(map[string]int64)
	for _, b := range batches {
		heads[b.typ] = b.feedSeq
	}
	return heads
}

func testFeedSequence(t *testing.T, h *harness) {
	batches := saveBatchPlan(t, h)
	prev := make(map[string]savedBatch) // the type's batch before
	for i, b := range batches {
		if b.feedSeq < 1 {
			t.Errorf("save %d (%s/%s): FeedSequences start at 1 or more, got %d", i, b.typ, b.id, b.feedSeq)
		}
		if p, ok := prev[b.typ]; ok && b.feedSeq <= p.feedSeq {
			t.Errorf("save %d (%s/%s): a type's FeedSequences strictly increase from batch to batch: it got %d, after %d for the type's batch before (%s/%s)", i, b.typ, b.id, b.feedSeq, p.feedSeq, p.typ, p.id)
		}
		prev[b.typ] = b
		agg := mustLoad(t, h, b.typ, b.id)
		var got []storage.Event
		for _, e := range agg.Events {
			if e.Version == b.res.Version {
				got = append(got, e)
			}
		}
		if len(got) != b.n {
			t.Fatalf("save %d (%s/%s): Load returned %d events of version %d, want %d", i, b.typ, b.id, len(got), b.res.Version, b.n)
		}
		for k, e := range got {
			if e.FeedSequence != b.feedSeq {
				t.Errorf("save %d (%s/%s): the events of a batch share one FeedSequence: event %d has %d, event 0 has %d", i, b.typ, b.id, k, e.FeedSequence, b.feedSeq)
			}
			if want := b.res.Position - int64(b.n-1-k); e.Position != want {
				t.Errorf("save %d (%s/%s): the events of a batch have consecutive positions ending at the save's Position %d: event %d is at %d, want %d", i, b.typ, b.id, b.res.Position, k, e.Position, want)
			}
		}
	}
	// The feed carries the same numbers as Load.
	feed, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 4})
	if msg := checkBatches(feed); msg != "" {
		t.Error(msg)
	}
	for _, typ := range []string{"alpha", "beta", "gamma"} {
		typed, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 3, AggregateType: typ})
		if msg := sameEvents(typed, filterType(feed, typ)); msg != "" {
			t.Errorf("the %s feed must return that type's events with the same FeedSequences as the whole feed: %s", typ, msg)
		}
	}
}

func testAfterFeedSequence(t *testing.T, h *harness) {
	batches := saveBatchPlan(t, h)
	feed, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 100})
	for _, typ := range []string{"alpha", "beta", "gamma"} {
		all := filterType(feed, typ)
		// Every k from 0 to past the type's head: the batches' own
		// numbers, and those in the gaps between them, if any.
		head := typeHeads(batches)[typ]
		for k := int64(0); k <= head+1; k++ {
			var want []storage.Event
			for _, e := range all {
				if e.FeedSequence > k {
					want = append(want, e)
				}
			}
			q := storage.FeedQuery{Limit: 100, AggregateType: typ, AfterFeedSequence: k}
			page, err := h.s.ReadFeed(t.Context(), q)
			if err != nil {
				t.Fatalf("ReadFeed %+v: %v", q, err)
			}
			if err := checkPage(q, page); err != nil {
				t.Error(err)
			}
			if msg := sameEvents(page.Events, want); msg != "" {
				t.Errorf("ReadFeed of %s after FeedSequence %d must return exactly the later batches' events: %s", typ, k, msg)
			}
			// A small page, then on from its Head with After.
			q.Limit = 2
			page, err = h.s.ReadFeed(t.Context(), q)
			if err != nil {
				t.Fatalf("ReadFeed %+v: %v", q, err)
			}
			if err := checkPage(q, page); err != nil {
				t.Error(err)
			}
			rest, _ := mustReadAll(t, h, storage.FeedQuery{After: page.Head, Limit: 2, AggregateType: typ})
			if msg := sameEvents(append(page.Events, rest...), want); msg != "" {
				t.Errorf("ReadFeed of %s after FeedSequence %d with Limit 2, then on with After = Head, must read every later event exactly once: %s", typ, k, msg)
			}
		}
	}
}

func testFeedHeadValues(t *testing.T, h *harness) {
	ctx := t.Context()
	if head, err := h.s.FeedHead(ctx, ""); err != nil || head != 0 {
		t.Errorf("FeedHead(\"\") of an empty store must be 0 without error, got %d, %v", head, err)
	}
	if head, err := h.s.FeedHead(ctx, "alpha"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("FeedHead of a type without events must wrap ErrNotFound, got %d, %v", head, err)
	}
	batches := saveBatchPlan(t, h)
	want := typeHeads(batches)
	want[""] = batches[len(batches)-1].res.Position
	for typ, w := range want {
		if got := mustFeedHead(t, h, typ); got != w {
			t.Errorf("FeedHead(%q) must be %d, got %d", typ, w, got)
		}
	}
	for _, typ := range []string{"delta", "Alpha", "alph"} {
		if head, err := h.s.FeedHead(ctx, typ); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("FeedHead of type %q, which has no events, must wrap ErrNotFound, got %d, %v", typ, head, err)
		}
	}
	res := mustSave(t, h, "beta", "9", evs("Late", 2), nil)
	seq := loadBatch(t, h, "beta", "9", res.Version)[0].FeedSequence
	if seq <= want["beta"] {
		t.Errorf("one more beta save must get a FeedSequence above the type's head %d, got %d", want["beta"], seq)
	}
	if got := mustFeedHead(t, h, "beta"); got != seq {
		t.Errorf("after one more beta save FeedHead(\"beta\") must be its FeedSequence %d, got %d", seq, got)
	}
	if got := mustFeedHead(t, h, "alpha"); got != want["alpha"] {
		t.Errorf("a beta save must not move FeedHead(\"alpha\") from %d, got %d", want["alpha"], got)
	}
	if got := mustFeedHead(t, h, ""); got != res.Position {
		t.Errorf("FeedHead(\"\") must follow the last save's Position %d, got %d", res.Position, got)
	}
}

// feedInfos counts aggregates, batches and events per type in events.
func feedInfos(events []storage.Event) []storage.FeedInfo {
	type counts struct {
		aggs    map[string]bool
		batches map[int64]bool
		events  int64
	}
	per := make(map[string]*counts)
	for _, e := range events {
		c := per[e.AggregateType]
		if c == nil {
			c = &counts{aggs: make(map[string]bool), batches: make(map[int64]bool)}
			per[e.AggregateType] = c
		}
		c.aggs[e.AggregateID] = true
		c.batches[e.FeedSequence] = true
		c.events++
	}
	out := make([]storage.FeedInfo, 0, len(per))
	for typ, c := range per {
		out = append(out, storage.FeedInfo{AggregateType: typ, AggregateCount: int64(len(c.aggs)), BatchCount: int64(len(c.batches)), EventCount: c.events})
	}
	slices.SortFunc(out, func(a, b storage.FeedInfo) int { return strings.Compare(a.AggregateType, b.AggregateType) })
	return out
}

func testFeeds(t *testing.T, h *harness) {
	feeds, err := h.s.Feeds(t.Context())
	if err != nil || len(feeds) != 0 {
		t.Errorf("Feeds of an empty store must be empty without error, got %+v, %v", feeds, err)
	}
	saveBatchPlan(t, h)
	mustSave(t, h, "Zulu", "z", evs("Upper", 1), nil) // upper case sorts before lower case
	want := []storage.FeedInfo{
		{AggregateType: "Zulu", AggregateCount: 1, BatchCount: 1, EventCount: 1},
		{AggregateType: "alpha", AggregateCount: 2, BatchCount: 4, EventCount: 7},
		{AggregateType: "beta", AggregateCount: 2, BatchCount: 3, EventCount: 8},
		{AggregateType: "gamma", AggregateCount: 1, BatchCount: 2, EventCount: 3},
	}
	feeds, err = h.s.Feeds(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(feeds, want) {
		t.Errorf("Feeds must list each type with events, ordered by type, with its counts:\n got %+v\nwant %+v", feeds, want)
	}
}

func testEncryptedData(t *testing.T, h *harness) {
	long := strings.Repeat("0123456789abcdef", storage.MaxEncryptedData/16) + strings.Repeat("z", storage.MaxEncryptedData%16)
	texts := []string{"", "AQIDBAUGBwgJ", "ünïcödé ✓ 🔐", long, "with\nnewline and \"quotes\""}
	var saved []eventstore.NewEvent
	for i, text := range texts {
		e := ev("Secret", "")
		if i%2 == 1 {
			e.Data = []byte(`{"public":true}`)
		}
		e.EncryptedData = text
		saved = append(saved, e)
	}
	mustSave(t, h, "vault", "v1", saved[:3], nil)
	mustSave(t, h, "other", "x", evs("Plain", 1), nil)
	mustSave(t, h, "vault", "v1", saved[3:], nil)
	mustSave(t, h, "vault", "v2", saved[3:4], nil) // another aggregate, same ids

	agg := mustLoad(t, h, "vault", "v1")
	if len(agg.Events) != len(texts) {
		t.Fatalf("Load must return all %d events, got %d", len(texts), len(agg.Events))
	}
	for i, e := range agg.Events {
		if e.EncryptedData != texts[i] {
			t.Errorf("event %d: Load must return EncryptedData unchanged: got %q, want %q", i, clipText(e.EncryptedData), clipText(texts[i]))
		}
	}
	if e := mustLoad(t, h, "vault", "v2").Events[0]; e.EncryptedData != long {
		t.Errorf("EncryptedData of exactly MaxEncryptedData bytes must round-trip: got %d bytes", len(e.EncryptedData))
	}
	feed, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 2})
	typed, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 2, AggregateType: "vault"})
	bySeq, _ := mustReadAll(t, h, storage.FeedQuery{Limit: 2, AggregateType: "vault", AfterFeedSequence: agg.Events[0].FeedSequence})
	for name, events := range map[string][]storage.Event{
		"the whole feed":                       filterType(feed, "vault"),
		"the vault feed":                       typed,
		"the vault feed after its first batch": append(slices.Clone(agg.Events[:3]), bySeq...),
	} {
		if msg := sameEvents(events, append(agg.Events, mustLoad(t, h, "vault", "v2").Events...)); msg != "" {
			t.Errorf("%s must carry each event's EncryptedData as Load does: %s", name, msg)
		}
	}
	for _, e := range filterType(feed, "other") {
		if e.EncryptedData != "" {
			t.Errorf("an event saved without EncryptedData must have \"\", got %q", e.EncryptedData)
		}
	}
}
