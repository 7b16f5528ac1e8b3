package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
)

func TestHelpListsUpgradesAndBackup(t *testing.T) {
	out, code := runMainProcess(t, "-h")
	for _, want := range []string{"-migrate-only", "-no-migrate", "server backup [flags]"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("server -h (exit %d) does not list %q:\n%s", code, want, out)
		}
	}
	out, code = runMainProcess(t, "backup", "-h")
	if code != 0 || !strings.Contains(out, "Usage: server backup") || !strings.Contains(out, "-to") {
		t.Errorf("server backup -h: exit %d, output:\n%s", code, out)
	}
	out, code = runMainProcess(t, "backup", "-storage", "memory", "-to", t.TempDir())
	if code == 0 || strings.Count(strings.TrimSpace(out), "\n") != 0 || !strings.Contains(out, "only a SQLite store") {
		t.Errorf("server backup of a memory store: exit %d, want a one-line error; output:\n%s", code, out)
	}
}

// TestMigrateOnlyThenNoMigrateSQLite is the deploy of a rolling restart on
// SQLite: a server with -no-migrate refuses a file with no schema, naming
// -migrate-only; -migrate-only creates it (with the tenant registry) and
// exits; a server with -no-migrate then serves it.
func TestMigrateOnlyThenNoMigrateSQLite(t *testing.T) {
	env := map[string]string{"EVENTSTORE_ACCESS_KEY": "ak", "EVENTSTORE_SECRET_ACCESS_KEY": "sk"}
	path := filepath.Join(t.TempDir(), "events.db")
	args := []string{"-addr", "127.0.0.1:0", "-storage", "sqlite:" + path}
	getenv := func(k string) string { return env[k] }
	var logs bytes.Buffer
	err := run(context.Background(), append(args, "-no-migrate"), getenv, io.Discard, &logs)
	if !errors.Is(err, storage.ErrSchemaVersion) || !strings.Contains(err.Error(), "-migrate-only") {
		t.Fatalf("-no-migrate on a new file = %v, want ErrSchemaVersion naming -migrate-only", err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), append(args, "-migrate-only"), getenv, &out, &logs); err != nil {
		t.Fatalf("-migrate-only: %v\n%s", err, logs.String())
	}
	if !strings.Contains(out.String(), path+": version 0 → ") || !strings.Contains(out.String(), "events+tenants.db: version 0 → ") {
		t.Errorf("-migrate-only printed %q, want the file and its tenant registry migrated from version 0", out.String())
	}
	base, _, stop := start(t, append(args, "-no-migrate"), env)
	if code, body := call(t, "POST", base+"/aggregates/order/o-1/events", "ak", "sk",
		`{"events":[{"eventId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","eventType":"Placed"}]}`); code != 200 {
		t.Fatalf("save: %d %s", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(context.Background(), append(args, "-migrate-only"), getenv, &out, &logs); err != nil ||
		!strings.Contains(out.String(), "→") {
		t.Fatalf("-migrate-only again = %v, %q", err, out.String())
	}
}

// TestMigrateOnlyPostgres checks that -migrate-only creates the project's
// schema and its tenant registry's, and that -no-migrate then starts.
func TestMigrateOnlyPostgres(t *testing.T) {
	_, url, schema := postgresAdmin(t, "es_upg_")
	env := map[string]string{"EVENTSTORE_ACCESS_KEY": "ak", "EVENTSTORE_SECRET_ACCESS_KEY": "sk"}
	args := []string{"-addr", "127.0.0.1:0", "-storage", url, "-postgres-schema", schema}
	getenv := func(k string) string { return env[k] }
	var out, logs bytes.Buffer
	if err := run(context.Background(), append(args, "-no-migrate"), getenv, &out, &logs); !errors.Is(err, storage.ErrSchemaVersion) {
		t.Fatalf("-no-migrate on a missing schema = %v, want ErrSchemaVersion", err)
	}
	if err := run(context.Background(), append(args, "-migrate-only"), getenv, &out, &logs); err != nil {
		t.Fatalf("-migrate-only: %v\n%s", err, logs.String())
	}
	for _, want := range []string{"schema " + schema + ": version 0 → ", "schema " + schema + "+tenants: version 0 → "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-migrate-only printed %q, want %q", out.String(), want)
		}
	}
	_, _, stop := start(t, append(args, "-no-migrate"), env)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestBackupSubcommand backs up a serving SQLite server's store and
// serves the copy with -no-migrate: the events saved before are there.
func TestBackupSubcommand(t *testing.T) {
	env := map[string]string{"EVENTSTORE_ACCESS_KEY": "ak", "EVENTSTORE_SECRET_ACCESS_KEY": "sk"}
	dir := t.TempDir()
	path := filepath.Join(dir, "events.db")
	args := []string{"-addr", "127.0.0.1:0", "-storage", "sqlite:" + path}
	base, _, stop := start(t, args, env)
	if code, body := call(t, "POST", base+"/aggregates/order/o-1/events", "ak", "sk",
		`{"events":[{"eventId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","eventType":"Placed"}]}`); code != 200 {
		t.Fatalf("save: %d %s", code, body)
	}
	copies := filepath.Join(dir, "copies")
	var out bytes.Buffer
	if err := run(context.Background(), []string{"backup", "-storage", "sqlite:" + path, "-to", copies}, nil, &out, io.Discard); err != nil {
		t.Fatalf("backup of a serving store: %v", err)
	}
	if !strings.Contains(out.String(), filepath.Join(copies, "events.db")) {
		t.Errorf("backup printed %q, want the copy's path", out.String())
	}
	if err := run(context.Background(), []string{"backup", "-storage", "sqlite:" + path, "-to", copies}, nil, &out, io.Discard); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("backup onto existing copies = %v, want ErrConflict", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(copies, "events.db-wal")); err == nil {
		t.Error("the copy left a -wal file")
	}
	base, _, stop = start(t, []string{"-addr", "127.0.0.1:0", "-storage", "sqlite:" + filepath.Join(copies, "events.db"), "-no-migrate"}, env)
	if code, body := call(t, "GET", base+"/aggregates/order/o-1", "ak", "sk", ""); code != 200 || !strings.Contains(body, "7c9e6679") {
		t.Errorf("load from the copy: %d %s", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
