package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/storage/storagetest"
)

// TestSpaces: a schema per name on one shared pool and Listener, dropped
// with everything in it, as the server keeps PostgreSQL tenants.
func TestSpaces(t *testing.T) {
	storagetest.RunSpaces(t, func(tb testing.TB) storagetest.Spaces {
		pool := testPool(tb)
		var b [6]byte
		_, _ = rand.Read(b[:])
		prefix := "es_sp_" + hex.EncodeToString(b[:]) + "_"
		drop := func(tb testing.TB, name string) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{prefix + name}.Sanitize()+" CASCADE"); err != nil {
				tb.Errorf("drop schema %s: %v", prefix+name, err)
			}
		}
		l := postgres.NewListener(pool)
		tb.Cleanup(func() {
			_ = l.Close()
			drop(tb, "alpha")
			drop(tb, "beta")
		})
		return storagetest.Spaces{
			Open: func(tb testing.TB, name string) storage.Storage {
				s, err := postgres.Open(context.Background(), pool, &postgres.Options{Schema: prefix + name, Listener: l})
				if err != nil {
					tb.Fatal(err)
				}
				tb.Cleanup(func() { _ = s.Close() })
				return s
			},
			Drop: drop,
		}
	})
}
