package sqlite_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/eventkit-go/eventstore/storage/storagetest"
)

// TestSpaces: a file per name in one directory, removed with its -wal and
// -shm files, as the server keeps SQLite tenants.
func TestSpaces(t *testing.T) {
	storagetest.RunSpaces(t, func(tb testing.TB) storagetest.Spaces {
		dir := tb.TempDir()
		path := func(name string) string { return filepath.Join(dir, name+".db") }
		return storagetest.Spaces{
			Open: func(tb testing.TB, name string) storage.Storage {
				s, err := sqlite.Open(path(name), &sqlite.Options{CheckpointPages: 64, CacheKiB: 512})
				if err != nil {
					tb.Fatal(err)
				}
				tb.Cleanup(func() { _ = s.Close() })
				return s
			},
			Drop: func(tb testing.TB, name string) {
				for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
					if err := os.Remove(path(name) + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
						tb.Fatal(err)
					}
				}
			},
		}
	})
}
