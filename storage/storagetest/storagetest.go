// Package storagetest is the conformance suite for storage.Storage
// backends, in the spirit of testing/fstest and testing/slogtest.
//
// A backend proves it conforms by running the suite from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, func(tb testing.TB) storage.Storage { return memory.New() })
//	}
//
// Every subtest gets a fresh, empty Storage from newStorage, drives it
// mostly through eventstore.Store (what users see) and the Storage methods
// the Store does not cover (the feed, definitions and projection commits),
// and checks the store-wide invariants afterwards: feed positions strictly
// increasing, aggregate versions and sequences contiguous, the events of a
// batch adjacent with one FeedSequence, each type's FeedSequences rising
// from batch to batch, FeedHead, Feeds and ListAggregates agreeing with
// the feed, every
// projection checkpoint at or below the feed head. Positions and
// FeedSequences must strictly increase and never be reused, but may have
// gaps: the suite never expects a number to be the previous one + 1,
// except for the positions of the events of one batch. The required
// properties (atomic append, a global order that a reader continuing from
// a cursor never skips, checkpoint atomic with state) have no capability
// flags: every backend must pass every subtest.
//
// RunSpaces checks what makes a backend tenant-safe. Package tenancy keeps
// tenants above the storage contract: each tenant is a Storage of its own
// (a SQLite file, a PostgreSQL schema, a memory storage), so a backend is
// tenant-safe when its spaces are separate. RunSpaces opens two spaces side
// by side in one location under different names, writes them with the same
// aggregate ids, event ids, types and definitions, and checks that neither
// sees the other's events, feeds, heads, aggregates, definitions, projection
// instances or deletions; that dropping one (removing the file, dropping the
// schema) leaves the other intact; and that a dropped name opened again is
// empty:
//
//	func TestSpaces(t *testing.T) {
//		storagetest.RunSpaces(t, func(tb testing.TB) storagetest.Spaces {
//			dir := tb.TempDir()
//			return storagetest.Spaces{
//				Open: func(tb testing.TB, name string) storage.Storage { ... open dir/name.db ... },
//				Drop: func(tb testing.TB, name string) { ... remove dir/name.db ... },
//			}
//		})
//	}
//
// The suite's own tests check that it fails on spaces that share one
// storage and on a Drop that keeps the data.
//
// RunBenchmarks measures the same workloads on any backend, so figures of
// different backends can be compared.
package storagetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

// testCase is one named subtest of Run, with the rule it checks.
type testCase struct {
	name string
	rule string
	fn   func(t *testing.T, h *harness)
}

// cases returns every subtest of Run, in order.
func cases() []testCase {
	var all []testCase
	all = append(all, saveCases()...)
	all = append(all, idempotencyCases()...)
	all = append(all, feedCases()...)
	all = append(all, feedSequenceCases()...)
	all = append(all, metadataCases()...)
	all = append(all, feedDateCases()...)
	all = append(all, importedCases()...)
	all = append(all, loadRangeCases()...)
	all = append(all, maxBytesCases()...)
	all = append(all, deleteCases()...)
	all = append(all, snapshotCases()...)
	all = append(all, bulkCases()...)
	all = append(all, definitionCases()...)
	all = append(all, projectionDefinitionCases()...)
	all = append(all, projectionListCases()...)
	all = append(all, aggregateListCases()...)
	all = append(all, searchCases()...)
	all = append(all, projectorCases()...)
	all = append(all, codeProjectionCases()...)
	all = append(all, languageCases()...)
	all = append(all, errorTextCases()...)
	all = append(all, reactionCases()...)
	all = append(all, closeCases()...)
	return all
}

// Run runs the conformance suite against the Storage returned by
// newStorage. newStorage is called once per subtest and must return a new,
// empty Storage (a PostgreSQL backend can use a fresh schema per call);
// it may register its own clean-up with tb.Cleanup. Run closes every
// Storage it gets.
//
// Each subtest is named after the rule it checks and states that rule when
// it fails.
func Run(t *testing.T, newStorage func(tb testing.TB) storage.Storage) {
	t.Helper()
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			h := open(t, newStorage)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("rule checked by %s: %s", c.name, c.rule)
				}
			})
			c.fn(t, h)
		})
	}
}

// harness holds the Storage of one subtest and a Store on top of it.
type harness struct {
	s     storage.Storage
	store *eventstore.Store
	// closed is set by subtests that close the storage themselves; the
	// invariant check is skipped for them.
	closed bool
}

// open returns a harness on a fresh Storage, closes it when t ends, and
// checks the invariants before that.
func open(t *testing.T, newStorage func(tb testing.TB) storage.Storage) *harness {
	t.Helper()
	s := newStorage(t)
	if s == nil {
		t.Fatal("newStorage returned a nil Storage")
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil && !errors.Is(err, storage.ErrClosed) {
			t.Errorf("Close of the storage failed: %v", err)
		}
	})
	store, err := eventstore.New(s, nil)
	if err != nil {
		t.Fatalf("eventstore.New: %v", err)
	}
	h := &harness{s: s, store: store}
	// Cleanups run last-in first-out: this one runs before Close.
	t.Cleanup(func() {
		if !h.closed {
			checkInvariants(t, s)
		}
	})
	page, err := s.ReadFeed(t.Context(), storage.FeedQuery{Limit: 1})
	if err != nil {
		t.Fatalf("ReadFeed of a fresh storage: %v", err)
	}
	if len(page.Events) != 0 {
		t.Fatalf("newStorage must return an empty Storage; its feed starts with %+v", page.Events[0])
	}
	defs, err := s.Definitions(t.Context())
	if err != nil {
		t.Fatalf("Definitions of a fresh storage: %v", err)
	}
	if len(defs) != 0 {
		t.Fatalf("newStorage must return an empty Storage; it holds %d projection definitions", len(defs))
	}
	return h
}

