package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/fakestorage"
	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// backends are the storages the feed tests run on.
var backends = []struct {
	name string
	new  func() storage.Storage
}{
	{"memory", func() storage.Storage { return memory.New() }},
}

func forBackends(t *testing.T, fn func(t *testing.T, st *eventstore.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			st, err := eventstore.New(b.new(), nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			fn(t, st)
		})
	}
}

func evs(n int) []eventstore.NewEvent {
	out := make([]eventstore.NewEvent, n)
	for i := range out {
		out[i] = ev(fmt.Sprint("E", i), fmt.Sprintf(`{"i":%d}`, i))
	}
	return out
}

type saved struct {
	typ, id string
	n       int
}

// saveAll saves the plan, one batch each, and returns the results.
func saveAll(t *testing.T, st *eventstore.Store, plan []saved) []eventstore.SaveResult {
	t.Helper()
	var out []eventstore.SaveResult
	for _, p := range plan {
		res, err := st.Save(t.Context(), p.typ, p.id, evs(p.n), nil)
		require.NoError(t, err)
		out = append(out, res)
	}
	return out
}

var mixed = []saved{
	{"order", "o-1", 2}, {"user", "u-1", 1}, {"order", "o-2", 5}, {"order", "o-1", 1},
	{"user", "u-2", 4}, {"invoice", "i-1", 3}, {"order", "o-3", 7}, {"user", "u-1", 2},
}

func TestReadFeedEntriesAreBatches(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		ctx := t.Context()
		_, err := st.ReadFeed(ctx, "order", 0, nil)
		assert.ErrorIs(t, err, eventstore.ErrNotFound, "a feed without events")
		res, err := st.ReadFeed(ctx, "", 0, nil)
		require.NoError(t, err)
		assert.Empty(t, res.Entries)
		assert.Zero(t, res.Head)

		results := saveAll(t, st, mixed)
		res, err = st.ReadFeed(ctx, "", 0, nil)
		require.NoError(t, err)
		require.Len(t, res.Entries, len(mixed))
		assert.False(t, res.HasMore)
		assert.Equal(t, results[len(results)-1].Position, res.Head)
		for i, e := range res.Entries {
			p := mixed[i]
			assert.Equal(t, p.typ, e.AggregateType)
			assert.Equal(t, p.id, e.AggregateID)
			assert.Len(t, e.Events, p.n)
			assert.Equal(t, results[i].Position, e.Cursor, "the cursor of _all is the batch's last position")
			assert.Equal(t, results[i].Version, e.Version)
		}

		// One type: cursors 1, 2, 3, ...
		res, err = st.ReadFeed(ctx, "order", 0, nil)
		require.NoError(t, err)
		require.Len(t, res.Entries, 4)
		for i, e := range res.Entries {
			assert.Equal(t, int64(i+1), e.Cursor)
			assert.Equal(t, "order", e.AggregateType)
		}
		assert.Equal(t, int64(4), res.Head)
		assert.Equal(t, []int{2, 5, 1, 7}, []int{len(res.Entries[0].Events), len(res.Entries[1].Events), len(res.Entries[2].Events), len(res.Entries[3].Events)})
		head, err := st.FeedHead(ctx, "order")
		require.NoError(t, err)
		assert.Equal(t, int64(4), head)
		_, err = st.FeedHead(ctx, "nope")
		assert.ErrorIs(t, err, eventstore.ErrNotFound)

		// Paging, one entry at a time, in both feeds.
		for _, typ := range []string{"", "order", "user"} {
			var got []string
			after := int64(0)
			for {
				res, err := st.ReadFeed(ctx, typ, after, &eventstore.FeedOptions{Limit: 1})
				require.NoError(t, err)
				for _, e := range res.Entries {
					got = append(got, fmt.Sprint(e.AggregateID, "/", e.Version, "/", len(e.Events)))
					after = e.Cursor
				}
				if !res.HasMore {
					break
				}
				require.Len(t, res.Entries, 1)
			}
			var want []string
			versions := map[string]int{}
			for _, p := range mixed {
				versions[p.id]++
				if typ == "" || p.typ == typ {
					want = append(want, fmt.Sprint(p.id, "/", versions[p.id], "/", p.n))
				}
			}
			assert.Equal(t, want, got, "paging feed %q", typ)
		}
	})
}

