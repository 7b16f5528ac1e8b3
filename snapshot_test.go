package eventstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// failingSnapshots is a memory storage whose snapshot calls fail as an
// unreachable database would.
type failingSnapshots struct{ storage.Storage }

func (failingSnapshots) SaveSnapshot(context.Context, storage.Snapshot) error {
	return errors.New("connection refused")
}

func (failingSnapshots) LoadSnapshot(context.Context, string, string) (storage.Snapshot, error) {
	return storage.Snapshot{}, errors.New("connection refused")
}

// TestSnapshotsPassThroughMetrics checks that a Store with Metrics (whose
// storage is wrapped) passes snapshots through, reports the storage's
// failures and not the caller's, and refuses calls after Close.
func TestSnapshotsPassThroughMetrics(t *testing.T) {
	ctx := t.Context()
	m := &countingMetrics{storageErrors: map[string]int{}, projectedEvents: map[string]int{}, projectedFails: map[string]int{}}
	st, err := eventstore.New(memory.New(), &eventstore.Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Save(ctx, "account", "a-1", []eventstore.NewEvent{mev("Opened", `{}`)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "account", AggregateID: "a-1", Version: 1, Data: []byte("s")}); err != nil {
		t.Fatalf("SaveSnapshot through Metrics: %v", err)
	}
	if snap, err := st.LoadSnapshot(ctx, "account", "a-1"); err != nil || string(snap.Data) != "s" {
		t.Fatalf("LoadSnapshot through Metrics: %q, %v", snap.Data, err)
	}
	if _, err := st.LoadSnapshot(ctx, "account", "a-2"); !errors.Is(err, eventstore.ErrNotFound) {
		t.Errorf("LoadSnapshot of an aggregate without one must wrap ErrNotFound, got %v", err)
	}
	if err := st.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "account", AggregateID: "a-1", Version: 2}); !errors.Is(err, eventstore.ErrConflict) {
		t.Errorf("SaveSnapshot past the version must wrap ErrConflict, got %v", err)
	}
	if n := len(m.storageErrors); n != 0 {
		t.Errorf("not found and conflicts are the caller's, not storage errors; reported %v", m.storageErrors)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "account", AggregateID: "a-1", Version: 1}); !errors.Is(err, eventstore.ErrClosed) {
		t.Errorf("SaveSnapshot after Close must wrap ErrClosed, got %v", err)
	}
	if _, err := st.LoadSnapshot(ctx, "account", "a-1"); !errors.Is(err, eventstore.ErrClosed) {
		t.Errorf("LoadSnapshot after Close must wrap ErrClosed, got %v", err)
	}

	failing, _ := eventstore.New(failingSnapshots{memory.New()}, &eventstore.Options{Metrics: m})
	defer failing.Close()
	if err := failing.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "account", AggregateID: "a-1", Version: 1}); err == nil {
		t.Error("a failing storage's SaveSnapshot must fail")
	}
	if _, err := failing.LoadSnapshot(ctx, "account", "a-1"); err == nil {
		t.Error("a failing storage's LoadSnapshot must fail")
	}
	if m.storageErrors["SaveSnapshot"] != 1 || m.storageErrors["LoadSnapshot"] != 1 {
		t.Errorf("each failed snapshot call must be reported once by its method; reported %v", m.storageErrors)
	}
}
