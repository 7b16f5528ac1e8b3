package main

import (
	"context"
	"errors"
	"flag"

	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/jackc/pgx/v5/pgxpool"
)

// listenURLConfig is the -postgres-listen-url flag: the direct connection
// string for notifications when -storage goes through a pooler in
// transaction mode (postgres.Options.ListenURL).
type listenURLConfig struct {
	url string
}

func (c *listenURLConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "postgres-listen-url", "", "direct PostgreSQL URL to the primary for notifications (LISTEN) between server processes, "+
		"needed when -storage goes through a pooler in transaction mode (PgBouncer pool_mode = transaction), which the server detects "+
		"and refuses without it; list every host with target_session_attrs=read-write as in -storage")
}

// check refuses the flag without a postgres:// -storage.
func (c *listenURLConfig) check(spec string) error {
	if c.url == "" {
		return nil
	}
	if storageName(spec) != "postgres" {
		return errors.New("-postgres-listen-url needs a postgres:// -storage")
	}
	if storageName(c.url) != "postgres" {
		return errors.New(`-postgres-listen-url must be a "postgres://..." URL`)
	}
	if _, err := pgxpool.ParseConfig(c.url); err != nil {
		return errors.New("-postgres-listen-url: the URL does not parse") // it may hold a password: not quoted
	}
	return nil
}

// tenantListener returns the Listener of the tenants of a project on
// pool: on a pool of its own to the -postgres-listen-url server when the
// flag is set (that pool opens no connection but the Listener's and its
// wake-ups'), else on pool. release closes what it opened.
func (c *listenURLConfig) tenantListener(ctx context.Context, pool *pgxpool.Pool) (l *postgres.Listener, release func(), err error) {
	if c.url == "" {
		l = postgres.NewListener(pool)
		return l, func() { _ = l.Close() }, nil
	}
	cfg, err := pgxpool.ParseConfig(c.url)
	if err != nil {
		return nil, nil, errors.New("-postgres-listen-url: the URL does not parse")
	}
	cfg.MaxConns = 2
	postgres.Configure(cfg)
	lp, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, errors.New("open the pool of -postgres-listen-url")
	}
	l = postgres.NewListener(lp)
	return l, func() { _ = l.Close(); lp.Close() }, nil
}
