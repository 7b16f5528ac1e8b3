package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore/internal/upgrade"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// withMigration returns migrations and one more of kind, as a newer
// program knows them.
func withMigration(kind upgrade.Kind, sql string) []migration {
	return append(migrations[:len(migrations):len(migrations)], migration{kind, sql})
}

// schemaVersion returns the version of the schema quoted.
func schemaVersion(t *testing.T, s *store, quoted string) int {
	t.Helper()
	var v int
	if err := s.pool.QueryRow(context.Background(), qualify(quoted, `SELECT max(version) FROM {{schema}}.schema_migrations`)).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// processRows returns the rows of the processes table: pid and version.
func processRows(t *testing.T, s *store, quoted string) []string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), qualify(quoted, `SELECT pid, version FROM {{schema}}.processes ORDER BY pid, version`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var pid, version int32
		err := r.Scan(&pid, &version)
		return fmt.Sprintf("%d@%d", pid, version), err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestHeartbeatOnePerPoolAndSchema checks that the Storages of a process on
// one pool and schema (the schema's own and its tenants') share one row of
// the processes table, at this package's version, which the last Close
// deletes.
func TestHeartbeatOnePerPoolAndSchema(t *testing.T) {
	s, quoted := openBatchTestSchema(t)
	schema := quoted[1 : len(quoted)-1]
	ctx := context.Background()
	self := fmt.Sprintf("%d@%d", os.Getpid(), len(migrations))
	if got := processRows(t, s, quoted); len(got) != 1 || got[0] != self {
		t.Fatalf("processes after Open = %v, want [%s]", got, self)
	}
	var tenants []*store
	for range 3 {
		ts, err := open(ctx, s.pool, &Options{Schema: schema, Tenant: uuid.NewString()})
		if err != nil {
			t.Fatal(err)
		}
		tenants = append(tenants, ts)
	}
	if got := processRows(t, s, quoted); len(got) != 1 {
		t.Fatalf("processes with 4 Storages of one pool open = %v, want one row", got)
	}
	for _, ts := range tenants {
		_ = ts.Close()
	}
	if got := processRows(t, s, quoted); len(got) != 1 {
		t.Fatalf("processes with 1 of 4 Storages still open = %v, want one row", got)
	}
	// Another pool (as a server's tenants have) is a row of its own.
	other, err := open(ctx, newTestPool(t), &Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if got := processRows(t, s, quoted); len(got) != 2 {
		t.Errorf("processes with Storages on two pools = %v, want two rows", got)
	}
	_ = other.Close()
	probe := s.pool
	_ = s.Close()
	var n int
	if err := probe.QueryRow(ctx, qualify(quoted, `SELECT count(*) FROM {{schema}}.processes`)).Scan(&n); err != nil || n != 0 {
		t.Errorf("processes after every Close = %d rows, %v; want none", n, err)
	}
}

// TestContractMigrationRefusedBesideOlder plays a newer program: its
// contract migration refuses to run while this package's process (one
// version older) is live, naming it, and runs once the older process's row
// has expired; an expand migration runs beside it.
func TestContractMigrationRefusedBesideOlder(t *testing.T) {
	s, quoted := openBatchTestSchema(t)
	schema := quoted[1 : len(quoted)-1]
	ctx := context.Background()
	v := len(migrations)

	expand := withMigration(upgrade.Expand, `CREATE TABLE {{schema}}.upgrade_expand (x int);`)
	from, to, err := Migrate(ctx, s.pool, &Options{Schema: schema, testMigrations: expand})
	if err != nil || from != v || to != v+1 {
		t.Fatalf("expand migration beside a live process of version %d = %d→%d, %v; want %d→%d", v, from, to, err, v, v+1)
	}
	contract := append(expand[:len(expand):len(expand)], migration{upgrade.Contract, `CREATE TABLE {{schema}}.upgrade_contract (x int);`})
	from, to, err = Migrate(ctx, s.pool, &Options{Schema: schema, testMigrations: contract})
	if !errors.Is(err, storage.ErrSchemaVersion) || from != v+1 || to != v+1 {
		t.Fatalf("contract migration beside a live process of version %d = %d→%d, %v; want a refusal wrapping ErrSchemaVersion", v, from, to, err)
	}
	host, _ := os.Hostname()
	for _, want := range []string{fmt.Sprintf("migration %d", v+2), "host " + host, fmt.Sprintf("pid %d", os.Getpid()),
		fmt.Sprintf("schema version %d", v), "last seen "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if got := schemaVersion(t, s, quoted); got != v+1 {
		t.Errorf("schema version after the refusal = %d, want %d", got, v+1)
	}
	// Opening a Storage as the newer program is refused the same way.
	if _, err := open(ctx, s.pool, &Options{Schema: schema, testMigrations: contract}); !errors.Is(err, storage.ErrSchemaVersion) {
		t.Errorf("Open of the newer program beside the older one = %v, want ErrSchemaVersion", err)
	}
	// The older process stops refreshing its row (killed): once the row is
	// older than HeartbeatTimeout the migration runs.
	if _, err := s.pool.Exec(ctx, qualify(quoted, `UPDATE {{schema}}.processes SET last_seen = now() - make_interval(secs => $1)`),
		HeartbeatTimeout.Seconds()+1); err != nil {
		t.Fatal(err)
	}
	if from, to, err := Migrate(ctx, s.pool, &Options{Schema: schema, testMigrations: contract}); err != nil || to != v+2 {
		t.Fatalf("contract migration once the older process's row expired = %d→%d, %v; want →%d", from, to, err, v+2)
	}
	// And the older program refuses the newer schema.
	if _, err := open(ctx, s.pool, &Options{Schema: schema}); !errors.Is(err, storage.ErrSchemaVersion) || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open of the older program on the newer schema = %v, want ErrSchemaVersion saying newer", err)
	}
}

// TestNoMigrate checks that Options.NoMigrate refuses an older schema and a
// missing one, changing nothing, and opens a current one.
func TestNoMigrate(t *testing.T) {
	s, quoted := openBatchTestSchema(t)
	schema := quoted[1 : len(quoted)-1]
	ctx := context.Background()
	newer := withMigration(upgrade.Expand, `CREATE TABLE {{schema}}.upgrade_expand (x int);`)
	_, err := open(ctx, s.pool, &Options{Schema: schema, NoMigrate: true, testMigrations: newer})
	if !errors.Is(err, storage.ErrSchemaVersion) || !strings.Contains(err.Error(), "older") {
		t.Fatalf("NoMigrate Open of an older schema = %v, want ErrSchemaVersion saying older", err)
	}
	if got := schemaVersion(t, s, quoted); got != len(migrations) {
		t.Errorf("schema version after a NoMigrate Open = %d, want %d", got, len(migrations))
	}
	cur, err := open(ctx, s.pool, &Options{Schema: schema, NoMigrate: true})
	if err != nil {
		t.Fatalf("NoMigrate Open of a current schema: %v", err)
	}
	_ = cur.Close()
	missing := schema + "_missing"
	t.Cleanup(func() {
		_, _ = s.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{missing}.Sanitize()+" CASCADE")
	})
	if _, err := open(ctx, s.pool, &Options{Schema: missing, NoMigrate: true}); !errors.Is(err, storage.ErrSchemaVersion) {
		t.Errorf("NoMigrate Open of a missing schema = %v, want ErrSchemaVersion", err)
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, missing).Scan(&exists); err != nil || exists {
		t.Errorf("NoMigrate Open created the schema (%v, %v)", exists, err)
	}
}

// newTestPool returns a new pool on the test database, closed after
// the test.
func newTestPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv("EVENTSTORE_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
