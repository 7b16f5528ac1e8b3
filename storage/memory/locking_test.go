package memory_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/google/uuid"
)

func request(typ, id string, expect storage.VersionCheck, n int) storage.AppendRequest {
	req := storage.AppendRequest{AggregateType: typ, AggregateID: id, ExpectedVersion: expect}
	now := time.Now().UTC().Truncate(time.Microsecond)
	for range n {
		req.Events = append(req.Events, storage.Event{ID: uuid.NewString(), Type: "T", AggregateType: typ, AggregateID: id, Data: []byte(`{}`), RecordedAt: now})
	}
	return req
}

// TestConcurrentWriters races Append (optimistic and not, retried
// duplicates), AppendAll and deletions against a feed reader, which must
// see positions without gaps in commit order, and then checks every
// aggregate: versions 1..n, each saved batch stored once.
func TestConcurrentWriters(t *testing.T) {
	s := memory.New()
	defer s.Close()
	ctx := t.Context()
	const writers, saves = 8, 300
	var wg sync.WaitGroup
	var mu sync.Mutex
	batches := map[string]int{} // aggregate id -> batches saved
	saved := func(id string, n int) {
		mu.Lock()
		batches[id] += n
		mu.Unlock()
	}
	for w := range writers {
		wg.Go(func() {
			for i := range saves {
				id := fmt.Sprintf("a%d", (w+i)%5) // shared by writers
				if w%2 == 0 {
					id = fmt.Sprintf("own%d-%d", w, i%3)
				}
				req := request("acct", id, storage.VersionCheck{}, 1+i%3)
				if i%4 == 0 { // optimistic: read, then save at that version
					a, err := s.Load(ctx, storage.LoadQuery{AggregateType: "acct", AggregateID: id})
					var v int64
					if err == nil {
						v = a.Version
					} else if !errors.Is(err, storage.ErrNotFound) {
						t.Error(err)
						return
					}
					req.ExpectedVersion = storage.ExpectVersion(v)
				}
				res, err := s.Append(ctx, req)
				if errors.Is(err, storage.ErrConflict) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				saved(id, 1)
				again, err := s.Append(ctx, req) // a retry: a duplicate
				if err != nil || !again.Duplicate || again.Version != res.Version || again.Position != res.Position {
					t.Errorf("retried save: %+v, %v; first %+v", again, err, res)
					return
				}
			}
		})
	}
	wg.Go(func() { // all-or-nothing saves over shared aggregates
		for i := range saves {
			ids := []string{fmt.Sprintf("a%d", i%5), fmt.Sprintf("a%d", (i+2)%5), fmt.Sprintf("new%d", i)}
			var reqs []storage.AppendRequest
			for _, id := range ids {
				reqs = append(reqs, request("acct", id, storage.VersionCheck{}, 2))
			}
			if _, err := s.AppendAll(ctx, reqs); err != nil {
				t.Error(err)
				return
			}
			for _, id := range ids {
				saved(id, 1)
			}
		}
	})
	wg.Go(func() { // deletions of another type, racing its saves
		for i := range saves {
			id := fmt.Sprintf("d%d", i%3)
			if _, err := s.Append(ctx, request("gone", id, storage.VersionCheck{}, 1)); err != nil {
				t.Error(err)
				return
			}
			if err := s.DeleteAggregate(ctx, "gone", id); err != nil && !errors.Is(err, storage.ErrNotFound) {
				t.Error(err)
				return
			}
		}
	})
	done := make(chan struct{})
	var reader sync.WaitGroup
	reader.Go(func() { // the type feed of acct, which nothing deletes
		var after int64
		var last int64
		for {
			select {
			case <-done:
				return
			default:
			}
			page, err := s.ReadFeed(ctx, storage.FeedQuery{AggregateType: "acct", After: after, Limit: 100})
			if err != nil {
				t.Error(err)
				return
			}
			for _, e := range page.Events {
				if e.Position <= last {
					t.Errorf("position %d after %d", e.Position, last)
					return
				}
				last = e.Position
			}
			after = page.Head
		}
	})
	wg.Wait()
	close(done)
	reader.Wait()
	// The global feed, once writers are done, has no holes but deletions.
	page, err := s.ReadFeed(ctx, storage.FeedQuery{Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range page.Events {
		if seen[e.ID] {
			t.Fatalf("event %s twice in the feed", e.ID)
		}
		seen[e.ID] = true
	}
	for id, n := range batches {
		a, err := s.Load(ctx, storage.LoadQuery{AggregateType: "acct", AggregateID: id})
		if err != nil {
			t.Fatal(err)
		}
		if a.Version != int64(n) {
			t.Errorf("%s: version %d, %d batches saved", id, a.Version, n)
		}
		var v, pos int64
		for k, e := range a.Events {
			if e.Version != v && e.Version != v+1 || e.Sequence != int64(k+1) || e.Position <= pos {
				t.Fatalf("%s: event %d: version %d after %d, sequence %d, position %d after %d", id, k, e.Version, v, e.Sequence, e.Position, pos)
			}
			v, pos = e.Version, e.Position
		}
		if v != a.Version {
			t.Errorf("%s: last event at version %d, aggregate at %d", id, v, a.Version)
		}
	}
}
