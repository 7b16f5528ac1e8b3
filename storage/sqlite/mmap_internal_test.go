package sqlite

import (
	"context"
	"path/filepath"
	"testing"
)

// TestReadConnectionsMapTheFile checks the mmap_size of the read
// connections: none by default or when negative, Options.MmapSize when
// set; the write connection maps nothing.
func TestReadConnectionsMapTheFile(t *testing.T) {
	for _, c := range []struct {
		opt, want int64
	}{{0, 0}, {64 << 20, 64 << 20}, {-1, 0}} {
		s, err := open(filepath.Join(t.TempDir(), "es.db"), &Options{MmapSize: c.opt})
		if err != nil {
			t.Fatal(err)
		}
		var read, write int64
		if err := s.readDB.QueryRowContext(context.Background(), "PRAGMA mmap_size").Scan(&read); err != nil {
			t.Fatal(err)
		}
		if err := s.writeDB.QueryRowContext(context.Background(), "PRAGMA mmap_size").Scan(&write); err != nil {
			t.Fatal(err)
		}
		if read != c.want || write != 0 {
			t.Errorf("MmapSize %d: read connections map %d bytes, the writer %d; want %d and 0", c.opt, read, write, c.want)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
