package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/jackc/pgx/v5"
)

func TestWarnSmallPool(t *testing.T) {
	url := os.Getenv("EVENTSTORE_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS es_server_pool_test CASCADE")
	})
	open := func(t *testing.T, u string) storage.Storage {
		s, err := postgres.OpenURL(context.Background(), u, &postgres.Options{Schema: "es_server_pool_test"})
		if err != nil {
			if os.Getenv("EVENTSTORE_POSTGRES_REQUIRED") == "1" {
				t.Fatal(err)
			}
			t.Skipf("PostgreSQL unreachable: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	for _, c := range []struct {
		name string
		url  string
		warn bool
	}{
		{"default pool", url, false},
		{"pool of 2", url + sep + "pool_max_conns=2", true},
		{"pool of 6", url + sep + "pool_max_conns=6", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			warnSmallPool(slog.New(slog.NewTextHandler(&buf, nil)), open(t, c.url))
			if got := strings.Contains(buf.String(), "pool_max_conns"); got != c.warn {
				t.Errorf("warned = %v, want %v; log: %q", got, c.warn, buf.String())
			}
		})
	}
	var buf bytes.Buffer
	warnSmallPool(slog.New(slog.NewTextHandler(&buf, nil)), memory.New())
	if buf.Len() != 0 {
		t.Errorf("memory storage: logged %q", buf.String())
	}
}