// checkInvariants checks the store-wide invariants after a subtest, as
// bbolt's PostTestCleanup checks the database: the feed is strictly
// ordered by position; the events of a batch are adjacent, with
// consecutive positions and one FeedSequence, and each type's
// FeedSequences rise strictly from batch to batch; FeedHead is at least
// the last position and each type's last FeedSequence; Feeds counts what
// the feed holds; ListAggregates lists each type's aggregates of the
// feed; each aggregate's events in the feed are exactly what Load
// returns, with contiguous sequences and versions; and every projection
// checkpoint is at or below the feed head.
func checkInvariants(t *testing.T, s storage.Storage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	feed, head, err := readFeed(ctx, s, storage.FeedQuery{Limit: 500})
	if err != nil {
		t.Errorf("invariant check: reading the whole feed: %v", err)
		return
	}
	type key struct{ typ, id string }
	byAgg := make(map[key][]storage.Event)
	var order []key
	var last int64
	for i, e := range feed {
		if e.Position <= last {
			t.Errorf("invariant: feed positions must be strictly increasing; event %d of the feed has position %d after %d", i, e.Position, last)
		}
		last = e.Position
		k := key{e.AggregateType, e.AggregateID}
		if _, ok := byAgg[k]; !ok {
			order = append(order, k)
		}
		byAgg[k] = append(byAgg[k], e)
	}
	if msg := checkBatches(feed); msg != "" {
		t.Errorf("invariant: %s", msg)
	}
	checkHeads(ctx, t, s, feed)
	lists := make(map[[2]string][]storage.Event, len(byAgg))
	for k, events := range byAgg {
		lists[[2]string{k.typ, k.id}] = events
	}
	checkAggregateLists(ctx, t, s, lists)
	for _, k := range order {
		events := byAgg[k]
		if msg := contiguous(events); msg != "" {
			t.Errorf("invariant: the feed's events of aggregate %s/%s must have contiguous sequences and versions: %s", k.typ, k.id, msg)
		}
		agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: k.typ, AggregateID: k.id})
		if err != nil {
			t.Errorf("invariant: every aggregate in the feed can be loaded; Load %s/%s: %v", k.typ, k.id, err)
			continue
		}
		if msg := sameEvents(agg.Events, events); msg != "" {
			t.Errorf("invariant: Load %s/%s must return exactly the aggregate's events of the feed: %s", k.typ, k.id, msg)
		}
		if n := len(agg.Events); n > 0 && agg.Version != agg.Events[n-1].Version {
			t.Errorf("invariant: aggregate %s/%s has Version %d but its last event has Version %d", k.typ, k.id, agg.Version, agg.Events[n-1].Version)
		}
	}
	defs, err := s.Definitions(ctx)
	if err != nil {
		t.Errorf("invariant check: Definitions: %v", err)
		return
	}
	for _, d := range defs {
		if d.Checkpoint < 0 || d.Checkpoint > head {
			t.Errorf("invariant: projection checkpoints must lie in [0, feed head]; %q is at %d, head %d", d.Name, d.Checkpoint, head)
		}
	}
}

// checkHeads checks FeedHead and Feeds against the whole feed.
func checkHeads(ctx context.Context, t *testing.T, s storage.Storage, feed []storage.Event) {
	t.Helper()
	var last int64
	lastSeq := make(map[string]int64)
	for _, e := range feed {
		last = e.Position
		lastSeq[e.AggregateType] = e.FeedSequence
	}
	head, err := s.FeedHead(ctx, "")
	if err != nil {
		t.Errorf("invariant check: FeedHead(\"\"): %v", err)
	} else if head < last {
		t.Errorf("invariant: FeedHead(\"\") must be at least the feed's last position %d, got %d", last, head)
	}
	for typ, seq := range lastSeq {
		head, err := s.FeedHead(ctx, typ)
		if err != nil {
			t.Errorf("invariant check: FeedHead(%q): %v", typ, err)
		} else if head < seq {
			t.Errorf("invariant: FeedHead(%q) must be at least the type's last FeedSequence %d in the feed, got %d", typ, seq, head)
		}
	}
	feeds, err := s.Feeds(ctx)
	if err != nil {
		t.Errorf("invariant check: Feeds: %v", err)
	} else if want := feedInfos(feed); !slices.Equal(feeds, want) {
		t.Errorf("invariant: Feeds must list the types of the feed, ordered by type, with their counts of aggregates, batches and events:\n got %+v\nwant %+v", feeds, want)
	}
}
