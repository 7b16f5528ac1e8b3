package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/sqlite"
)

// upgradeConfig holds the flags of schema upgrades (docs/upgrades.md).
type upgradeConfig struct {
	migrateOnly bool // -migrate-only: migrate every storage, then exit
	noMigrate   bool // -no-migrate: refuse a schema older than this binary's
}

func (c *upgradeConfig) flags(fs *flag.FlagSet) {
	fs.BoolVar(&c.migrateOnly, "migrate-only", false, "create or migrate the schema of every storage the server would open "+
		"(each project's, its tenant registry's and, with SQLite, every tenant file) and exit: the deploy step before a rolling restart; "+
		"a migration that processes of an older version cannot run beside refuses while one is live, naming it (docs/upgrades.md)")
	fs.BoolVar(&c.noMigrate, "no-migrate", false, "refuse to start on a schema older than this binary's (or none) instead of migrating it: "+
		"for processes started after -migrate-only")
}

func (c *upgradeConfig) check() error {
	if c.migrateOnly && c.noMigrate {
		return errors.New("-migrate-only and -no-migrate: use one of them")
	}
	return nil
}

// migrateOnly creates or migrates the schema of every storage the server
// would open with cfg, printing a line per storage to stdout.
func migrateOnly(ctx context.Context, cfg *config, stdout io.Writer) error {
	schema, err := postgresSchema(cfg.storage, cfg.ops.postgresSchema)
	if err != nil {
		return err
	}
	names := []string{""}
	if cfg.keysFile != "" {
		names = names[:0]
		for _, p := range cfg.projects {
			names = append(names, p.name)
		}
	}
	if storageName(cfg.storage) == "postgres" {
		pool, err := pgxpool.New(ctx, cfg.storage)
		if err != nil {
			return errors.New("connect to PostgreSQL: the URL does not parse") // the error may hold the URL's password
		}
		defer pool.Close()
		for _, name := range names {
			_, schema, err := projectStorage(cfg.storage, schema, name)
			if err != nil {
				return err
			}
			if schema == "" {
				schema = postgres.DefaultSchema
			}
			ts := tenantStorage{spec: cfg.storage, schema: schema}
			for _, s := range []string{schema, ts.registrySchema()} {
				from, to, err := postgres.Migrate(ctx, pool, &postgres.Options{Schema: s})
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "schema %s: version %d → %d\n", s, from, to)
			}
		}
		return nil
	}
	if storageName(cfg.storage) != "sqlite" {
		fmt.Fprintln(stdout, "-storage memory: nothing to migrate")
		return nil
	}
	for _, name := range names {
		spec, _, err := projectStorage(cfg.storage, schema, name)
		if err != nil {
			return err
		}
		ts := tenantStorage{spec: spec}
		files := []string{strings.TrimPrefix(spec, "sqlite:"), ts.sqlitePath("+tenants")}
		tenants, err := tenantFiles(ts)
		if err != nil {
			return err
		}
		files = append(files, tenants...)
		for _, f := range files {
			from, to, err := sqlite.Migrate(ctx, f, nil)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "file %s: version %d → %d\n", f, from, to)
		}
	}
	return nil
}

// globEscape escapes the characters filepath.Match gives a meaning to.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`).Replace(s)
}
