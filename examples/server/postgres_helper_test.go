package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// postgresAdmin connects to the test database (EVENTSTORE_POSTGRES_URL, else
// the local default) for a test that runs servers on PostgreSQL, and returns
// the connection, the URL and a fresh schema name starting with prefix. It
// skips the test when PostgreSQL is unreachable, or fails it when
// EVENTSTORE_POSTGRES_REQUIRED=1. When the test ends, after the clean-ups
// it registers later, every schema whose name starts with the one returned
// is dropped (the servers' derived schemas too), then the connection is
// closed.
func postgresAdmin(t *testing.T, prefix string) (admin *pgx.Conn, url, schema string) {
	t.Helper()
	url = os.Getenv("EVENTSTORE_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		if os.Getenv("EVENTSTORE_POSTGRES_REQUIRED") == "1" {
			t.Fatal(err)
		}
		t.Skipf("PostgreSQL unreachable: %v", err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema = prefix + hex.EncodeToString(b[:])
	// After the test's own clean-up (its servers stopped): drop every
	// schema named after this one, those the servers derived from it
	// included (SCHEMA+tenants, SCHEMA_project, SCHEMA_project+tenants).
	t.Cleanup(func() { dropSchemasLike(t, admin, schema) })
	return admin, url, schema
}

// dropSchemasLike drops every schema whose name starts with name.
func dropSchemasLike(t *testing.T, admin *pgx.Conn, name string) {
	t.Helper()
	ctx := context.Background()
	rows, err := admin.Query(ctx, `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, name)
	if err != nil {
		t.Errorf("list the test's schemas: %v", err)
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Errorf("list the test's schemas: %v", err)
		return
	}
	for _, n := range names {
		if _, err := admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{n}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", n, err)
		}
	}
}
