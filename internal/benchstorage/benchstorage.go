// Package benchstorage opens the backends that the root and httpapi
// benchmarks compare: memory, SQLite in a temporary directory and
// PostgreSQL in a schema of its own (skipped when PostgreSQL is not
// reachable at EVENTSTORE_POSTGRES_URL or the default local URL).
package benchstorage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/jackc/pgx/v5"
)

// Backend names one backend and opens a fresh, empty instance of it.
type Backend struct {
	Name string
	Open func(tb testing.TB) storage.Storage
}

// All are the backends, in the order benchmarks report them.
var All = []Backend{
	{"memory", func(tb testing.TB) storage.Storage { return memory.New() }},
	{"sqlite", openSQLite},
	{"postgres", openPostgres},
}

func openSQLite(tb testing.TB) storage.Storage {
	s, err := sqlite.Open(filepath.Join(tb.TempDir(), "bench.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// PostgresURL is the database the PostgreSQL benchmarks use.
func PostgresURL() string {
	if u := os.Getenv("EVENTSTORE_POSTGRES_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}

func openPostgres(tb testing.TB) storage.Storage {
	ctx := context.Background()
	schema := fmt.Sprintf("bench_%d", time.Now().UnixNano())
	s, err := postgres.OpenURL(ctx, PostgresURL(), &postgres.Options{Schema: schema})
	if err != nil {
		tb.Skipf("PostgreSQL at %s: %v", PostgresURL(), err)
	}
	tb.Cleanup(func() {
		conn, err := pgx.Connect(ctx, PostgresURL())
		if err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
			_ = conn.Close(ctx)
		}
	})
	return s
}
