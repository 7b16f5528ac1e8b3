package storagetest

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
)

func snapshotCases() []testCase {
	return []testCase{
		{"SnapshotSaveLoad", "LoadSnapshot returns what SaveSnapshot stored (version, state version, the data byte for byte, RecordedAt in UTC); none stored is ErrNotFound; the data belongs to the caller on both sides", testSnapshotSaveLoad},
		{"SnapshotNewestWins", "an aggregate keeps one snapshot: a later version replaces it, one of the same version too, an older one is ignored without error", testSnapshotNewestWins},
		{"SnapshotVersionMustExist", "a snapshot of an aggregate without events or of a version it has not reached is refused with ErrConflict and stores nothing; a version below 1 is ErrInvalid", testSnapshotVersionMustExist},
		{"SnapshotDeletedWithAggregate", "DeleteAggregate deletes the aggregate's snapshot and no other, DeleteAggregateType those of its type and no other, and an aggregate recreated under the same id has none", testSnapshotDeleted},
		{"SnapshotSaveRacesDeletion", "a snapshot saved while its aggregate is deleted is deleted with it or refused: the aggregate recreated afterwards has no snapshot", testSnapshotRace},
		{"SnapshotBound", "a snapshot of MaxSnapshotBytes of data is stored and loaded back whole; one byte more is ErrInvalid and leaves the stored snapshot", testSnapshotBound},
	}
}

// mustSnapshot loads a snapshot through the Store and fails the test on
// error.
func mustSnapshot(t testing.TB, h *harness, typ, id string) storage.Snapshot {
	t.Helper()
	snap, err := h.store.LoadSnapshot(t.Context(), typ, id)
	if err != nil {
		t.Fatalf("LoadSnapshot %s/%s: %v", typ, id, err)
	}
	return snap
}

// noSnapshot checks that the aggregate has no snapshot.
func noSnapshot(t testing.TB, h *harness, typ, id, rule string) {
	t.Helper()
	if snap, err := h.store.LoadSnapshot(t.Context(), typ, id); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("%s: LoadSnapshot %s/%s must wrap ErrNotFound, got %v (version %d)", rule, typ, id, err, snap.Version)
	}
}

// saveVersions saves n single-event batches to the aggregate.
func saveVersions(t testing.TB, h *harness, typ, id string, n int) {
	t.Helper()
	for range n {
		mustSave(t, h, typ, id, evs("Happened", 1), nil)
	}
}

func snap(typ, id string, version int64, stateVersion int, data string) eventstore.Snapshot {
	return eventstore.Snapshot{AggregateType: typ, AggregateID: id, Version: version, StateVersion: stateVersion, Data: []byte(data)}
}

func testSnapshotSaveLoad(t *testing.T, h *harness) {
	ctx := t.Context()
	saveVersions(t, h, "account", "1", 3)
	noSnapshot(t, h, "account", "1", "an aggregate never snapshotted")
	noSnapshot(t, h, "account", "2", "an aggregate without events")

	data := []byte("state\x00\xff\xfe not UTF-8, not JSON")
	before := time.Now().UTC().Truncate(time.Microsecond)
	in := eventstore.Snapshot{AggregateType: "account", AggregateID: "1", Version: 2, StateVersion: 7, Data: data}
	if err := h.store.SaveSnapshot(ctx, in); err != nil {
		t.Fatalf("SaveSnapshot: %v", err)
	}
	after := time.Now().UTC()
	data[0] = 'X' // the caller's slice, after the call: the stored data must not change
	got := mustSnapshot(t, h, "account", "1")
	if got.AggregateType != "account" || got.AggregateID != "1" || got.Version != 2 || got.StateVersion != 7 {
		t.Errorf("LoadSnapshot must return the saved snapshot's aggregate, version and state version; got %s/%s version %d state version %d",
			got.AggregateType, got.AggregateID, got.Version, got.StateVersion)
	}
	if want := []byte("state\x00\xff\xfe not UTF-8, not JSON"); !bytes.Equal(got.Data, want) {
		t.Errorf("LoadSnapshot must return the data byte for byte; got %q, want %q", got.Data, want)
	}
	if got.RecordedAt.Location() != time.UTC || got.RecordedAt.Before(before) || got.RecordedAt.After(after) {
		t.Errorf("RecordedAt must be the save's time in UTC, between %v and %v; got %v", before, after, got.RecordedAt)
	}
	got.Data[0] = 'Y' // the returned slice is the caller's
	if again := mustSnapshot(t, h, "account", "1"); again.Data[0] != 's' {
		t.Errorf("changing the data LoadSnapshot returned must not change the stored snapshot; loaded %q", again.Data)
	}

	// An empty state is a state.
	saveVersions(t, h, "account", "3", 1)
	if err := h.store.SaveSnapshot(ctx, snap("account", "3", 1, 0, "")); err != nil {
		t.Fatalf("SaveSnapshot with empty data: %v", err)
	}
	if got := mustSnapshot(t, h, "account", "3"); got.Data == nil || len(got.Data) != 0 || got.Version != 1 {
		t.Errorf("a snapshot with empty data must load with empty, non-nil data; got %q (nil %v), version %d", got.Data, got.Data == nil, got.Version)
	}
	// Snapshots are per aggregate: same id, other type; other id.
	saveVersions(t, h, "ledger", "1", 1)
	noSnapshot(t, h, "ledger", "1", "a snapshot of account/1 is not one of ledger/1")
	noSnapshot(t, h, "account", "2", "a snapshot of account/1 is not one of account/2")
}

