package storagetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
)

func aggregateListCases() []testCase {
	return []testCase{
		{"ListAggregatesOrder", "ListAggregates lists a type's aggregates by id in byte order, each with its current version and the RecordedAt of its first and last events, and no aggregate of another type", testAggregatesOrder},
		{"ListAggregatesPaging", "ListAggregates leaves out Skip aggregates and returns at most Limit, so pages concatenate to the whole order; Total counts every aggregate of the type whatever the page; Limit 0 returns only Total; a Skip past the end returns none", testAggregatesPaging},
		{"ListAggregatesFollowsSaves", "after more saves (Append and AppendAll) ListAggregates reports the new version and UpdatedAt, and the same CreatedAt", testAggregatesFollowSaves},
		{"ListAggregatesAfterDelete", "ListAggregates does not list deleted aggregates and does not count them; an id used again is listed from version 1; after DeleteAggregateType the type lists none, with Total 0 and no error", testAggregatesAfterDelete},
		{"ListAggregatesUnknownType", "ListAggregates of a type that never had events returns no aggregates and Total 0 without error", testAggregatesUnknown},
	}
}

// mustListAggregates calls ListAggregates and fails the test on error.
func mustListAggregates(t testing.TB, h *harness, q storage.AggregateQuery) storage.AggregateList {
	t.Helper()
	list, err := h.s.ListAggregates(t.Context(), q)
	if err != nil {
		t.Fatalf("ListAggregates %+v: %v", q, err)
	}
	return list
}

// summaryOf describes agg as ListAggregates must.
func summaryOf(agg storage.Aggregate) storage.AggregateSummary {
	return storage.AggregateSummary{ID: agg.ID, Version: agg.Version,
		CreatedAt: agg.Events[0].RecordedAt, UpdatedAt: agg.Events[len(agg.Events)-1].RecordedAt}
}

// diffSummaries describes how got differs from want, or returns "".
func diffSummaries(got, want []storage.AggregateSummary) string {
	show := func(l []storage.AggregateSummary) string {
		parts := make([]string, len(l))
		for i, a := range l {
			parts[i] = fmt.Sprintf("%q v%d created %s updated %s", a.ID, a.Version,
				a.CreatedAt.Format("15:04:05.000000"), a.UpdatedAt.Format("15:04:05.000000"))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	same := slices.EqualFunc(got, want, func(a, b storage.AggregateSummary) bool {
		return a.ID == b.ID && a.Version == b.Version && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
	})
	if same {
		return ""
	}
	return fmt.Sprintf("\n got %s\nwant %s", show(got), show(want))
}

// aggregateIDs are ids whose byte order differs from a case-insensitive
// or numeric one, saved in this (unsorted) order.
var aggregateIDs = []string{"b", "B", "a", "10", "9", "é", "ab", "a-1", "Z", "e"}

func testAggregatesOrder(t *testing.T, h *harness) {
	want := make([]storage.AggregateSummary, 0, len(aggregateIDs))
	for i, id := range aggregateIDs {
		for range i%3 + 1 {
			mustSave(t, h, "alpha", id, evs("Touched", 2), nil)
		}
		// The same ids in another type, with other versions.
		mustSave(t, h, "beta", id, evs("Touched", 1), nil)
	}
	mustSave(t, h, "beta", "only-beta", evs("Touched", 1), nil)
	ids := slices.Clone(aggregateIDs)
	slices.Sort(ids) // Go compares strings by bytes
	for _, id := range ids {
		want = append(want, summaryOf(mustLoad(t, h, "alpha", id)))
	}
	list := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "alpha", Limit: 100})
	if msg := diffSummaries(list.Aggregates, want); msg != "" {
		t.Errorf("ListAggregates of alpha must list its aggregates by id in byte order with their versions and times:%s", msg)
	}
	if list.Total != int64(len(want)) {
		t.Errorf("ListAggregates of alpha: Total %d, want %d", list.Total, len(want))
	}
	beta := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "beta", Limit: 100})
	if beta.Total != int64(len(aggregateIDs)+1) || len(beta.Aggregates) != len(aggregateIDs)+1 {
		t.Fatalf("ListAggregates of beta: %d aggregates, Total %d; want %d", len(beta.Aggregates), beta.Total, len(aggregateIDs)+1)
	}
	for _, a := range beta.Aggregates {
		if a.Version != 1 {
			t.Errorf("ListAggregates of beta lists %q at version %d: versions of another type's aggregate of the same id leaked in", a.ID, a.Version)
		}
	}
}

