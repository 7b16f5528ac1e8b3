package archive_test

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

// backend opens a fresh, empty Store of its kind, closed at the end.
type backend struct {
	name string
	open func(t *testing.T) *eventstore.Store
}

var (
	memoryBackend = backend{"memory", func(t *testing.T) *eventstore.Store { return mustStore(t, memory.New()) }}
	sqliteBackend = backend{"sqlite", func(t *testing.T) *eventstore.Store {
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "es.db"), nil)
		require.NoError(t, err)
		return mustStore(t, s)
	}}
	postgresBackend = backend{"postgres", openPostgres}
)

func mustStore(t *testing.T, s storage.Storage) *eventstore.Store {
	t.Helper()
	st, err := eventstore.New(s, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

var schemas atomic.Int64

// openPostgres opens a Store on a fresh schema of EVENTSTORE_POSTGRES_URL
// (default the local test database), dropped at the end; it skips when
// PostgreSQL is unreachable, unless EVENTSTORE_POSTGRES_REQUIRED=1.
func openPostgres(t *testing.T) *eventstore.Store {
	return mustStore(t, openPostgresStorage(t))
}

// openPostgresStorage is openPostgres's Storage, closed by the Store
// given it.
func openPostgresStorage(t *testing.T) storage.Storage {
	url := postgresURL()
	schema := fmt.Sprintf("es_archive_test_%d_%d", os.Getpid(), schemas.Add(1))
	t.Cleanup(func() {
		if conn, err := pgx.Connect(context.Background(), url); err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = conn.Close(context.Background())
		}
	})
	s, err := postgres.OpenURL(context.Background(), url, &postgres.Options{Schema: schema})
	if err != nil {
		if os.Getenv("EVENTSTORE_POSTGRES_REQUIRED") == "1" {
			t.Fatal(err)
		}
		t.Skipf("PostgreSQL unreachable: %v", err)
	}
	return s
}
