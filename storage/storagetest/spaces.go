package storagetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

// Spaces opens and drops the named spaces of one location, as package
// tenancy keeps a project's tenants: a SQLite file per name in one
// directory, a PostgreSQL schema per name in one database, a memory
// storage per name. RunSpaces gets a fresh location for each subtest.
type Spaces struct {
	// Open returns the Storage of space name, creating it when missing.
	// RunSpaces closes what it returns.
	Open func(tb testing.TB, name string) storage.Storage
	// Drop deletes space name, whose Storage RunSpaces has closed, the
	// way its owner gives the space back (remove the file, drop the
	// schema); nothing to drop is no error. Nil means there is nothing to
	// delete (a memory storage goes with its last reference).
	Drop func(tb testing.TB, name string)
}

// spaceCase is one named subtest of RunSpaces, with the rule it checks.
type spaceCase struct {
	name string
	rule string
	fn   func(t *testing.T, sp Spaces)
}

// RunSpaces runs the tenant-safety cases: two Storages of the spaces
// newSpaces returns, opened side by side under different names and written
// with the same aggregate ids, event ids, event types and projection
// definitions, must never see each other's events, feeds, heads, lists of
// aggregates, projection definitions, instances or deletions; dropping one
// space must leave the other intact; and a dropped name opened again must
// start empty. newSpaces is called once per subtest and must return spaces
// of a fresh location (a new directory, a new schema prefix); it may
// register its own clean-up with tb.Cleanup.
//
// Package tenancy keeps tenants above the storage contract (each tenant is
// a Storage of its own), so what makes a backend tenant-safe is that its
// spaces are separate; Run checks each space on its own.
func RunSpaces(t *testing.T, newSpaces func(tb testing.TB) Spaces) {
	t.Helper()
	for _, c := range spaceCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("rule checked by %s: %s", c.name, c.rule)
				}
			})
			c.fn(t, newSpaces(t))
		})
	}
}

func spaceCases() []spaceCase {
	return []spaceCase{
		{"SpacesSameIDsStaySeparate", "two spaces written with the same aggregate ids, event ids and types each load, read and list only their own events; an event id stored in one is no duplicate in the other", spacesSameIDs},
		{"SpacesProjectionsStaySeparate", "a projection definition of one space is not in the other, the same name can be defined in both with different handlers, and each space's instances count only its own events", spacesProjections},
		{"SpacesDeletionsStaySeparate", "deleting an aggregate or an aggregate type in one space leaves the same aggregates of the other", spacesDeletions},
		{"SpacesSnapshotsStaySeparate", "a snapshot saved in one space is not in the other, the same aggregate has its own snapshot in each, deleting it in one leaves the other's, and a dropped space opened again has none", spacesSnapshots},
		{"SpacesDropLeavesOthers", "dropping a space leaves the other spaces' events, feeds and projections, and a dropped name opened again starts empty", spacesDrop},
	}
}

// space is one open space: its Storage, a Store and a Projector on it.
type space struct {
	name  string
	s     storage.Storage
	store *eventstore.Store
	p     *eventstore.Projector
}

// openSpace opens space name and checks that it is empty when fresh is
// set. The Store is closed when t ends unless closed before.
func openSpace(t *testing.T, sp Spaces, name string, fresh bool) *space {
	t.Helper()
	s := sp.Open(t, name)
	if s == nil {
		t.Fatalf("Open(%q) returned a nil Storage", name)
	}
	st, err := eventstore.New(s, nil)
	if err != nil {
		_ = s.Close()
		t.Fatalf("eventstore.New on space %q: %v", name, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if fresh {
		if events, _, err := readFeed(t.Context(), s, storage.FeedQuery{Limit: 100}); err != nil || len(events) > 0 {
			t.Fatalf("a new space %q must be empty; its feed holds %d events (%v)", name, len(events), err)
		}
		if defs, err := s.Definitions(t.Context()); err != nil || len(defs) > 0 {
			t.Fatalf("a new space %q must be empty; it holds %d definitions (%v)", name, len(defs), err)
		}
	}
	return &space{name: name, s: s, store: st, p: eventstore.NewProjector(st, nil)}
}

// saveBoth saves, in each space, the same events (same ids and types)
// with data naming the space, and returns the event ids.
func saveBoth(t *testing.T, typ, id string, n int, spaces ...*space) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = newID()
	}
	for _, sp := range spaces {
		batch := make([]eventstore.NewEvent, n)
		for i := range batch {
			batch[i] = eventstore.NewEvent{ID: ids[i], Type: "Happened", Data: []byte(fmt.Sprintf(`{"space":%q,"n":%d}`, sp.name, i))}
		}
		res, err := sp.store.Save(t.Context(), typ, id, batch, nil)
		if err != nil {
			t.Fatalf("space %s: Save %s/%s: %v", sp.name, typ, id, err)
		}
		if res.Duplicate {
			t.Fatalf("space %s: Save %s/%s of event ids another space holds was taken as a duplicate: the spaces share their idempotency", sp.name, typ, id)
		}
	}
	return ids
}