func testAggregatesPaging(t *testing.T, h *harness) {
	for i := range 7 {
		mustSave(t, h, "alpha", fmt.Sprintf("agg-%d", 6-i), evs("Touched", 1), nil)
	}
	mustSave(t, h, "beta", "agg-x", evs("Touched", 1), nil)
	whole := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "alpha", Limit: 1000})
	if len(whole.Aggregates) != 7 || whole.Total != 7 {
		t.Fatalf("ListAggregates of 7 aggregates: %d aggregates, Total %d", len(whole.Aggregates), whole.Total)
	}
	for _, limit := range []int{1, 2, 3, 7} {
		var pages []storage.AggregateSummary
		for skip := 0; skip < 7; skip += limit {
			list := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "alpha", Skip: skip, Limit: limit})
			if list.Total != 7 {
				t.Errorf("ListAggregates Skip %d Limit %d: Total %d, want 7 whatever the page", skip, limit, list.Total)
			}
			if want := min(limit, 7-skip); len(list.Aggregates) != want {
				t.Errorf("ListAggregates Skip %d Limit %d: %d aggregates, want %d", skip, limit, len(list.Aggregates), want)
			}
			pages = append(pages, list.Aggregates...)
		}
		if msg := diffSummaries(pages, whole.Aggregates); msg != "" {
			t.Errorf("pages of %d must concatenate to the whole list:%s", limit, msg)
		}
	}
	if list := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "alpha", Limit: 0}); len(list.Aggregates) != 0 || list.Total != 7 {
		t.Errorf("ListAggregates with Limit 0: %d aggregates, Total %d; want none and 7", len(list.Aggregates), list.Total)
	}
	if list := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "alpha", Skip: 7, Limit: 5}); len(list.Aggregates) != 0 || list.Total != 7 {
		t.Errorf("ListAggregates with Skip past the end: %d aggregates, Total %d; want none and 7", len(list.Aggregates), list.Total)
	}
}

func testAggregatesFollowSaves(t *testing.T, h *harness) {
	mustSave(t, h, "alpha", "a", evs("Touched", 1), nil)
	mustSave(t, h, "alpha", "b", evs("Touched", 3), nil)
	before := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "alpha", Limit: 10})
	mustSave(t, h, "alpha", "a", evs("Touched", 2), nil)
	if _, err := h.store.SaveAll(t.Context(), "alpha", []eventstore.Batch{
		{AggregateID: "a", Events: evs("Touched", 1)},
		{AggregateID: "b", Events: evs("Touched", 1)},
		{AggregateID: "c", Events: evs("Touched", 1)},
	}); err != nil {
		t.Fatalf("SaveAll: %v", err)
	}
	want := []storage.AggregateSummary{
		summaryOf(mustLoad(t, h, "alpha", "a")), summaryOf(mustLoad(t, h, "alpha", "b")), summaryOf(mustLoad(t, h, "alpha", "c")),
	}
	if want[0].Version != 3 || want[1].Version != 2 {
		t.Fatalf("versions after the saves: a %d, b %d; want 3 and 2", want[0].Version, want[1].Version)
	}
	after := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "alpha", Limit: 10})
	if msg := diffSummaries(after.Aggregates, want); msg != "" {
		t.Errorf("ListAggregates after more saves must report the new versions and times:%s", msg)
	}
	for i, a := range before.Aggregates {
		if i < len(after.Aggregates) && !after.Aggregates[i].CreatedAt.Equal(a.CreatedAt) {
			t.Errorf("ListAggregates: CreatedAt of %q moved from %v to %v with later saves", a.ID, a.CreatedAt, after.Aggregates[i].CreatedAt)
		}
	}
	if after.Total != 3 {
		t.Errorf("ListAggregates after the saves: Total %d, want 3", after.Total)
	}
}