func TestReadFeedCursorInsideABatch(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		results := saveAll(t, st, []saved{{"a", "1", 1}, {"a", "2", 4}, {"a", "3", 1}})
		// results[1] covers positions 2..5.
		for after := results[0].Position; after < results[1].Position; after++ {
			res, err := st.ReadFeed(t.Context(), "", after, nil)
			require.NoError(t, err)
			require.Len(t, res.Entries, 2, "after %d", after)
			assert.Len(t, res.Entries[0].Events, 4, "the batch holding the cursor comes whole")
		}
		res, err := st.ReadFeed(t.Context(), "", results[1].Position, nil)
		require.NoError(t, err)
		require.Len(t, res.Entries, 1)
		assert.Equal(t, "3", res.Entries[0].AggregateID)
	})
}

// TestReadFeedLargeBatches: storage pages (of events) end inside batches
// larger than a page; entries still come whole, once.
func TestReadFeedLargeBatches(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		plan := []saved{{"big", "1", 150}, {"small", "1", 1}, {"big", "2", 300}, {"big", "1", 70}, {"small", "2", 2}, {"big", "3", 1}}
		saveAll(t, st, plan)
		for _, typ := range []string{"", "big"} {
			for _, opts := range []*eventstore.FeedOptions{{Limit: 1}, {Limit: 2}, {Limit: 1, Types: []string{"big", "small"}}} {
				if typ != "" && opts.Types != nil {
					continue
				}
				var sizes []int
				after := int64(0)
				for range 20 {
					res, err := st.ReadFeed(t.Context(), typ, after, opts)
					require.NoError(t, err)
					for _, e := range res.Entries {
						sizes = append(sizes, len(e.Events))
						for k, ev := range e.Events {
							assert.Equal(t, int64(k), ev.Position-e.Events[0].Position)
						}
					}
					after = res.Next
					if !res.HasMore {
						break
					}
				}
				want := []int{150, 1, 300, 70, 2, 1}
				if typ == "big" {
					want = []int{150, 300, 70, 1}
				}
				assert.Equal(t, want, sizes, "feed %q %+v", typ, opts)
			}
		}
	})
}

func TestReadFeedFilterAndPartitions(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		ctx := t.Context()
		saveAll(t, st, mixed)
		res, err := st.ReadFeed(ctx, "", 0, &eventstore.FeedOptions{Types: []string{"user", "invoice", "user"}})
		require.NoError(t, err)
		var got []string
		for _, e := range res.Entries {
			got = append(got, e.AggregateType+"/"+e.AggregateID)
		}
		assert.Equal(t, []string{"user/u-1", "user/u-2", "invoice/i-1", "user/u-1"}, got)
		all, err := st.FeedHead(ctx, "")
		require.NoError(t, err)
		assert.Equal(t, all, res.Head, "the head is that of the unfiltered feed")

		// Filtered paging with limit 1 sees the same.
		got = nil
		after := int64(0)
		for {
			res, err := st.ReadFeed(ctx, "", after, &eventstore.FeedOptions{Types: []string{"user", "invoice"}, Limit: 1})
			require.NoError(t, err)
			for _, e := range res.Entries {
				got = append(got, e.AggregateType+"/"+e.AggregateID)
			}
			after = res.Next
			if !res.HasMore {
				break
			}
		}
		assert.Equal(t, []string{"user/u-1", "user/u-2", "invoice/i-1", "user/u-1"}, got)

		// Partitions split the feed: disjoint, complete, one aggregate in one.
		for _, typ := range []string{"", "order"} {
			whole, err := st.ReadFeed(ctx, typ, 0, nil)
			require.NoError(t, err)
			count := 0
			where := map[string]int{}
			for n := range 3 {
				part, err := st.ReadFeed(ctx, typ, 0, &eventstore.FeedOptions{PartitionCount: 3, PartitionNumber: n})
				require.NoError(t, err)
				count += len(part.Entries)
				for _, e := range part.Entries {
					assert.Equal(t, n, eventstore.Partition(e.AggregateID, 3))
					if p, ok := where[e.AggregateID]; ok {
						assert.Equal(t, p, n)
					}
					where[e.AggregateID] = n
				}
			}
			assert.Equal(t, len(whole.Entries), count)
		}
	})
}

