package postgres

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/jackc/pgx/v5/pgxpool"
)

// readOnlyPool returns a pool whose sessions are read-only, as on a hot
// standby (SQLSTATE 25006 for every write).
func readOnlyPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	url := os.Getenv("EVENTSTORE_POSTGRES_URL")
	if url == "" {
		url = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TestReadOnlyNodeIsUnavailable: against a read-only server (a standby),
// Open refuses with ErrUnavailable and a message that says what to change,
// and an open Storage's appends and ProbeWrite fail with ErrUnavailable
// (a 503, never a 500), while a writable one probes fine.
func TestReadOnlyNodeIsUnavailable(t *testing.T) {
	s, _ := openBatchTestSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.ProbeWrite(ctx); err != nil {
		t.Fatalf("ProbeWrite on the primary: %v", err)
	}
	ro := readOnlyPool(t)
	_, err := open(ctx, ro, &Options{Schema: "es_test_never_created"})
	if !errors.Is(err, storage.ErrUnavailable) || !strings.Contains(err.Error(), "target_session_attrs=read-write") {
		t.Fatalf("Open on a read-only server: %v; want ErrUnavailable saying what to change", err)
	}
	// The same Storage after its server became read-only.
	primary := s.pool
	s.pool = ro
	defer func() { s.pool = primary }()
	if err := s.ProbeWrite(ctx); !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("ProbeWrite on a read-only server: %v; want ErrUnavailable", err)
	}
	_, err = s.Append(ctx, request("ro-1", -1, batchEvent("Placed")))
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("Append on a read-only server: %v; want ErrUnavailable", err)
	}
}