func testSnapshotNewestWins(t *testing.T, h *harness) {
	ctx := t.Context()
	saveVersions(t, h, "account", "1", 5)
	steps := []struct {
		in   eventstore.Snapshot
		want string
		rule string
	}{
		{snap("account", "1", 1, 1, "v1"), "v1", "the first snapshot is stored"},
		{snap("account", "1", 3, 1, "v3"), "v3", "a later version replaces the stored snapshot"},
		{snap("account", "1", 2, 1, "v2"), "v3", "an older version is ignored"},
		{snap("account", "1", 1, 9, "v1 again"), "v3", "an older version is ignored, whatever its state version"},
		{snap("account", "1", 3, 2, "v3 shape 2"), "v3 shape 2", "the same version replaces the stored snapshot (a new state shape)"},
		{snap("account", "1", 5, 2, "v5"), "v5", "the current version may be snapshotted"},
	}
	for _, st := range steps {
		if err := h.store.SaveSnapshot(ctx, st.in); err != nil {
			t.Fatalf("SaveSnapshot at version %d: %v (%s: no error expected)", st.in.Version, err, st.rule)
		}
		if got := mustSnapshot(t, h, "account", "1"); string(got.Data) != st.want {
			t.Errorf("%s: after saving %q at version %d the snapshot holds %q (version %d), want %q",
				st.rule, st.in.Data, st.in.Version, got.Data, got.Version, st.want)
		}
	}
	if got := mustSnapshot(t, h, "account", "1"); got.Version != 5 || got.StateVersion != 2 {
		t.Errorf("the stored snapshot must be version 5, state version 2; got %d, %d", got.Version, got.StateVersion)
	}
}

func testSnapshotVersionMustExist(t *testing.T, h *harness) {
	ctx := t.Context()
	if err := h.store.SaveSnapshot(ctx, snap("account", "none", 1, 0, "x")); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("a snapshot of an aggregate without events must wrap ErrConflict, got %v", err)
	}
	noSnapshot(t, h, "account", "none", "a refused snapshot stores nothing")
	saveVersions(t, h, "account", "1", 2)
	if err := h.store.SaveSnapshot(ctx, snap("account", "1", 3, 0, "x")); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("a snapshot of version 3 of an aggregate at version 2 must wrap ErrConflict, got %v", err)
	}
	noSnapshot(t, h, "account", "1", "a refused snapshot stores nothing")
	if err := h.store.SaveSnapshot(ctx, snap("account", "1", 2, 0, "v2")); err != nil {
		t.Fatalf("SaveSnapshot at the current version: %v", err)
	}
	if err := h.store.SaveSnapshot(ctx, snap("account", "1", 4, 0, "v4")); !errors.Is(err, storage.ErrConflict) {
		t.Errorf("a snapshot past the aggregate's version must wrap ErrConflict, got %v", err)
	}
	for _, v := range []int64{0, -1} {
		if err := h.store.SaveSnapshot(ctx, snap("account", "1", v, 0, "x")); !errors.Is(err, storage.ErrInvalid) {
			t.Errorf("a snapshot of version %d must wrap ErrInvalid, got %v", v, err)
		}
	}
	if err := h.store.SaveSnapshot(ctx, snap("account", "1", 1, -1, "x")); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("a negative state version must wrap ErrInvalid, got %v", err)
	}
	if err := h.store.SaveSnapshot(ctx, snap("", "1", 1, 0, "x")); !errors.Is(err, storage.ErrInvalid) {
		t.Errorf("an empty aggregate type must wrap ErrInvalid, got %v", err)
	}
	if got := mustSnapshot(t, h, "account", "1"); string(got.Data) != "v2" {
		t.Errorf("refused snapshots must leave the stored one; it holds %q", got.Data)
	}
}

