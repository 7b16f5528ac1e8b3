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
// EVENTSTORE_POSTGRES_REQUIRED=1. The connection is closed when the test
// ends, after the clean-ups the test registers later (which drop its
// schemas with it).
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
	return admin, url, prefix + hex.EncodeToString(b[:])
}
