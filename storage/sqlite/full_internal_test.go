package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/google/uuid"
)

// TestFullDisk fills the file up to its max_page_count, as a full disk
// would stop it: a save fails with ErrFull (not ErrUnavailable, which
// invites retrying at once), nothing of it is stored, the Store reports
// OutOfSpace, projection queries keep answering from what they hold, and
// once there is space again saves work and OutOfSpace clears.
func TestFullDisk(t *testing.T) {
	ctx := context.Background()
	s, err := open(filepath.Join(t.TempDir(), "es.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventstore.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	if err := p.Create(ctx, eventstore.Definition{Name: "n", Feed: "order", Aggregated: true,
		Handlers: []eventstore.Handler{{EventType: "Placed", Functions: []eventstore.Function{
			{Name: eventstore.FuncInc, TargetSelector: "$.projection.count"},
			{Name: eventstore.FuncSet, TargetSelector: "$.projection.last", EventSelector: "$.event.pad"}}}}}); err != nil {
		t.Fatal(err)
	}
	save := func(id string, size int) error {
		data := fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", size))
		_, err := st.Save(ctx, "order", id, []eventstore.NewEvent{{ID: uuid.NewString(), Type: "Placed", Data: []byte(data)}}, nil)
		return err
	}
	if err := save("o-1", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Aggregated(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	// Saved, not yet applied: applying it needs new pages.
	if err := save("o-2", 64<<10); err != nil {
		t.Fatal(err)
	}
	var pages int64
	if err := s.writeDB.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.writeDB.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	err = save("o-3", 64<<10)
	if !errors.Is(err, storage.ErrFull) || errors.Is(err, storage.ErrUnavailable) {
		t.Fatalf("save on a full file: %v, want ErrFull", err)
	}
	if !st.OutOfSpace() {
		t.Error("OutOfSpace is false after a save failed with ErrFull")
	}
	if _, err := st.Load(ctx, "order", "o-3"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("load of the refused save: %v, want ErrNotFound", err)
	}
	// o-2 cannot be applied: the query answers what the projection holds.
	pj, err := p.Aggregated(ctx, "n")
	if err != nil || !strings.Contains(string(pj.Data), `"count":"1"`) {
		t.Errorf("projection query on a full file = %.40s, %v; want the stored count 1", pj.Data, err)
	}

	if _, err := s.writeDB.ExecContext(ctx, "PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	if err := save("o-4", 64<<10); err != nil {
		t.Fatalf("save once there is space: %v", err)
	}
	if st.OutOfSpace() {
		t.Error("OutOfSpace is still true after a save succeeded")
	}
	pj, err = p.Aggregated(ctx, "n")
	if err != nil || !strings.Contains(string(pj.Data), `"count":"3"`) {
		t.Errorf("projection query once there is space = %s, %v; want count 3", pj.Data, err)
	}
}
