package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/eventkit-go/eventstore/tenancy"
)

// tenantStorage derives the storages of a project's tenants from the
// project's own (spec and schema, as projectStorage returns them). '+'
// separates the tenant part: project names cannot hold it, so no project's
// storage is ever a tenant's or a registry's.
//
//   - memory: a memory store per tenant and for the registry.
//   - sqlite:DIR/BASE.EXT: the registry DIR/BASE+tenants.EXT, tenant ID
//     DIR/BASE+t-ID.EXT (with its -wal and -shm files).
//   - postgres: the registry schema SCHEMA+tenants; tenant ID the tenant
//     ID of the project's schema (postgres.Options.Tenant: the tenants
//     share the project's tables, see docs/tenants-postgres.md). Tenants
//     kept by earlier versions in a schema each (SCHEMA+t followed by the
//     32 hexadecimal digits of ID, or, when that is longer than 63 bytes,
//     "t+" and 40 digits of a SHA-256 of both) are moved into the
//     project's tables when first opened (postgres.ImportTenant). The
//     registry and every tenant share one pool and one LISTEN connection
//     (pool, listener), so that a project holds a bounded number of
//     connections however many tenants are open: a pool per tenant would
//     need ten connections each, and PostgreSQL allows 100 by default.
type tenantStorage struct {
	spec, schema string
	noMigrate    bool               // -no-migrate
	pool         *pgxpool.Pool      // postgres only
	listener     *postgres.Listener // postgres only
}

// tenantSQLite are the SQLite options of a tenant's file: a page cache of
// 512 KiB per connection instead of 2 MiB (a thousand open tenants' five
// connections each would otherwise cache up to 10 GiB), and a checkpoint
// every 64 pages instead of 1,000, which bounds each tenant's log to about
// 256 KiB on disk instead of 4 MiB and brings a tenant that starts saving
// sooner to the steady state where its log is overwritten in place: a
// commit that grows the log makes the file system sync its metadata too,
// which cost the round-robin benchmark (tenancy/bench_test.go) a quarter
// of its rate.
var tenantSQLite = sqlite.Options{CacheKiB: 512, CheckpointPages: 64}

// kind returns "memory", "sqlite" or "postgres".
func (ts tenantStorage) kind() string {
	switch {
	case strings.HasPrefix(ts.spec, "sqlite:"):
		return "sqlite"
	case strings.HasPrefix(ts.spec, "postgres://"), strings.HasPrefix(ts.spec, "postgresql://"):
		return "postgres"
	}
	return "memory"
}

// sqlitePath returns the project's file with suffix before its extension.
func (ts tenantStorage) sqlitePath(suffix string) string {
	path := strings.TrimPrefix(ts.spec, "sqlite:")
	ext := filepath.Ext(path)
	if filepath.Base(path) == ext {
		ext = ""
	}
	return strings.TrimSuffix(path, ext) + suffix + ext
}

// registrySchema returns the PostgreSQL schema of the registry.
func (ts tenantStorage) registrySchema() string {
	s := ts.schema + "+tenants"
	if len(s) > maxSchemaLen {
		sum := sha256.Sum256([]byte(ts.schema))
		s = "r+" + hex.EncodeToString(sum[:20])
	}
	return s
}

// tenantSchema returns the PostgreSQL schema in which versions before
// schema version 8 kept tenant id.
func (ts tenantStorage) tenantSchema(id string) string {
	s := ts.schema + "+t" + strings.ReplaceAll(id, "-", "")
	if len(s) > maxSchemaLen {
		sum := sha256.Sum256([]byte(ts.schema + "\x00" + id))
		s = "t+" + hex.EncodeToString(sum[:20])
	}
	return s
}

// registry opens the storage of the tenant registry.
func (ts tenantStorage) registry(ctx context.Context) (storage.Storage, error) {
	switch ts.kind() {
	case "sqlite":
		return openStorage(ctx, "sqlite:"+ts.sqlitePath("+tenants"), "", ts.noMigrate, nil, "")
	case "postgres":
		return postgres.Open(ctx, ts.pool, &postgres.Options{Schema: ts.registrySchema(), Listener: ts.listener, NoMigrate: ts.noMigrate})
	}
	return memory.New(), nil
}

