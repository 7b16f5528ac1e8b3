package typed_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"sync"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/typed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// countingApply is account.Apply that counts the events it folds.
func countingApply(n *int) func(*account, typed.Event) error {
	return func(a *account, e typed.Event) error {
		*n++
		return a.Apply(e)
	}
}

// syncBuffer is a log destination for several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestSnapshots(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			st := be.open(t, 1)[0]
			ts := typed.NewStore(st, accountRegistry(t))
			var applied int
			var logs syncBuffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			repo := func(stateVersion int, codec typed.Codec) *typed.Repository[account] {
				return typed.NewRepository(ts, "account", countingApply(&applied), &typed.RepositoryOptions{
					SnapshotEvery: 10, StateVersion: stateVersion, StateCodec: codec, Logger: logger})
			}
			plain := typed.NewRepository(ts, "account", (*account).Apply, nil)
			v1 := repo(1, nil)
			for w := range 25 {
				_, err := v1.Update(ctx, "a-1", deposit(w%3))
				require.NoError(t, err)
			}
			snap, err := st.LoadSnapshot(ctx, "account", "a-1")
			require.NoError(t, err)
			assert.Equal(t, int64(20), snap.Version, "every 10 saves")
			assert.Equal(t, 1, snap.StateVersion)

			want, err := plain.Load(ctx, "a-1")
			require.NoError(t, err)
			applied = 0
			got, err := v1.Load(ctx, "a-1")
			require.NoError(t, err)
			assert.Equal(t, want.State, got.State, "the same state as from every event")
			assert.Equal(t, int64(25), got.Version)
			assert.Equal(t, 5, applied, "only the events after the snapshot are folded")

			// A new shape ignores the snapshot, folds every event, and
			// the next save replaces it.
			v2 := repo(2, nil)
			applied = 0
			got, err = v2.Load(ctx, "a-1")
			require.NoError(t, err)
			assert.Equal(t, want.State, got.State)
			assert.Equal(t, 25, applied, "a snapshot of another state version is ignored")
			_, err = v2.Update(ctx, "a-1", deposit(0))
			require.NoError(t, err)
			snap, err = st.LoadSnapshot(ctx, "account", "a-1")
			require.NoError(t, err)
			assert.Equal(t, 2, snap.StateVersion, "rebuilt in the new shape at the next save")
			assert.Equal(t, int64(26), snap.Version)
			applied = 0
			_, err = v2.Load(ctx, "a-1")
			require.NoError(t, err)
			assert.Zero(t, applied)

			// A snapshot that does not decode is ignored and logged.
			require.NoError(t, st.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "account", AggregateID: "a-1", Version: 26, StateVersion: 2, Data: []byte("{not json")}))
			applied = 0
			got, err = v2.Load(ctx, "a-1")
			require.NoError(t, err)
			assert.Equal(t, 26, applied)
			assert.Equal(t, want.State.Deposits+1, got.State.Deposits)
			assert.Contains(t, logs.String(), "a snapshot does not decode")

			// A snapshot that cannot be saved does not fail the save.
			broken := repo(3, failingCodec{})
			for range 10 {
				_, err = broken.Update(ctx, "a-1", deposit(1))
				require.NoError(t, err, "the save stands")
			}
			assert.Contains(t, logs.String(), "taking a snapshot failed")
			assert.Contains(t, logs.String(), "no encoding today")
			got, err = plain.Load(ctx, "a-1")
			require.NoError(t, err)
			assert.Equal(t, int64(36), got.Version)

			// Deleted and saved again: the snapshot went with the events.
			require.NoError(t, st.DeleteAggregate(ctx, "account", "a-1"))
			_, err = v1.Update(ctx, "a-1", deposit(0))
			require.NoError(t, err)
			got, err = v1.Load(ctx, "a-1")
			require.NoError(t, err)
			assert.Equal(t, 1, got.State.Deposits)
		})
	}
}

type failingCodec struct{}

func (failingCodec) Marshal(any) ([]byte, error) { return nil, errors.New("no encoding today") }
func (failingCodec) Unmarshal([]byte, any) error { return errors.New("no decoding today") }

// TestSnapshotsUnderConcurrentUpdates: writers updating one aggregate in
// loops with snapshots every few saves save every deposit once, and the
// state from the snapshot equals the state from every event.
func TestSnapshotsUnderConcurrentUpdates(t *testing.T) {
	const writers, perWriter = 4, 12
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			ctx := context.Background()
			stores := be.open(t, 2)
			reg := accountRegistry(t)
			var wg sync.WaitGroup
			errs := make(chan error, writers*perWriter)
			for w := range writers {
				wg.Go(func() {
					r := typed.NewRepository(typed.NewStore(stores[w%2], reg), "account", (*account).Apply,
						&typed.RepositoryOptions{Retries: 1000, SnapshotEvery: 3})
					for range perWriter {
						if _, err := r.Update(ctx, "hot", deposit(w)); err != nil {
							errs <- err
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			ts := typed.NewStore(stores[0], reg)
			fromSnapshot, err := typed.NewRepository(ts, "account", (*account).Apply, &typed.RepositoryOptions{SnapshotEvery: 3}).Load(ctx, "hot")
			require.NoError(t, err)
			fromEvents, err := typed.NewRepository(ts, "account", (*account).Apply, nil).Load(ctx, "hot")
			require.NoError(t, err)
			assert.Equal(t, fromEvents.Version, fromSnapshot.Version)
			assert.Equal(t, fromEvents.State, fromSnapshot.State)
			assert.Equal(t, writers*perWriter, fromEvents.State.Deposits)
			snap, err := stores[1].LoadSnapshot(ctx, "account", "hot")
			require.NoError(t, err)
			assert.Greater(t, snap.Version, int64(writers*perWriter-6), "snapshots kept up")
		})
	}
}

// ExampleNewRepository_snapshots keeps a snapshot every 100 saves, so
// that a load folds at most about 100 saves' events.
func ExampleNewRepository_snapshots() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	reg := typed.NewRegistry(nil)
	_ = typed.Register[ItemAdded](reg, "ItemAdded")
	carts := typed.NewRepository(typed.NewStore(st, reg), "cart", (*Cart).Apply, &typed.RepositoryOptions{
		SnapshotEvery: 100,
		StateVersion:  1, // bump when Cart changes shape: older snapshots are then ignored and rebuilt
	})
	for i := range 250 {
		if _, err := carts.Update(ctx, "c-1", AddItem(fmt.Sprint("sku-", i%7), 1)); err != nil {
			log.Fatal(err)
		}
	}
	snap, _ := st.LoadSnapshot(ctx, "cart", "c-1")
	cart, _ := carts.Load(ctx, "c-1") // the snapshot at 200, then 50 saves
	fmt.Println(snap.Version, cart.Version, cart.State.Items["sku-0"])
	// Output:
	// 200 250 36
}
