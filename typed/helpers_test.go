package typed_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// backend opens n Stores on one fresh store of its kind: n > 1 Stores are
// separate clients of one database, as separate processes would be (the
// memory and SQLite backends share one Store, which their single writer
// serialises anyway).
type backend struct {
	name string
	open func(t *testing.T, n int) []*eventstore.Store
}

var backends = []backend{
	{"memory", func(t *testing.T, n int) []*eventstore.Store {
		return repeat(n, mustStore(t, memory.New()))
	}},
	{"sqlite", func(t *testing.T, n int) []*eventstore.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "es.db"), nil)
		require.NoError(t, err)
		return repeat(n, mustStore(t, s))
	}},
	{"postgres", openPostgres},
}

func repeat(n int, st *eventstore.Store) []*eventstore.Store {
	out := make([]*eventstore.Store, n)
	for i := range out {
		out[i] = st
	}
	return out
}

func mustStore(t *testing.T, s storage.Storage) *eventstore.Store {
	t.Helper()
	st, err := eventstore.New(s, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

var schemas atomic.Int64

// openPostgres opens n Stores, each with its own pool, on a fresh schema
// of EVENTSTORE_POSTGRES_URL (default a local test database), dropped at
// the end; it skips when PostgreSQL is unreachable, unless
// EVENTSTORE_POSTGRES_REQUIRED=1.
func openPostgres(t *testing.T, n int) []*eventstore.Store {
	stores, _ := openPostgresSchema(t, n)
	return stores
}

// openPostgresSchema is openPostgres that also returns the schema's name.
func openPostgresSchema(t *testing.T, n int) ([]*eventstore.Store, string) {
	url := postgresURL()
	schema := fmt.Sprintf("es_typed_test_%d_%d", os.Getpid(), schemas.Add(1))
	t.Cleanup(func() {
		if conn, err := pgx.Connect(context.Background(), url); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	out := make([]*eventstore.Store, n)
	for i := range out {
		s, err := postgres.OpenURL(context.Background(), url, &postgres.Options{Schema: schema})
		if err != nil {
			if os.Getenv("EVENTSTORE_POSTGRES_REQUIRED") == "1" {
				t.Fatal(err)
			}
			t.Skipf("PostgreSQL unreachable: %v", err)
		}
		out[i] = mustStore(t, s)
	}
	return out, schema
}

// postgresURL is EVENTSTORE_POSTGRES_URL, or the local test database.
func postgresURL() string {
	if url := os.Getenv("EVENTSTORE_POSTGRES_URL"); url != "" {
		return url
	}
	return "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
}
