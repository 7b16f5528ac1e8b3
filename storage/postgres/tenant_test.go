package postgres_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/storagetest"
)

// openTenant opens tenant of schema on the shared pool, closed when the
// test ends.
func openTenant(tb testing.TB, schema, tenant string, l *postgres.Listener) storage.Storage {
	tb.Helper()
	s, err := postgres.Open(context.Background(), testPool(tb), &postgres.Options{Schema: schema, Tenant: tenant, Listener: l})
	if err != nil {
		tb.Fatalf("open tenant %s: %v", tenant, err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// TestTenantConformance runs the storage contract on tenants of one schema
// whose default data space holds data of its own: every Storage the suite
// asks for is a new tenant of the same schema.
func TestTenantConformance(t *testing.T) {
	schema := newSchema(t)
	other := openIn(t, schema)
	if _, err := other.Append(context.Background(), storage.AppendRequest{AggregateType: "acct", AggregateID: "a-1",
		Events: []storage.Event{event("Opened", `{"n":1}`)}}); err != nil {
		t.Fatal(err)
	}
	storagetest.Run(t, func(tb testing.TB) storage.Storage {
		return openTenant(tb, schema, uuid.NewString(), nil)
	})
}

// TestTenantSpaces: tenants of one schema on one pool and Listener, deleted
// with DeleteTenant, as the server keeps PostgreSQL tenants.
func TestTenantSpaces(t *testing.T) {
	storagetest.RunSpaces(t, func(tb testing.TB) storagetest.Spaces {
		schema := newSchema(tb)
		pool := testPool(tb)
		l := postgres.NewListener(pool)
		tb.Cleanup(func() { _ = l.Close() })
		// A name's tenant id stays the same through a test, so a
		// deleted name opened again is the same tenant.
		ids := map[string]string{}
		id := func(name string) string {
			if ids[name] == "" {
				ids[name] = uuid.NewString()
			}
			return ids[name]
		}
		return storagetest.Spaces{
			Open: func(tb testing.TB, name string) storage.Storage {
				return openTenant(tb, schema, id(name), l)
			},
			Drop: func(tb testing.TB, name string) {
				if err := postgres.DeleteTenant(context.Background(), pool, schema, id(name)); err != nil {
					tb.Errorf("delete tenant %s: %v", name, err)
				}
			},
		}
	})
}

// TestTenantFailsClosed checks the views: a statement that does not set
// the tenant fails instead of reading any tenant's rows, and a row of
// another tenant cannot be written through them.
func TestTenantFailsClosed(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	s := openTenant(t, schema, uuid.NewString(), nil)
	if _, err := s.Append(ctx, storage.AppendRequest{AggregateType: "acct", AggregateID: "a-1",
		Events: []storage.Event{event("Opened", "")}}); err != nil {
		t.Fatal(err)
	}
	pool := testPool(t)
	conn, err := pgx.Connect(ctx, databaseURL()) // a session that never set the tenant
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	q := pgx.Identifier{schema}.Sanitize()
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+q+`.events`).Scan(&n); err == nil {
		t.Errorf("a read without the tenant set counted %d events; want an error", n)
	}
	// Set once in a transaction, the setting is gone after it.
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('eventstore.tenant', $1, true)`, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+q+`.events (position, aggregate_type, aggregate_id, event_id, event_type, version,
	sequence, recorded_at, feed_sequence, tx, tenant) VALUES (1000, 'acct', 'a-2', 'e', 'T', 1, 1, now(), 1000, 0, $1)`, uuid.NewString())
	if err == nil {
		t.Error("a row of another tenant was written through the view")
	}
	_ = tx.Rollback(ctx)
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+q+`.events`).Scan(&n); err == nil {
		t.Errorf("a read after the transaction that set the tenant counted %d events; want an error", n)
	}
}

// TestTenantNotifications checks that WatchAppends of a tenant is woken by
// that tenant's appends only, with a Listener and with a connection of its
// own.
func TestTenantNotifications(t *testing.T) {
	ctx := t.Context()
	schema := newSchema(t)
	for _, shared := range []bool{true, false} {
		var l *postgres.Listener
		if shared {
			l = postgres.NewListener(testPool(t))
			t.Cleanup(func() { _ = l.Close() })
		}
		a, b := openTenant(t, schema, uuid.NewString(), l), openTenant(t, schema, uuid.NewString(), l)
		var woken atomic.Int64
		started := make(chan struct{}, 1)
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- a.(storage.AppendWatcher).WatchAppends(wctx, func() {
				woken.Add(1)
				select {
				case started <- struct{}{}:
				default:
				}
			})
		}()
		<-started
		time.Sleep(100 * time.Millisecond) // the listening connection's first wake-ups
		before := woken.Load()
		for range 5 {
			if _, err := b.Append(ctx, storage.AppendRequest{AggregateType: "acct", AggregateID: uuid.NewString(),
				Events: []storage.Event{event("Opened", "")}}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(200 * time.Millisecond)
		if n := woken.Load() - before; n != 0 {
			t.Errorf("shared listener %v: another tenant's five appends woke the watcher %d times, want 0", shared, n)
		}
		if _, err := a.Append(ctx, storage.AppendRequest{AggregateType: "acct", AggregateID: uuid.NewString(),
			Events: []storage.Event{event("Opened", "")}}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for woken.Load() == before && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if woken.Load() == before {
			t.Errorf("shared listener %v: the tenant's own append did not wake its watcher", shared)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchAppends: %v", err)
		}
	}
}

// TestImportTenant moves a store kept in a schema of its own (as tenants
// were before schema version 8) into a tenant of another schema.
func TestImportTenant(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	old, project := newSchema(t), newSchema(t)
	tenant := uuid.NewString()
	src := openIn(t, old)
	var last storage.AppendResult
	for i := range 3 {
		res, err := src.Append(ctx, storage.AppendRequest{AggregateType: "acct", AggregateID: "a-1",
			ExpectedVersion: storage.ExpectVersion(int64(i)), Events: []storage.Event{event("Deposited", `{"n":1}`)}})
		if err != nil {
			t.Fatal(err)
		}
		last = res
	}
	if err := src.CreateDefinition(ctx, storage.DefinitionRecord{Name: "p", Spec: []byte(`{}`), CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := src.CommitProjection(ctx, storage.ProjectionCommit{Name: "p", From: 0, To: last.Position,
		States: []storage.ProjectionState{{Name: "p", InstanceID: "a-1", Data: []byte(`{"n":3}`), Position: last.Position,
			CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}}}); err != nil {
		t.Fatal(err)
	}
	_ = src.Close()
	// The project's own data stays its own.
	own := openIn(t, project)
	if _, err := own.Append(ctx, storage.AppendRequest{AggregateType: "acct", AggregateID: "a-1",
		Events: []storage.Event{event("Opened", "")}}); err != nil {
		t.Fatal(err)
	}

	opts := &postgres.Options{Schema: project, Tenant: tenant}
	if err := postgres.ImportTenant(ctx, pool, old, opts); err != nil {
		t.Fatalf("import: %v", err)
	}
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, old).Scan(&exists); err != nil || exists {
		t.Errorf("the imported schema exists after the import: %v, %v", exists, err)
	}
	s := openTenant(t, project, tenant, nil)
	agg, err := s.Load(ctx, storage.LoadQuery{AggregateType: "acct", AggregateID: "a-1"})
	if err != nil || agg.Version != 3 || len(agg.Events) != 3 || agg.Events[2].Position != last.Position {
		t.Fatalf("imported aggregate = %+v, %v; want version 3 ending at position %d", agg, err, last.Position)
	}
	st, err := s.LoadProjection(ctx, "p", "a-1")
	if err != nil || string(st.Data) != `{"n":3}` {
		t.Errorf("imported projection state = %+v, %v", st, err)
	}
	res, err := s.Append(ctx, storage.AppendRequest{AggregateType: "acct", AggregateID: "a-1",
		ExpectedVersion: storage.ExpectVersion(3), Events: []storage.Event{event("Deposited", "")}})
	if err != nil || res.Position <= last.Position || res.Version != 4 {
		t.Errorf("append after the import = %+v, %v; want version 4 above position %d", res, err, last.Position)
	}
	ownAgg, err := own.Load(ctx, storage.LoadQuery{AggregateType: "acct", AggregateID: "a-1"})
	if err != nil || ownAgg.Version != 1 {
		t.Errorf("the project's own aggregate after the import = %+v, %v; want version 1", ownAgg, err)
	}
	// Nothing to import is no error; a tenant with data refuses one.
	if err := postgres.ImportTenant(ctx, pool, old, opts); err != nil {
		t.Errorf("import of a schema that is gone: %v, want nil", err)
	}
	again := newSchema(t)
	openIn(t, again).Close()
	if err := postgres.ImportTenant(ctx, pool, again, opts); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("import into a tenant with data: %v, want ErrConflict", err)
	}
	if err := postgres.ImportTenant(ctx, pool, again, &postgres.Options{Schema: project}); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("import without a tenant: %v, want ErrInvalid", err)
	}
}

// TestTenantInvalid checks the refusals of a tenant that is not a UUID.
func TestTenantInvalid(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	if _, err := postgres.Open(ctx, pool, &postgres.Options{Schema: newSchema(t), Tenant: "acme"}); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("Open with tenant \"acme\": %v, want ErrInvalid", err)
	}
	for _, tenant := range []string{"acme", "", postgres.DefaultTenant} {
		if err := postgres.DeleteTenant(ctx, pool, "x", tenant); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("DeleteTenant(%q): %v, want ErrInvalid", tenant, err)
		}
	}
	if err := postgres.DeleteTenant(ctx, pool, newSchema(t), uuid.NewString()); err != nil {
		t.Errorf("DeleteTenant in a schema without tables: %v, want nil", err)
	}
}