func testSnapshotDeleted(t *testing.T, h *harness) {
	ctx := t.Context()
	for _, k := range [][2]string{{"alpha", "1"}, {"alpha", "2"}, {"beta", "1"}} {
		saveVersions(t, h, k[0], k[1], 2)
		if err := h.store.SaveSnapshot(ctx, snap(k[0], k[1], 2, 0, k[0]+"/"+k[1])); err != nil {
			t.Fatalf("SaveSnapshot %s/%s: %v", k[0], k[1], err)
		}
	}
	if err := h.store.DeleteAggregate(ctx, "alpha", "1"); err != nil {
		t.Fatalf("DeleteAggregate alpha/1: %v", err)
	}
	noSnapshot(t, h, "alpha", "1", "DeleteAggregate deletes the snapshot")
	for _, k := range [][2]string{{"alpha", "2"}, {"beta", "1"}} {
		if got := mustSnapshot(t, h, k[0], k[1]); string(got.Data) != k[0]+"/"+k[1] {
			t.Errorf("deleting alpha/1 must leave the snapshot of %s/%s; it holds %q", k[0], k[1], got.Data)
		}
	}
	// Recreated past the old snapshot's version: still none.
	saveVersions(t, h, "alpha", "1", 3)
	noSnapshot(t, h, "alpha", "1", "an aggregate recreated after its deletion has no snapshot of its earlier life")

	if err := h.store.SaveSnapshot(ctx, snap("alpha", "1", 3, 0, "reborn")); err != nil {
		t.Fatalf("SaveSnapshot of the recreated aggregate: %v", err)
	}
	if err := h.store.DeleteAggregateType(ctx, "alpha"); err != nil {
		t.Fatalf("DeleteAggregateType alpha: %v", err)
	}
	noSnapshot(t, h, "alpha", "1", "DeleteAggregateType deletes the type's snapshots")
	noSnapshot(t, h, "alpha", "2", "DeleteAggregateType deletes the type's snapshots")
	if got := mustSnapshot(t, h, "beta", "1"); string(got.Data) != "beta/1" {
		t.Errorf("deleting type alpha must leave the snapshot of beta/1; it holds %q", got.Data)
	}
	saveVersions(t, h, "alpha", "2", 2)
	noSnapshot(t, h, "alpha", "2", "an aggregate recreated after its type's deletion has no snapshot of its earlier life")
}

func testSnapshotRace(t *testing.T, h *harness) {
	ctx := t.Context()
	for round := range 10 {
		id := fmt.Sprint("race-", round)
		saveVersions(t, h, "account", id, 3)
		first := make(chan error, 1)
		done := make(chan error, 1)
		go func() {
			// Snapshots of version 3 until the deletion refuses them.
			for i := 0; ; i++ {
				err := h.store.SaveSnapshot(ctx, snap("account", id, 3, 0, "earlier life"))
				if i == 0 {
					first <- err
				}
				if err != nil {
					if errors.Is(err, storage.ErrConflict) {
						err = nil
					}
					done <- err
					return
				}
			}
		}()
		if err := <-first; err != nil {
			t.Fatalf("round %d: the first SaveSnapshot, before the deletion: %v", round, err)
		}
		if err := h.store.DeleteAggregate(ctx, "account", id); err != nil {
			t.Fatalf("round %d: DeleteAggregate: %v", round, err)
		}
		if err := <-done; err != nil {
			t.Fatalf("round %d: SaveSnapshot during the deletion: %v", round, err)
		}
		saveVersions(t, h, "account", id, 3)
		if got, err := h.store.LoadSnapshot(ctx, "account", id); !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("round %d: a snapshot saved while the aggregate was deleted must go with it or be refused; "+
				"the recreated aggregate loads %q at version %d (%v)", round, got.Data, got.Version, err)
		}
	}
}

func testSnapshotBound(t *testing.T, h *harness) {
	ctx := t.Context()
	saveVersions(t, h, "account", "1", 2)
	// Every byte value, in a pattern whose period (257) is no power of two.
	pattern := make([]byte, 257)
	for i := range pattern {
		pattern[i] = byte(i)
	}
	data := bytes.Repeat(pattern, limits.MaxSnapshotBytes/len(pattern)+1)[:limits.MaxSnapshotBytes]
	if err := h.store.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "account", AggregateID: "1", Version: 1, Data: data}); err != nil {
		t.Fatalf("SaveSnapshot of MaxSnapshotBytes of data: %v", err)
	}
	if got := mustSnapshot(t, h, "account", "1"); !bytes.Equal(got.Data, data) {
		t.Errorf("a snapshot of MaxSnapshotBytes must load back whole; got %d bytes, equal %v", len(got.Data), bytes.Equal(got.Data, data))
	}
	over := append(data, 0)
	err := h.store.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "account", AggregateID: "1", Version: 2, Data: over})
	var ve *eventstore.ValidationError
	if !errors.Is(err, storage.ErrInvalid) || !errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != "data" {
		t.Errorf("a snapshot of MaxSnapshotBytes+1 must be a *ValidationError of field data, got %v", err)
	}
	if got := mustSnapshot(t, h, "account", "1"); got.Version != 1 {
		t.Errorf("a refused snapshot must leave the stored one; it is at version %d", got.Version)
	}
}