func TestReadFeedValidation(t *testing.T) {
	st := newFakeStore(t, fakestorage.New())
	for _, c := range []struct {
		typ   string
		after int64
		opts  eventstore.FeedOptions
		field string
	}{
		{"", -1, eventstore.FeedOptions{}, "since"},
		{"", 0, eventstore.FeedOptions{Limit: 1001}, "limit"},
		{"", 0, eventstore.FeedOptions{Limit: -1}, "limit"},
		{"a", 0, eventstore.FeedOptions{Types: []string{"b"}}, "filterType"},
		{"", 0, eventstore.FeedOptions{Types: []string{"b/c"}}, "filterType[0]"},
		{"", 0, eventstore.FeedOptions{PartitionCount: 2, PartitionNumber: 2}, "partitionNumber"},
		{"", 0, eventstore.FeedOptions{PartitionCount: -1}, "partitionCount"},
		{"", 0, eventstore.FeedOptions{PartitionNumber: 1}, "partitionCount"},
		{"a/b", 0, eventstore.FeedOptions{}, "aggregateType"},
	} {
		_, err := st.ReadFeed(t.Context(), c.typ, c.after, &c.opts)
		var ve *eventstore.ValidationError
		if assert.ErrorAs(t, err, &ve, "%+v", c) {
			assert.Equal(t, c.field, ve.Fields[0].Field)
		}
	}
}

func newFakeStore(t *testing.T, s storage.Storage) *eventstore.Store {
	t.Helper()
	st, err := eventstore.New(s, &eventstore.Options{PollInterval: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestReadFeedWait(t *testing.T) {
	st := newFakeStore(t, fakestorage.New())
	saveAll(t, st, []saved{{"a", "1", 1}})
	// Nothing new: returns empty after the wait.
	start := time.Now()
	res, err := st.ReadFeed(t.Context(), "", 1, &eventstore.FeedOptions{Wait: 50 * time.Millisecond})
	require.NoError(t, err)
	assert.Empty(t, res.Entries)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)

	// A save answers the poll at once.
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, _ = st.Save(context.Background(), "a", "2", evs(2), nil)
	}()
	start = time.Now()
	res, err = st.ReadFeed(t.Context(), "a", 1, &eventstore.FeedOptions{Wait: 10 * time.Second})
	require.NoError(t, err)
	require.Len(t, res.Entries, 1)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Equal(t, int64(2), res.Entries[0].Cursor)

	// Cancelled: ctx's error.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = st.ReadFeed(ctx, "", 3, &eventstore.FeedOptions{Wait: time.Minute})
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestReadFeedCursorPastHead: Head is the feed's head whatever the cursor,
// and a cursor past it is a *CursorAheadError at once, also for a long
// poll and a subscription (which before waited for the feed to reach the
// cursor, answering Head = the cursor).
func TestReadFeedCursorPastHead(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		saveAll(t, st, []saved{{"order", "o-1", 2}, {"user", "u-1", 1}, {"order", "o-2", 1}})
		// The feed of orders is at FeedSequence 2, that of all types at position 4.
		for _, c := range []struct {
			typ       string
			head      int64
			filter    []string
			partition bool
		}{{"order", 2, nil, false}, {"", 4, nil, false}, {"", 4, []string{"user"}, false}, {"", 4, nil, true}} {
			opts := &eventstore.FeedOptions{Types: c.filter}
			if c.partition {
				opts.PartitionCount, opts.PartitionNumber = 2, 1
			}
			for after := int64(0); after <= c.head; after++ {
				res, err := st.ReadFeed(t.Context(), c.typ, after, opts)
				require.NoError(t, err)
				assert.Equal(t, c.head, res.Head, "%q after %d %+v", c.typ, after, c)
			}
			for _, after := range []int64{c.head + 1, 41} {
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				wait := *opts
				wait.Wait = time.Minute
				_, err := st.ReadFeed(ctx, c.typ, after, &wait)
				cancel()
				var ahead *eventstore.CursorAheadError
				require.ErrorAs(t, err, &ahead, "%q after %d", c.typ, after)
				assert.ErrorIs(t, err, eventstore.ErrConflict)
				assert.Equal(t, eventstore.CursorAheadError{AggregateType: c.typ, Cursor: after, Head: c.head}, *ahead)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		err := st.Subscribe(ctx, "order", 41, nil, func(context.Context, eventstore.FeedEntry) error { return nil })
		var ahead *eventstore.CursorAheadError
		require.ErrorAs(t, err, &ahead)
		assert.Equal(t, int64(2), ahead.Head)
	})
}

// TestSubscribeConcurrentWriters follows the feed while writers save: every
// batch arrives exactly once, whole, in order, and resuming from a stored
// cursor continues without loss or repetition.
func TestSubscribeConcurrentWriters(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		for _, typ := range []string{"", "acct"} {
			t.Run("feed="+typ, func(t *testing.T) {
				testSubscribeConcurrent(t, st, typ)
			})
		}
	})
}

