package postgres_test

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestPgDumpRestore dumps a store's schema with pg_dump while it holds
// events of two types, a tenant's events and a projection, restores it
// with pg_restore into another database, then renames the restored schema:
// each copy serves the same feeds (positions, FeedSequences, a type's feed
// read from a cursor taken on the original), the projection's checkpoint
// and state, and gives new saves positions after every restored one.
func TestPgDumpRestore(t *testing.T) {
	for _, tool := range []string{"pg_dump", "pg_restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (Debian: the postgresql-client package): %v", tool, err)
		}
	}
	src, err := url.Parse(databaseURL())
	if err != nil || src.Scheme == "" {
		t.Skipf("EVENTSTORE_POSTGRES_URL is not a URL (%v); this test needs one", err)
	}
	ctx := context.Background()
	pool := testPool(t)
	schema := newSchema(t)
	tenant := uuid.NewString()
	s, err := postgres.Open(ctx, pool, &postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventstore.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	if err := p.Create(ctx, eventstore.Definition{Name: "totals", Feed: "order", Aggregated: true, Handlers: []eventstore.Handler{{
		EventType: "Placed", Functions: []eventstore.Function{{Name: "inc", TargetSelector: "$.projection.orders"}},
	}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		typ := []string{"order", "payment"}[i%2]
		if _, err := st.Save(ctx, typ, fmt.Sprintf("%s-%d", typ, i%4), []eventstore.NewEvent{
			{ID: uuid.NewString(), Type: "Placed", Data: []byte(`{"i":1}`)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ts, err := postgres.Open(ctx, pool, &postgres.Options{Schema: schema, Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.Append(ctx, storage.AppendRequest{AggregateType: "order", AggregateID: "t-1", Events: []storage.Event{event("Placed", "")}}); err != nil {
		t.Fatal(err)
	}
	_ = ts.Close()
	total, err := p.Aggregated(ctx, "totals") // read your writes: the projector has caught up
	if err != nil {
		t.Fatal(err)
	}
	want := feedOf(t, s, "")
	wantOrders := feedOf(t, s, "order")
	cursor := wantOrders[len(wantOrders)/2].FeedSequence
	def, err := s.Definition(ctx, "totals")
	if err != nil || def.Checkpoint == 0 {
		t.Fatalf("definition = %+v, %v; want a checkpoint", def, err)
	}

	dump := filepath.Join(t.TempDir(), "store.dump")
	if out, err := exec.Command("pg_dump", "-Fc", "-n", schema, "-f", dump, databaseURL()).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	db := "es_restore_" + uuid.NewString()[:8]
	if _, err := pool.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	dst := *src
	dst.Path = "/" + db
	other, err := pgxpool.New(ctx, dst.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		other.Close()
		if _, err := pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", db, err)
		}
	})
	if out, err := exec.Command("pg_restore", "--no-owner", "-d", dst.String(), dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}

	check := func(where, schema string) {
		t.Helper()
		r, err := postgres.Open(ctx, other, &postgres.Options{Schema: schema, NoMigrate: true})
		if err != nil {
			t.Fatalf("%s: open the restored schema: %v", where, err)
		}
		defer r.Close()
		sameEvents(t, where+": feed", restored(feedOf(t, r, "")), want)
		sameEvents(t, where+": order feed", restored(feedOf(t, r, "order")), wantOrders)
		page, err := r.ReadFeed(ctx, storage.FeedQuery{AggregateType: "order", AfterFeedSequence: cursor, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var after []storage.Event
		for _, e := range wantOrders {
			if e.FeedSequence > cursor {
				after = append(after, e)
			}
		}
		sameEvents(t, where+": order feed after a cursor of the original", restored(page.Events), after)
		rdef, err := r.Definition(ctx, "totals")
		if err != nil || rdef.Checkpoint != def.Checkpoint {
			t.Errorf("%s: definition = %+v, %v; want checkpoint %d", where, rdef, err, def.Checkpoint)
		}
		state, err := r.LoadProjection(ctx, "totals", "")
		if err != nil || string(state.Data) != string(total.Data) {
			t.Errorf("%s: projection = %s, %v; want %s", where, state.Data, err, total.Data)
		}
		tr, err := postgres.Open(ctx, other, &postgres.Options{Schema: schema, Tenant: tenant, NoMigrate: true})
		if err != nil {
			t.Fatal(err)
		}
		if agg, err := tr.Load(ctx, storage.LoadQuery{AggregateType: "order", AggregateID: "t-1"}); err != nil || len(agg.Events) != 1 {
			t.Errorf("%s: the tenant's aggregate = %+v, %v; want its event", where, agg, err)
		}
		_ = tr.Close()
		res, err := r.Append(ctx, storage.AppendRequest{AggregateType: "order", AggregateID: "new-" + where, Events: []storage.Event{event("Placed", "")}})
		if err != nil || res.Position <= want[len(want)-1].Position {
			t.Errorf("%s: a save after the restore = %+v, %v; want a position after %d", where, res, err, want[len(want)-1].Position)
		}
	}
	check("another database", schema)
	if _, err := other.Exec(ctx, "ALTER SCHEMA "+pgx.Identifier{schema}.Sanitize()+" RENAME TO "+pgx.Identifier{schema + "_copy"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	check("another schema", schema+"_copy")
}

// restored returns events without those saved after the restore (on
// aggregates "new-...").
func restored(events []storage.Event) []storage.Event {
	var out []storage.Event
	for _, e := range events {
		if !strings.HasPrefix(e.AggregateID, "new-") {
			out = append(out, e)
		}
	}
	return out
}

// feedOf returns the whole feed of typ ("" for all) of s.
func feedOf(t *testing.T, s storage.Storage, typ string) []storage.Event {
	t.Helper()
	var all []storage.Event
	for after := int64(0); ; {
		page, err := s.ReadFeed(context.Background(), storage.FeedQuery{AggregateType: typ, After: after, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) == 0 {
			return all
		}
		all = append(all, page.Events...)
		after = page.Events[len(page.Events)-1].Position
	}
}

// sameEvents checks that got and want are the same events at the same
// positions and FeedSequences, recorded at the same times.
func sameEvents(t *testing.T, what string, got, want []storage.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d events, want %d", what, len(got), len(want))
		return
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Position != w.Position || g.FeedSequence != w.FeedSequence || g.Version != w.Version ||
			!g.RecordedAt.Equal(w.RecordedAt) || string(g.Data) != string(w.Data) {
			t.Errorf("%s: event %d = %s at %d (feed sequence %d), want %s at %d (%d)", what, i, g.ID, g.Position, g.FeedSequence, w.ID, w.Position, w.FeedSequence)
			return
		}
	}
}
