package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// Tenants and types whose 32-bit hashes (PostgreSQL's hashtext of their
// text, on a little-endian server) are equal: they share their ranges of
// events_type_key and events_recorded_time (schema versions 16 and 17).
const (
	collidingTenantA = "1e6486b9-8863-4402-8e6d-b927bc1824da"
	collidingTenantB = "07951008-eb6f-4fcd-8b1f-79e78fed37e4"
	collidingType1   = "type73649"
	collidingType2   = "type227165"
)

// TestHashCollisionsStaySeparate checks that the reads served by the
// indexes that lead with hashes (a type's feed after a position and after
// a FeedSequence, its head, reads by date, a type's deletion) return and
// touch only the rows of their own tenant and type when another tenant and
// another type have the same hashes and so the same index ranges.
func TestHashCollisionsStaySeparate(t *testing.T) {
	ctx := context.Background()
	var same [2]bool
	if err := testPool(t).QueryRow(ctx, `SELECT hashtext($1::text) = hashtext($2::text), hashtext($3::text) = hashtext($4::text)`,
		collidingTenantA, collidingTenantB, collidingType1, collidingType2).Scan(&same[0], &same[1]); err != nil {
		t.Fatal(err)
	}
	if !same[0] || !same[1] {
		t.Skip("the server's hashtext differs from the one the constants were found with (a big-endian server?)")
	}
	schema := newSchema(t)
	a := openTenant(t, schema, collidingTenantA, nil)
	b := openTenant(t, schema, collidingTenantB, nil)
	start := time.Now().UTC().Truncate(time.Microsecond)
	// Appends alternate between the tenants and the types: tenant A's
	// events of type 1 are every fourth position of the schema.
	var want []int64 // positions of tenant A's events of type 1
	for i := range 8 {
		for _, c := range []struct {
			s   storage.Storage
			typ string
		}{{a, collidingType1}, {a, collidingType2}, {b, collidingType1}, {b, collidingType2}} {
			res, err := c.s.Append(ctx, storage.AppendRequest{AggregateType: c.typ, AggregateID: "x",
				Events: []storage.Event{event("E", "")}})
			if err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
			if c.s == a && c.typ == collidingType1 {
				want = append(want, res.Position)
			}
		}
	}
	check := func(what string, q storage.FeedQuery, want []int64) {
		t.Helper()
		q.AggregateType, q.Limit = collidingType1, 100
		page, err := a.ReadFeed(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var got []int64
		for _, e := range page.Events {
			got = append(got, e.Position)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: positions %v, want %v", what, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%s: positions %v, want %v", what, got, want)
			}
		}
	}
	check("feed", storage.FeedQuery{}, want)
	check("feed after a position", storage.FeedQuery{After: want[2]}, want[3:])
	check("feed after a FeedSequence", storage.FeedQuery{AfterFeedSequence: want[2]}, want[3:])
	check("feed by date", storage.FeedQuery{From: start, To: time.Now().Add(time.Minute)}, want)
	if head, err := a.FeedHead(ctx, collidingType1); err != nil || head != want[len(want)-1] {
		t.Fatalf("head of type 1 in tenant A = %d, %v; want %d", head, err, want[len(want)-1])
	}
	// The feed of all types by date: tenant A's 16 events only.
	page, err := a.ReadFeed(ctx, storage.FeedQuery{From: start, To: time.Now().Add(time.Minute), Limit: 100})
	if err != nil || len(page.Events) != 16 {
		t.Fatalf("tenant A's feed by date: %d events, %v; want 16", len(page.Events), err)
	}
	if err := a.DeleteAggregateType(ctx, collidingType1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    storage.Storage
		typ  string
		want int
	}{{a, collidingType1, 0}, {a, collidingType2, 8}, {b, collidingType1, 8}, {b, collidingType2, 8}} {
		page, err := c.s.ReadFeed(ctx, storage.FeedQuery{AggregateType: c.typ, Limit: 100})
		if err != nil || len(page.Events) != c.want {
			t.Fatalf("after tenant A deleted type 1, %s has %d events, %v; want %d", c.typ, len(page.Events), err, c.want)
		}
	}
}