// checkOwn checks that every event the space's feed, loads and lists
// return is its own (data naming it), that it holds wantEvents events in
// all and that its aggregates of typ are wantAggs.
func checkOwn(t *testing.T, sp *space, typ string, wantEvents int, wantAggs []string) {
	t.Helper()
	ctx := t.Context()
	own := fmt.Sprintf(`"space":%q`, sp.name)
	events, head, err := readFeed(ctx, sp.s, storage.FeedQuery{Limit: 7})
	if err != nil {
		t.Fatalf("space %s: ReadFeed: %v", sp.name, err)
	}
	if len(events) != wantEvents {
		t.Errorf("space %s: the feed holds %d events, want its own %d", sp.name, len(events), wantEvents)
	}
	for _, e := range events {
		if !strings.Contains(string(e.Data), own) {
			t.Errorf("space %s: the feed holds an event of another space: %s/%s %s", sp.name, e.AggregateType, e.AggregateID, showData(e.Data))
		}
	}
	if fh, err := sp.s.FeedHead(ctx, ""); err != nil || (len(events) > 0 && fh < events[len(events)-1].Position) {
		t.Errorf("space %s: FeedHead %d (%v); its own feed ends at %d", sp.name, fh, err, head)
	}
	typed, _, err := readFeed(ctx, sp.s, storage.FeedQuery{Limit: 7, AggregateType: typ})
	if err != nil {
		t.Fatalf("space %s: ReadFeed %s: %v", sp.name, typ, err)
	}
	for _, e := range typed {
		if !strings.Contains(string(e.Data), own) {
			t.Errorf("space %s: the %s feed holds an event of another space: %s", sp.name, typ, showData(e.Data))
		}
	}
	var total int64
	feeds, err := sp.s.Feeds(ctx)
	if err != nil {
		t.Fatalf("space %s: Feeds: %v", sp.name, err)
	}
	for _, f := range feeds {
		total += f.EventCount
	}
	if total != int64(wantEvents) {
		t.Errorf("space %s: Feeds counts %d events, want its own %d", sp.name, total, wantEvents)
	}
	list, err := sp.s.ListAggregates(ctx, storage.AggregateQuery{AggregateType: typ, Limit: 100})
	if err != nil && !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("space %s: ListAggregates: %v", sp.name, err)
	}
	var got []string
	for _, a := range list.Aggregates {
		got = append(got, a.ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(wantAggs) || list.Total != int64(len(wantAggs)) {
		t.Errorf("space %s: ListAggregates %s = %q (total %d), want its own %q", sp.name, typ, got, list.Total, wantAggs)
	}
	for _, id := range wantAggs {
		agg, err := sp.store.Load(ctx, typ, id)
		if err != nil {
			t.Errorf("space %s: Load %s/%s: %v", sp.name, typ, id, err)
			continue
		}
		for _, e := range agg.Events {
			if !strings.Contains(string(e.Data), own) {
				t.Errorf("space %s: Load %s/%s returns an event of another space: %s", sp.name, typ, id, showData(e.Data))
			}
		}
	}
}

func spacesSameIDs(t *testing.T, sp Spaces) {
	a, b := openSpace(t, sp, "alpha", true), openSpace(t, sp, "beta", true)
	saveBoth(t, "order", "o-1", 3, a, b)
	saveBoth(t, "order", "o-2", 1, a, b)
	saveBoth(t, "order", "o-3", 2, b)  // only in beta
	saveBoth(t, "refund", "r-1", 1, b) // a type only beta holds
	if fh, err := a.s.FeedHead(t.Context(), "refund"); (err != nil && !errors.Is(err, storage.ErrNotFound)) || fh != 0 {
		t.Errorf("space alpha: FeedHead of a type only beta holds is %d (%v), want 0", fh, err)
	}
	checkOwn(t, a, "order", 4, []string{"o-1", "o-2"})
	checkOwn(t, b, "order", 7, []string{"o-1", "o-2", "o-3"})
	if _, err := a.store.Load(t.Context(), "order", "o-3"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("space alpha: Load of an aggregate only beta holds: %v, want ErrNotFound", err)
	}
	// A version check counts the space's own events only.
	if _, err := a.store.Save(t.Context(), "order", "o-2", []eventstore.NewEvent{{ID: newID(), Type: "Happened", Data: []byte(`{"space":"alpha"}`)}},
		&eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(1)}); err != nil {
		t.Errorf("space alpha: Save o-2 expecting its own version 1: %v", err)
	}
}

