package storagetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// ackedBatch is a save that a writer saw succeed.
type ackedBatch struct {
	typ, id string
	ids     []string
	res     storage.AppendResult
}

// followResult is what the follower of a feed saw.
type followResult struct {
	events []storage.Event
	reads  int
	err    error
}

// testFeedConcurrent runs writers that save to a few aggregates of two
// types while a follower pages through the feed (restricted to typ when it
// is not empty), then checks the follower's history against what the
// writers were told. With bulk, every other writer stores two batches at a
// time, one of each type, with AppendAll.
func testFeedConcurrent(t *testing.T, h *harness, typ string, bulk bool) {
	const writers, saves, limit = 8, 40, 7
	types := []string{"alpha", "beta"}
	ids := []string{"1", "2", "3"}

	done := make(chan struct{})
	followed := make(chan followResult, 1)
	go func() { followed <- follow(t, h, storage.FeedQuery{Limit: limit, AggregateType: typ}, done) }()

	acks := make(chan []ackedBatch, writers)
	errs := make(chan error, writers*saves)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			var mine []ackedBatch
			for i := range saves {
				k := w*saves + i
				at, id := types[k%len(types)], ids[(k/len(types)+w)%len(ids)]
				batch := evs(fmt.Sprintf("W%dS%d", w, i), 1+(w+i)%3)
				if bulk && w%2 == 1 {
					other := types[(k+1)%len(types)]
					reqs := []storage.AppendRequest{
						request(at, id, batch, storage.VersionCheck{}),
						request(other, id, evs(fmt.Sprintf("W%dS%dB", w, i), 1+i%2), storage.VersionCheck{}),
					}
					results, err := h.s.AppendAll(t.Context(), reqs)
					if err == nil && len(results) != len(reqs) {
						err = fmt.Errorf("AppendAll of %d batches returned %d results", len(reqs), len(results))
					}
					if err != nil {
						errs <- fmt.Errorf("writer %d AppendAll %d to %s/%s and %s/%s: %w", w, i, at, id, other, id, err)
						continue
					}
					for r, req := range reqs {
						b := ackedBatch{typ: req.AggregateType, id: id, res: results[r]}
						for _, e := range req.Events {
							b.ids = append(b.ids, e.ID)
						}
						mine = append(mine, b)
					}
					continue
				}
				res, err := h.store.Save(t.Context(), at, id, batch, nil)
				if err != nil {
					errs <- fmt.Errorf("writer %d save %d to %s/%s: %w", w, i, at, id, err)
					continue
				}
				b := ackedBatch{typ: at, id: id, res: storage.AppendResult(res)}
				for _, e := range batch {
					b.ids = append(b.ids, e.ID)
				}
				mine = append(mine, b)
			}
			acks <- mine
		})
	}
	wg.Wait()
	close(done)
	close(acks)
	close(errs)
	got := <-followed

	for err := range errs {
		t.Errorf("concurrent saves without an expected version must all succeed: %v", err)
	}
	if got.err != nil {
		t.Fatalf("the follower's read of the feed failed: %v", got.err)
	}

	type eventKey struct{ typ, id, eventID string }
	type ack struct {
		res  storage.AppendResult
		last bool
	}
	acked := make(map[eventKey]ack)
	batches := make(map[string]int64) // acknowledged batches per type
	for mine := range acks {
		for _, b := range mine {
			if typ != "" && b.typ != typ {
				continue
			}
			batches[b.typ]++
			for i, id := range b.ids {
				acked[eventKey{b.typ, b.id, id}] = ack{b.res, i == len(b.ids)-1}
			}
		}
	}

	seen := make(map[eventKey]int)
	perAgg := make(map[[2]string][]storage.Event)
	var last int64
	for i, e := range got.events {
		if e.Position <= last {
			t.Errorf("the follower must see strictly increasing positions: event %d at %d after %d", i, e.Position, last)
		}
		last = e.Position
		k := eventKey{e.AggregateType, e.AggregateID, e.ID}
		seen[k]++
		if seen[k] == 2 {
			t.Errorf("the feed must not repeat an event: %s/%s event %s at position %d was read twice", k.typ, k.id, k.eventID, e.Position)
		}
		a, ok := acked[k]
		if !ok {
			t.Errorf("the follower read an event no writer was told about: %s/%s event %s at position %d", k.typ, k.id, k.eventID, e.Position)
			continue
		}
		if e.Version != a.res.Version {
			t.Errorf("event %s at position %d has Version %d but its save returned version %d", k.eventID, e.Position, e.Version, a.res.Version)
		}
		if a.last && e.Position != a.res.Position {
			t.Errorf("the last event of a batch (%s) is at position %d but its save returned position %d", k.eventID, e.Position, a.res.Position)
		}
		ak := [2]string{e.AggregateType, e.AggregateID}
		perAgg[ak] = append(perAgg[ak], e)
	}
	missing := 0
	for k := range acked {
		if seen[k] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("the feed must not skip an event: acknowledged event %s of %s/%s was never read by the follower", k.eventID, k.typ, k.id)
			}
		}
	}
	if missing > 0 {
		t.Errorf("the follower missed %d of %d acknowledged events over %d reads", missing, len(acked), got.reads)
	}
	for k, events := range perAgg {
		if msg := contiguous(events); msg != "" {
			t.Errorf("the follower must see each aggregate's events with contiguous sequences and versions; %s/%s: %s", k[0], k[1], msg)
		}
	}
	if msg := checkBatches(got.events); msg != "" {
		t.Errorf("the follower must see the batches of each type numbered in feed order (one FeedSequence per batch, strictly increasing per type, gaps allowed): %s", msg)
	}
	// One FeedSequence per acknowledged batch: no two batches share one.
	seqs := make(map[string]map[int64]bool)
	for _, e := range got.events {
		if seqs[e.AggregateType] == nil {
			seqs[e.AggregateType] = make(map[int64]bool)
		}
		seqs[e.AggregateType][e.FeedSequence] = true
	}
	for at, n := range batches {
		if len(seqs[at]) != int(n) {
			t.Errorf("%d batches of type %s were acknowledged, so the follower must see %d distinct FeedSequences, but it saw %d", n, at, n, len(seqs[at]))
		}
	}
	if len(acked) == 0 {
		t.Fatalf("no event was acknowledged for the followed feed %q: the test checked nothing", typ)
	}
}

// follow pages through the feed from q.After with After = Head until done
// is closed, then drains it: it reads until a read returns nothing and does
// not move Head.
func follow(t *testing.T, h *harness, q storage.FeedQuery, done <-chan struct{}) followResult {
	var r followResult
	finishing := false
	for {
		if !finishing {
			select {
			case <-done:
				finishing = true
			default:
			}
		}
		page, err := h.s.ReadFeed(t.Context(), q)
		r.reads++
		if err != nil {
			r.err = err
			return r
		}
		if err := checkPage(q, page); err != nil {
			r.err = err
			return r
		}
		r.events = append(r.events, page.Events...)
		if finishing && len(page.Events) == 0 && page.Head == q.After {
			return r
		}
		if len(page.Events) == 0 {
			time.Sleep(50 * time.Microsecond) // nothing new: let the writers run
		}
		q.After = page.Head
	}
}