// open opens the storage of tenant id, creating it when missing.
func (ts tenantStorage) open(ctx context.Context, id string) (storage.Storage, error) {
	switch ts.kind() {
	case "sqlite":
		opts := tenantSQLite
		// A new tenant's file is created whatever -no-migrate says: it
		// is of this binary's version from the start.
		if _, err := os.Stat(ts.sqlitePath("+t-" + id)); err == nil {
			opts.NoMigrate = ts.noMigrate
		}
		return sqlite.Open(ts.sqlitePath("+t-"+id), &opts)
	case "postgres":
		opts := &postgres.Options{Schema: ts.schema, Tenant: id, Listener: ts.listener, NoMigrate: ts.noMigrate}
		if err := postgres.ImportTenant(ctx, ts.pool, ts.tenantSchema(id), opts); err != nil {
			return nil, err
		}
		return postgres.Open(ctx, ts.pool, opts)
	}
	return memory.New(), nil
}

// remove deletes the storage of tenant id: its SQLite files or its rows in
// the project's PostgreSQL tables (and a schema of it an earlier version
// kept). Nothing to delete is no error.
func (ts tenantStorage) remove(ctx context.Context, id string) error {
	switch ts.kind() {
	case "sqlite":
		path := ts.sqlitePath("+t-" + id)
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	case "postgres":
		if err := postgres.DeleteTenant(ctx, ts.pool, ts.schema, id); err != nil {
			return err
		}
		if _, err := ts.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{ts.tenantSchema(id)}.Sanitize()+" CASCADE"); err != nil {
			return fmt.Errorf("drop schema: %w", err)
		}
	}
	return nil
}

// openTenants opens the tenants of the project whose storage is spec and
// schema and whose definitions are those of proj; deleted is called with
// the id of each tenant deleted. Call release after closing the Set: it
// closes what the tenants share.
func openTenants(ctx context.Context, spec, schema string, proj *eventstore.Projector, rx *reactions.Engine, cfg *config, log *slog.Logger, metrics eventstore.Metrics, deleted func(id string)) (set *tenancy.Set, release func(), err error) {
	if schema == "" {
		schema = postgres.DefaultSchema
	}
	ts := tenantStorage{spec: spec, schema: schema, noMigrate: cfg.upgrade.noMigrate}
	release = func() {}
	if ts.kind() == "postgres" {
		pcfg, err := pgxpool.ParseConfig(spec)
		if err != nil {
			return nil, nil, errors.New("parse the PostgreSQL URL for the tenants' pool") // the error may hold the URL's password
		}
		if !strings.Contains(spec, "pool_max_conns") {
			pcfg.MaxConns = postgres.DefaultPoolConns
		}
		// As postgres.OpenURL does: the feed reads need READ COMMITTED
		// whatever the server's default (postgres.Open refuses others).
		pcfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "read committed"
		pcfg.ConnConfig.Tracer = postgres.NewTracer(nil) // statement spans when tracing is on
		// As OpenURL does: connect and keepalive defaults, and the notice
		// handler that makes a cancelled synchronous commit an unknown
		// outcome instead of an acknowledged save.
		postgres.Configure(pcfg)
		if ts.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
			return nil, nil, errors.New("open the tenants' PostgreSQL pool")
		}
		var closeListener func()
		if ts.listener, closeListener, err = cfg.listen.tenantListener(ctx, ts.pool); err != nil {
			ts.pool.Close()
			return nil, nil, err
		}
		release = func() {
			closeListener()
			ts.pool.Close()
		}
	}
	reg, err := ts.registry(ctx)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("open the tenant registry: %w", err)
	}
	set, err = tenancy.New(ctx, tenancy.Options{
		Registry:    reg,
		Open:        ts.open,
		Remove:      ts.remove,
		Definitions: proj,
		Reactions:   rx,
		Store:       &eventstore.Options{Logger: log, Metrics: metrics},
		Projector:   &cfg.projector,
		Logger:      log,
		Deleted:     deleted,
	})
	if err != nil {
		_ = reg.Close()
		release()
		return nil, nil, err
	}
	return set, release, nil
}