// countDef is an aggregated projection counting "Happened" events of type
// order, under name.
func countDef(name, target string) eventstore.Definition {
	return eventstore.Definition{Name: name, Feed: "order", Aggregated: true, Handlers: []eventstore.Handler{{
		EventType: "Happened",
		Functions: []eventstore.Function{{Name: eventstore.FuncInc, TargetSelector: "$.projection." + target}},
	}}}
}

// aggregatedCount returns the projection's field, or "" when it has no
// instance.
func aggregatedCount(t *testing.T, sp *space, name, field string) string {
	t.Helper()
	pr, err := sp.p.Aggregated(t.Context(), name)
	if errors.Is(err, storage.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatalf("space %s: Aggregated %s: %v", sp.name, name, err)
	}
	var v map[string]any
	if err := json.Unmarshal(pr.Data, &v); err != nil {
		t.Fatalf("space %s: projection %s: %v", sp.name, name, err)
	}
	return fmt.Sprint(v[field])
}

func spacesProjections(t *testing.T, sp Spaces) {
	ctx := t.Context()
	a, b := openSpace(t, sp, "alpha", true), openSpace(t, sp, "beta", true)
	if err := a.p.Create(ctx, countDef("n", "count")); err != nil {
		t.Fatalf("space alpha: Create: %v", err)
	}
	if defs, err := b.s.Definitions(ctx); err != nil || len(defs) != 0 {
		t.Fatalf("space beta sees %d definitions after alpha created one (%v)", len(defs), err)
	}
	if err := b.p.Create(ctx, countDef("n", "total")); err != nil {
		t.Fatalf("space beta: Create of a name alpha defines, with other handlers: %v", err)
	}
	saveBoth(t, "order", "o-1", 2, a, b)
	saveBoth(t, "order", "o-2", 3, b)
	if got := aggregatedCount(t, a, "n", "count"); got != "2" {
		t.Errorf("space alpha: projection n counts %s, want its own 2 events", got)
	}
	if got := aggregatedCount(t, b, "n", "total"); got != "5" {
		t.Errorf("space beta: projection n counts %s, want its own 5 events", got)
	}
	if got := aggregatedCount(t, a, "n", "total"); got != "<nil>" {
		t.Errorf("space alpha: projection n has beta's field total = %s", got)
	}
	// Deleting the definition in one space leaves the other's.
	if err := a.p.Delete(ctx, "n"); err != nil {
		t.Fatalf("space alpha: Delete n: %v", err)
	}
	if got := aggregatedCount(t, b, "n", "total"); got != "5" {
		t.Errorf("space beta: after alpha deleted its projection n, beta's counts %s, want 5", got)
	}
	if defs, err := b.s.Definitions(ctx); err != nil || len(defs) != 1 {
		t.Errorf("space beta holds %d definitions after alpha deleted its own (%v), want 1", len(defs), err)
	}
}

func spacesDeletions(t *testing.T, sp Spaces) {
	ctx := t.Context()
	a, b := openSpace(t, sp, "alpha", true), openSpace(t, sp, "beta", true)
	saveBoth(t, "order", "o-1", 2, a, b)
	saveBoth(t, "order", "o-2", 1, a, b)
	saveBoth(t, "invoice", "i-1", 1, a, b)
	if err := a.store.DeleteAggregate(ctx, "order", "o-1"); err != nil {
		t.Fatalf("space alpha: DeleteAggregate: %v", err)
	}
	checkOwn(t, b, "order", 4, []string{"o-1", "o-2"})
	if err := b.store.DeleteAggregateType(ctx, "invoice"); err != nil {
		t.Fatalf("space beta: DeleteAggregateType: %v", err)
	}
	checkOwn(t, a, "invoice", 2, []string{"i-1"})
	checkOwn(t, a, "order", 2, []string{"o-2"})
	checkOwn(t, b, "order", 3, []string{"o-1", "o-2"})
}