func testSubscribeConcurrent(t *testing.T, st *eventstore.Store, typ string) {
	const writers, saves = 6, 40
	acked := make(chan string, writers*saves)
	var wg sync.WaitGroup
	start := make(chan struct{})
	prefix := fmt.Sprint("w", rand.Int(), "-")
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range saves {
				n := 1 + rand.IntN(4)
				typ := []string{"acct", "other"}[i%2]
				id := fmt.Sprint(prefix, w, "-", i%3)
				batch := evs(n)
				if _, err := st.Save(context.Background(), typ, id, batch, nil); err != nil {
					t.Error(err)
					return
				}
				acked <- typ + "|" + batch[0].ID
			}
		})
	}
	want := writers * saves
	if typ != "" {
		want /= 2
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var (
		got     []eventstore.FeedEntry
		stopped = make(chan error, 1)
	)
	after, err := st.FeedHead(t.Context(), typ)
	if errors.Is(err, eventstore.ErrNotFound) {
		after = 0
	} else {
		require.NoError(t, err)
	}
	last := after
	halfway := true
	var delivered atomic.Int64
	handle := func(ctx context.Context, e eventstore.FeedEntry) error {
		if e.Cursor <= last {
			return fmt.Errorf("cursor %d after %d", e.Cursor, last)
		}
		ours := strings.HasPrefix(e.AggregateID, prefix)
		if ours && halfway && len(got) == want/2 {
			// Fail halfway: the entry is not delivered; a restart
			// resumes from the last stored cursor.
			halfway = false
			return errHalfway
		}
		last = e.Cursor
		if ours {
			got = append(got, e)
			delivered.Add(1)
		}
		if len(got) == want {
			cancel()
		}
		return nil
	}
	go func() {
		err := st.Subscribe(ctx, typ, after, &eventstore.FeedOptions{Limit: 7}, handle)
		if !errors.Is(err, errHalfway) {
			stopped <- fmt.Errorf("first subscription: %v", err)
			return
		}
		stopped <- st.Subscribe(ctx, typ, last, &eventstore.FeedOptions{Limit: 7}, handle)
	}()
	close(start)
	wg.Wait()
	close(acked)
	select {
	case err := <-stopped:
		require.NoError(t, err, "a cancelled subscription returns nil")
	case <-time.After(20 * time.Second):
		t.Fatalf("subscription saw %d of %d batches", delivered.Load(), want)
	}
	seen := map[string]bool{}
	for _, e := range got {
		key := e.AggregateType + "|" + e.Events[0].ID
		assert.False(t, seen[key], "batch delivered twice")
		seen[key] = true
		for k, ev := range e.Events {
			assert.Equal(t, e.Events[0].Position+int64(k), ev.Position, "a batch is whole")
		}
	}
	for a := range acked {
		if typ == "" || strings.HasPrefix(a, typ+"|") {
			assert.True(t, seen[a], "acknowledged batch %s never delivered", a)
		}
	}
	assert.Len(t, got, want)
}

var errHalfway = errors.New("halfway")

func TestSubscribeHandlerErrorAndClose(t *testing.T) {
	st := newFakeStore(t, fakestorage.New())
	saveAll(t, st, []saved{{"a", "1", 1}, {"a", "2", 1}})
	boom := errors.New("boom")
	calls := 0
	err := st.Subscribe(t.Context(), "a", 0, nil, func(ctx context.Context, e eventstore.FeedEntry) error {
		calls++
		return boom
	})
	assert.Equal(t, boom, err, "the handler's error is returned unchanged")
	assert.Equal(t, 1, calls)

	done := make(chan error, 1)
	go func() {
		done <- st.Subscribe(context.Background(), "never", 0, nil, func(context.Context, eventstore.FeedEntry) error { return nil })
	}()
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, st.Close())
	select {
	case err := <-done:
		assert.ErrorIs(t, err, eventstore.ErrClosed)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the subscription")
	}
}