func testAggregatesAfterDelete(t *testing.T, h *harness) {
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c"} {
		mustSave(t, h, "alpha", id, evs("Touched", 1), nil)
		mustSave(t, h, "alpha", id, evs("Touched", 1), nil)
	}
	mustSave(t, h, "beta", "a", evs("Touched", 1), nil)
	if err := h.s.DeleteAggregate(ctx, "alpha", "b"); err != nil {
		t.Fatalf("DeleteAggregate alpha/b: %v", err)
	}
	want := []storage.AggregateSummary{summaryOf(mustLoad(t, h, "alpha", "a")), summaryOf(mustLoad(t, h, "alpha", "c"))}
	list := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "alpha", Limit: 10})
	if msg := diffSummaries(list.Aggregates, want); msg != "" || list.Total != 2 {
		t.Errorf("ListAggregates after deleting alpha/b must list a and c, Total 2 (got %d):%s", list.Total, msg)
	}
	if list := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "alpha", Skip: 1, Limit: 10}); len(list.Aggregates) != 1 || list.Aggregates[0].ID != "c" {
		t.Errorf("ListAggregates Skip 1 after deleting alpha/b must list c alone, got %+v", list.Aggregates)
	}
	mustSave(t, h, "alpha", "b", evs("Touched", 1), nil)
	again := summaryOf(mustLoad(t, h, "alpha", "b"))
	want = []storage.AggregateSummary{want[0], again, want[1]}
	list = mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "alpha", Limit: 10})
	if msg := diffSummaries(list.Aggregates, want); msg != "" || again.Version != 1 {
		t.Errorf("ListAggregates must list an id used again after its deletion from version 1 (it is at %d):%s", again.Version, msg)
	}
	if err := h.s.DeleteAggregateType(ctx, "alpha"); err != nil {
		t.Fatalf("DeleteAggregateType alpha: %v", err)
	}
	if list := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "alpha", Limit: 10}); len(list.Aggregates) != 0 || list.Total != 0 {
		t.Errorf("ListAggregates after DeleteAggregateType: %d aggregates, Total %d; want none", len(list.Aggregates), list.Total)
	}
	if list := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: "beta", Limit: 10}); len(list.Aggregates) != 1 || list.Total != 1 {
		t.Errorf("ListAggregates of beta after deleting alpha: %d aggregates, Total %d; want 1", len(list.Aggregates), list.Total)
	}
}

func testAggregatesUnknown(t *testing.T, h *harness) {
	mustSave(t, h, "alpha", "a", evs("Touched", 1), nil)
	for _, typ := range []string{"beta", "Alpha", "alph"} {
		list := mustListAggregates(t, h, storage.AggregateQuery{AggregateType: typ, Limit: 10})
		if len(list.Aggregates) != 0 || list.Total != 0 {
			t.Errorf("ListAggregates of %q, a type without events: %d aggregates, Total %d; want none", typ, len(list.Aggregates), list.Total)
		}
	}
}

// checkAggregateLists checks that ListAggregates lists exactly the
// aggregates of each type of the feed (byAgg, the feed's events of each
// aggregate), as the invariant check at the end of every subtest.
func checkAggregateLists(ctx context.Context, t *testing.T, s storage.Storage, byAgg map[[2]string][]storage.Event) {
	t.Helper()
	want := make(map[string][]storage.AggregateSummary)
	for k, events := range byAgg {
		want[k[0]] = append(want[k[0]], storage.AggregateSummary{ID: k[1], Version: events[len(events)-1].Version,
			CreatedAt: events[0].RecordedAt, UpdatedAt: events[len(events)-1].RecordedAt})
	}
	for typ, aggs := range want {
		slices.SortFunc(aggs, func(a, b storage.AggregateSummary) int { return strings.Compare(a.ID, b.ID) })
		var got []storage.AggregateSummary
		for skip := 0; ; skip += 1000 {
			list, err := s.ListAggregates(ctx, storage.AggregateQuery{AggregateType: typ, Skip: skip, Limit: 1000})
			if err != nil {
				t.Errorf("invariant check: ListAggregates %q: %v", typ, err)
				return
			}
			if list.Total != int64(len(aggs)) {
				t.Errorf("invariant: ListAggregates of %q must count the %d aggregates of the feed, Total is %d", typ, len(aggs), list.Total)
				return
			}
			got = append(got, list.Aggregates...)
			if len(list.Aggregates) < 1000 || len(got) >= len(aggs) {
				break
			}
		}
		if msg := diffSummaries(got, aggs); msg != "" {
			t.Errorf("invariant: ListAggregates of %q must list the aggregates of the feed by id, with their versions and times:%s", typ, msg)
		}
	}
}
