package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/eventkit-go/eventstore/storage/sqlite"
)

// runBackup is the subcommand backup: a consistent copy of a SQLite
// store, its tenant registry and every tenant's file into a new directory,
// while servers go on serving them (sqlite.Backup, docs/upgrades.md).
func runBackup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("server backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	spec := fs.String("storage", "sqlite:eventstore.db", `the store to copy: "sqlite:PATH", as the server's -storage (PostgreSQL: use pg_dump, see docs/upgrades.md)`)
	to := fs.String("to", "", "the directory to write the copies into, under the files' own names; it must not hold them already (created when missing)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: server backup [-storage sqlite:PATH] -to DIR\n\n"+
			"Copies the store PATH, its tenant registry and every tenant's file into DIR while servers go on\n"+
			"serving them: each copy is one consistent instant of its file. Restore by stopping the servers\n"+
			"and moving the copies into place.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("backup: unexpected arguments: %q", fs.Args())
	case *to == "":
		return errors.New("backup: -to DIR is required")
	case storageName(*spec) == "postgres":
		return errors.New("backup: a PostgreSQL store is backed up with pg_dump or a base backup (docs/upgrades.md, \"Backups\")")
	case storageName(*spec) != "sqlite":
		return fmt.Errorf("backup: -storage %q: only a SQLite store (\"sqlite:PATH\") has a backup here", *spec)
	}
	path := strings.TrimPrefix(*spec, "sqlite:")
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	ts := tenantStorage{spec: *spec}
	files := []string{path}
	for _, f := range []string{ts.sqlitePath("+tenants")} {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	tenants, err := tenantFiles(ts)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	files = append(files, tenants...)
	if err := os.MkdirAll(*to, 0o755); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	for _, f := range files {
		dst := filepath.Join(*to, filepath.Base(f))
		if err := sqlite.Backup(ctx, f, dst); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		fmt.Fprintf(stdout, "%s → %s\n", f, dst)
	}
	return nil
}

// tenantFiles returns the files of the tenants of the SQLite store of ts
// (not their -wal and -shm files).
func tenantFiles(ts tenantStorage) ([]string, error) {
	matches, err := filepath.Glob(globEscape(ts.sqlitePath("+t-")) + "*")
	if err != nil {
		return nil, err
	}
	ext := filepath.Ext(strings.TrimPrefix(ts.spec, "sqlite:"))
	var files []string
	for _, f := range matches {
		if strings.HasSuffix(f, ext) && !strings.HasSuffix(f, "-wal") && !strings.HasSuffix(f, "-shm") && !strings.HasSuffix(f, "-journal") {
			files = append(files, f)
		}
	}
	return files, nil
}
