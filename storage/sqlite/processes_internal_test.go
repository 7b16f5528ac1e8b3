package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/internal/upgrade"
	"github.com/eventkit-go/eventstore/storage"
)

// withMigration returns migrations and one more of kind, as a newer
// program knows them.
func withMigration(list []migration, kind upgrade.Kind, sql string) []migration {
	return append(list[:len(list):len(list)], migration{kind, sql})
}

// processCount returns the rows of the file's processes table.
func processCount(t *testing.T, s *store) int {
	t.Helper()
	var n int
	if err := s.readDB.QueryRow(`SELECT count(*) FROM processes`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestProcessesRecorded checks that every open Storage has a row in the
// processes table, at this package's version, which its Close deletes.
func TestProcessesRecorded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	a, err := open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var pid, version int
	if err := a.readDB.QueryRow(`SELECT pid, version FROM processes`).Scan(&pid, &version); err != nil ||
		pid != os.Getpid() || version != len(migrations) {
		t.Fatalf("process row = pid %d version %d, %v; want %d, %d", pid, version, err, os.Getpid(), len(migrations))
	}
	b, err := open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := processCount(t, a); n != 2 {
		t.Errorf("rows with two Storages open = %d, want 2", n)
	}
	_ = b.Close()
	if n := processCount(t, a); n != 1 {
		t.Errorf("rows after one Close = %d, want 1", n)
	}
}

// TestContractMigrationRefusedBesideOlderSQLite plays a newer program on a
// file that a live process of this version has open (another OS process,
// recorded as the server would record it): its expand migration runs, its
// contract migration refuses naming the process, and runs once that
// process is gone; a row of a process that is gone is forgotten.
func TestContractMigrationRefusedBesideOlderSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	ctx := context.Background()
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() }()
	v := len(migrations)
	if _, to, err := Migrate(ctx, path, nil); err != nil || to != v {
		t.Fatalf("Migrate a new file = →%d, %v; want →%d", to, err, v)
	}
	s, err := open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	started := time.Now()
	if _, err := s.writeDB.Exec(`INSERT INTO processes (id, host, pid, started_at, version, last_seen) VALUES ('old', ?, ?, ?, ?, ?)`,
		host, sleeper.Process.Pid, started.UnixMicro(), v, started.UnixMicro()); err != nil {
		t.Fatal(err)
	}
	_ = s.Close() // this process is of version v too

	expand := withMigration(migrations[:], upgrade.Expand, `CREATE TABLE upgrade_expand (x INTEGER);`)
	if from, to, err := Migrate(ctx, path, &Options{testMigrations: expand}); err != nil || from != v || to != v+1 {
		t.Fatalf("expand migration beside a live older process = %d→%d, %v; want %d→%d", from, to, err, v, v+1)
	}
	contract := withMigration(expand, upgrade.Contract, `CREATE TABLE upgrade_contract (x INTEGER);`)
	_, to, err := Migrate(ctx, path, &Options{testMigrations: contract})
	if !errors.Is(err, storage.ErrSchemaVersion) || to != v+1 {
		t.Fatalf("contract migration beside a live older process = →%d, %v; want a refusal wrapping ErrSchemaVersion", to, err)
	}
	for _, want := range []string{fmt.Sprintf("migration %d", v+2), "host " + host, fmt.Sprintf("pid %d", sleeper.Process.Pid),
		fmt.Sprintf("schema version %d", v)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if _, err := open(path, &Options{testMigrations: contract}); !errors.Is(err, storage.ErrSchemaVersion) {
		t.Errorf("Open of the newer program beside the older one = %v, want ErrSchemaVersion", err)
	}
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()
	if _, to, err := Migrate(ctx, path, &Options{testMigrations: contract}); err != nil || to != v+2 {
		t.Fatalf("contract migration once the older process is gone = →%d, %v; want →%d", to, err, v+2)
	}
	n, err := open(path, &Options{testMigrations: contract})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	var old int
	if err := n.readDB.QueryRow(`SELECT count(*) FROM processes WHERE id = 'old'`).Scan(&old); err != nil || old != 0 {
		t.Errorf("rows of the process gone after an Open = %d, %v; want 0", old, err)
	}
}

// TestNoMigrateSQLite checks that Options.NoMigrate refuses an older file
// and a new one, changing nothing, and opens a current one.
func TestNoMigrateSQLite(t *testing.T) {
	dir := t.TempDir()
	if _, err := open(filepath.Join(dir, "new.db"), &Options{NoMigrate: true}); !errors.Is(err, storage.ErrSchemaVersion) {
		t.Errorf("NoMigrate Open of a new file = %v, want ErrSchemaVersion", err)
	}
	path := filepath.Join(dir, "p.db")
	if _, _, err := Migrate(context.Background(), path, nil); err != nil {
		t.Fatal(err)
	}
	newer := withMigration(migrations[:], upgrade.Expand, `CREATE TABLE upgrade_expand (x INTEGER);`)
	if _, err := open(path, &Options{NoMigrate: true, testMigrations: newer}); !errors.Is(err, storage.ErrSchemaVersion) ||
		!strings.Contains(err.Error(), "older") {
		t.Errorf("NoMigrate Open of an older file = %v, want ErrSchemaVersion saying older", err)
	}
	s, err := open(path, &Options{NoMigrate: true})
	if err != nil {
		t.Fatalf("NoMigrate Open of a current file: %v", err)
	}
	defer s.Close()
	var v int
	if err := s.readDB.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil || v != len(migrations) {
		t.Errorf("version after NoMigrate Opens = %d, %v; want %d", v, err, len(migrations))
	}
}