func spacesDrop(t *testing.T, sp Spaces) {
	ctx := t.Context()
	a, b := openSpace(t, sp, "alpha", true), openSpace(t, sp, "beta", true)
	for _, s := range []*space{a, b} {
		if err := s.p.Create(ctx, countDef("n", "count")); err != nil {
			t.Fatalf("space %s: Create: %v", s.name, err)
		}
	}
	saveBoth(t, "order", "o-1", 2, a, b)
	if err := a.store.Close(); err != nil {
		t.Fatalf("space alpha: Close: %v", err)
	}
	if sp.Drop != nil {
		sp.Drop(t, "alpha")
	}
	checkOwn(t, b, "order", 2, []string{"o-1"})
	if got := aggregatedCount(t, b, "n", "count"); got != "2" {
		t.Errorf("space beta: after alpha was dropped its projection counts %s, want 2", got)
	}
	again := openSpace(t, sp, "alpha", false)
	if events, _, err := readFeed(ctx, again.s, storage.FeedQuery{Limit: 100}); err != nil || len(events) > 0 {
		t.Errorf("space alpha opened again after its drop holds %d events (%v), want none", len(events), err)
	}
	if defs, err := again.s.Definitions(ctx); err != nil || len(defs) > 0 {
		t.Errorf("space alpha opened again after its drop holds %d definitions (%v), want none", len(defs), err)
	}
	if _, err := again.store.Load(ctx, "order", "o-1"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("space alpha opened again after its drop: Load o-1: %v, want ErrNotFound", err)
	}
	checkOwn(t, b, "order", 2, []string{"o-1"})
}

func spacesSnapshots(t *testing.T, sp Spaces) {
	ctx := t.Context()
	a, b := openSpace(t, sp, "alpha", true), openSpace(t, sp, "beta", true)
	saveBoth(t, "order", "o-1", 1, a, b)
	saveBoth(t, "order", "o-1", 1, a, b)
	saveBoth(t, "order", "o-2", 1, a, b)
	if err := a.store.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "order", AggregateID: "o-1", Version: 2, Data: []byte("alpha")}); err != nil {
		t.Fatalf("space alpha: SaveSnapshot: %v", err)
	}
	if snap, err := b.store.LoadSnapshot(ctx, "order", "o-1"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("space beta: a snapshot saved in alpha must not be in beta; LoadSnapshot returned %q (%v)", snap.Data, err)
	}
	if err := b.store.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "order", AggregateID: "o-1", Version: 1, Data: []byte("beta")}); err != nil {
		t.Fatalf("space beta: SaveSnapshot: %v", err)
	}
	if err := b.store.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "order", AggregateID: "o-2", Version: 1, Data: []byte("beta o-2")}); err != nil {
		t.Fatalf("space beta: SaveSnapshot: %v", err)
	}
	own := func(s *space, id, want string) {
		t.Helper()
		snap, err := s.store.LoadSnapshot(ctx, "order", id)
		if err != nil || string(snap.Data) != want {
			t.Errorf("space %s: the snapshot of order/%s must be its own, %q; got %q (%v)", s.name, id, want, snap.Data, err)
		}
	}
	own(a, "o-1", "alpha")
	own(b, "o-1", "beta")
	if err := a.store.DeleteAggregate(ctx, "order", "o-1"); err != nil {
		t.Fatalf("space alpha: DeleteAggregate: %v", err)
	}
	own(b, "o-1", "beta")
	if err := a.store.Close(); err != nil {
		t.Fatalf("space alpha: Close: %v", err)
	}
	if sp.Drop != nil {
		sp.Drop(t, "alpha")
	}
	own(b, "o-2", "beta o-2")
	again := openSpace(t, sp, "alpha", false)
	if _, err := again.store.Save(ctx, "order", "o-2", []eventstore.NewEvent{{ID: newID(), Type: "Happened"}}, nil); err != nil {
		t.Fatalf("space alpha opened again: Save: %v", err)
	}
	if snap, err := again.store.LoadSnapshot(ctx, "order", "o-2"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("space alpha opened again after its drop must have no snapshot; LoadSnapshot returned %q (%v)", snap.Data, err)
	}
}