// TestWakeAcrossProcesses: two Stores on one storage that reports appends
// (as PostgreSQL's LISTEN/NOTIFY does). A save through A reaches a long
// poll, a subscription and a running projector on B at once, although
// B's poll interval is an hour; the watcher is restarted after failures.
func TestWakeAcrossProcesses(t *testing.T) {
	shared := fakestorage.NewWatching()
	shared.Failures = 2 // the first two attempts fail: backoff, then retry
	a := newFakeStore(t, fakestorage.Shared{Watching: shared})
	b := newFakeStore(t, fakestorage.Shared{Watching: shared})
	saveAll(t, a, []saved{{"a", "0", 1}})

	got := make(chan eventstore.FeedEntry, 100)
	go func() {
		_ = b.Subscribe(t.Context(), "a", 1, nil, func(ctx context.Context, e eventstore.FeedEntry) error {
			got <- e
			return nil
		})
	}()
	// Wait for B's watcher to be up (after two failures and backoff).
	require.Eventually(t, func() bool { return shared.Watchers() == 1 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(2100 * time.Millisecond) // until B trusts its watcher

	for i := range 5 {
		start := time.Now()
		poll := make(chan int, 1)
		go func() {
			res, err := b.ReadFeed(t.Context(), "a", int64(i+1), &eventstore.FeedOptions{Wait: 30 * time.Second})
			if err != nil {
				t.Error(err)
			}
			poll <- len(res.Entries)
		}()
		time.Sleep(10 * time.Millisecond)
		saveAll(t, a, []saved{{"a", fmt.Sprint(i + 1), 1}})
		select {
		case n := <-poll:
			assert.Equal(t, 1, n)
		case <-time.After(3 * time.Second):
			t.Fatal("the long poll on B missed A's save")
		}
		select {
		case <-got:
		case <-time.After(3 * time.Second):
			t.Fatal("the subscription on B missed A's save")
		}
		assert.Less(t, time.Since(start), time.Second)
	}
}

// TestCloseLeavesNoGoroutines: the watcher, long polls, subscriptions and
// a running Projector all end with Close.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	st, err := eventstore.New(fakestorage.NewWatching(), nil)
	require.NoError(t, err)
	saveAll(t, st, []saved{{"a", "1", 1}})
	p := eventstore.NewProjector(st, nil)
	var wg sync.WaitGroup
	wg.Go(func() { _ = p.Run(context.Background()) })
	wg.Go(func() {
		_ = st.Subscribe(context.Background(), "", 0, nil, func(context.Context, eventstore.FeedEntry) error { return nil })
	})
	wg.Go(func() {
		_, _ = st.ReadFeed(context.Background(), "", 1, &eventstore.FeedOptions{Wait: time.Minute})
	})
	time.Sleep(50 * time.Millisecond)
	require.NoError(t, st.Close())
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end Run, Subscribe and ReadFeed")
	}
	// Own loop: require.Eventually runs its condition on a goroutine.
	n := runtime.NumGoroutine()
	for deadline := time.Now().Add(5 * time.Second); n > before && time.Now().Before(deadline); n = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("goroutines: %d before, %d after Close\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

// hooks.FeedPoll: a waiting ReadFeed finds a save made through another
// Store on the same storage (which no watcher reports) within about Poll.
func TestReadFeedPoll(t *testing.T) {
	ctx := context.Background()
	st1, st2 := twoStores(t)
	save(t, st1, "order", "o1", ev("Placed", `{}`))
	head, err := st2.FeedHead(ctx, "")
	require.NoError(t, err)
	go func() {
		time.Sleep(50 * time.Millisecond)
		_, _ = st1.Save(ctx, "order", "o2", []eventstore.NewEvent{ev("Placed", `{}`)}, nil)
	}()
	start := time.Now()
	opts := &eventstore.FeedOptions{Wait: 10 * time.Second}
	*hooks.FeedPoll(opts) = 20 * time.Millisecond
	res, err := st2.ReadFeed(ctx, "", head, opts)
	require.NoError(t, err)
	require.Len(t, res.Entries, 1)
	assert.Equal(t, "o2", res.Entries[0].AggregateID)
	assert.Less(t, time.Since(start), 500*time.Millisecond, "found by polling every 20ms, not after the Store's poll of a second")
}
