package typed_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/typed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type deposited struct {
	Amount int `json:"amount"`
	Writer int `json:"writer"`
}

type withdrawn struct {
	Amount int `json:"amount"`
}

type account struct {
	Balance  int
	Deposits int
	Writers  map[int]int // deposits by writer
}

func (a *account) Apply(e typed.Event) error {
	switch v := e.Value.(type) {
	case deposited:
		a.Balance += v.Amount
		a.Deposits++
		if a.Writers == nil {
			a.Writers = map[int]int{}
		}
		a.Writers[v.Writer]++
	case withdrawn:
		if v.Amount > a.Balance {
			return errors.New("overdrawn")
		}
		a.Balance -= v.Amount
	}
	return nil
}

func accountRegistry(t *testing.T) *typed.Registry {
	t.Helper()
	reg := typed.NewRegistry(nil)
	require.NoError(t, errors.Join(
		typed.Register[deposited](reg, "Deposited"),
		typed.Register[withdrawn](reg, "Withdrawn"),
	))
	return reg
}

func deposit(writer int) func(*account) ([]any, error) {
	return func(*account) ([]any, error) { return []any{deposited{Amount: 1, Writer: writer}}, nil }
}

func TestRepositoryParts(t *testing.T) {
	ctx := context.Background()
	ts := typed.NewStore(mustStore(t, memory.New()), accountRegistry(t))
	accounts := typed.NewRepository(ts, "account", (*account).Apply, nil)

	a, err := accounts.Load(ctx, "a-1")
	require.NoError(t, err)
	assert.Equal(t, typed.Aggregate[account]{ID: "a-1"}, a, "no events: version 0, zero state")

	res, err := accounts.Save(ctx, a, []any{deposited{Amount: 10}, deposited{Amount: 5}})
	require.NoError(t, err)
	assert.Equal(t, int64(1), res.Version)
	_, err = accounts.Save(ctx, a, []any{deposited{Amount: 1}})
	assert.ErrorIs(t, err, eventstore.ErrConflict, "a save at a version passed")
	res, err = accounts.Save(ctx, a, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(0), res.Version, "no events save nothing")

	a, err = accounts.Load(ctx, "a-1")
	require.NoError(t, err)
	assert.Equal(t, int64(1), a.Version)
	assert.Equal(t, 15, a.State.Balance)

	_, err = accounts.Save(ctx, a, []any{withdrawn{Amount: 100}})
	require.NoError(t, err, "apply runs on load, not on save")
	_, err = accounts.Load(ctx, "a-1")
	assert.ErrorContains(t, err, `load account/a-1: apply event`)
	assert.ErrorContains(t, err, `of type "Withdrawn" (version 2): overdrawn`)

	no := errors.New("no")
	_, err = accounts.Update(ctx, "a-2", func(*account) ([]any, error) { return nil, no })
	assert.Equal(t, no, err, "decide's error unchanged")
	ok, err := ts.Untyped().Exists(ctx, "account", "a-2")
	require.NoError(t, err)
	assert.False(t, ok)

	_, err = ts.Save(ctx, "account", "a-3", []any{deposited{}}, nil)
	require.NoError(t, err)
	_, err = ts.Untyped().Save(ctx, "account", "a-3", []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "Frozen"}}, nil)
	require.NoError(t, err)
	_, err = accounts.Load(ctx, "a-3")
	assert.ErrorIs(t, err, typed.ErrUnregistered, "an event that does not decode fails the load")
	assert.ErrorContains(t, err, `"Frozen"`)

	const id = "9d7e0c52-1b0a-4d38-a3a4-0d6a3f0e0009"
	res, err = accounts.Update(ctx, "a-4", func(*account) ([]any, error) {
		return []any{typed.NewEvent{ID: id, Value: deposited{Amount: 2}}}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, int64(1), res.Version)
	evs := collect(t, ts.Load(ctx, "account", "a-4"))
	require.Len(t, evs, 1)
	assert.Equal(t, id, evs[0].ID, "decide may give ids (and metadata) with NewEvent")

	var nilApply typed.Repository[account]
	_, err = nilApply.Load(ctx, "a-1")
	assert.ErrorIs(t, err, eventstore.ErrInvalid)
}

// TestUpdateRetriesConflicts: writers that all loaded the same version
// conflict on saving; Update loads again and decides again, so every
// deposit is saved once, on every backend. Without retries all but one
// fail with ErrConflict.
func TestUpdateRetriesConflicts(t *testing.T) {
	const writers = 6
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := context.Background()
			stores := b.open(t, 2)
			reg := accountRegistry(t)
			repo := func(i, retries int) *typed.Repository[account] {
				return typed.NewRepository(typed.NewStore(stores[i%2], reg), "account", (*account).Apply, &typed.RepositoryOptions{Retries: retries})
			}

			for _, retries := range []int{-1, writers} {
				id := fmt.Sprintf("together-%d", retries)
				// Every writer's first decide waits until all of them
				// have loaded version 0, so their first saves conflict.
				var loaded sync.WaitGroup
				loaded.Add(writers)
				var calls atomic.Int64
				errs := make([]error, writers)
				var wg sync.WaitGroup
				for w := range writers {
					wg.Go(func() {
						first := true
						_, errs[w] = repo(w, retries).Update(ctx, id, func(a *account) ([]any, error) {
							calls.Add(1)
							if first {
								first = false
								loaded.Done()
								loaded.Wait()
							}
							return deposit(w)(a)
						})
					})
				}
				wg.Wait()
				a, err := repo(0, 0).Load(ctx, id)
				require.NoError(t, err)
				failed := 0
				for _, err := range errs {
					if err != nil {
						assert.ErrorIs(t, err, eventstore.ErrConflict)
						failed++
					}
				}
				if retries < 0 {
					assert.Equal(t, writers-1, failed, "without retries one writer wins")
					assert.Equal(t, int64(writers), calls.Load())
					assert.Equal(t, 1, a.State.Deposits)
					continue
				}
				assert.Zero(t, failed, "with %d retries every writer saves", retries)
				assert.Equal(t, writers, a.State.Deposits)
				assert.Equal(t, int64(writers), a.Version)
				assert.GreaterOrEqual(t, calls.Load(), int64(2*writers-1), "the losers decided again")
			}

			// Writers updating in loops: every deposit is saved once, and
			// the aggregate's versions have no gaps.
			const perWriter = 15
			var wg sync.WaitGroup
			errs := make(chan error, writers*perWriter)
			for w := range writers {
				wg.Go(func() {
					r := repo(w, 1000)
					for range perWriter {
						if _, err := r.Update(ctx, "loops", deposit(w)); err != nil {
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
			a, err := repo(1, 0).Load(ctx, "loops")
			require.NoError(t, err)
			assert.Equal(t, writers*perWriter, a.State.Deposits)
			assert.Equal(t, int64(writers*perWriter), a.Version)
			for w := range writers {
				assert.Equal(t, perWriter, a.State.Writers[w], "writer %d", w)
			}
			var version int64
			for ev, err := range typed.NewStore(stores[0], reg).Load(ctx, "account", "loops") {
				require.NoError(t, err)
				version++
				require.Equal(t, version, ev.Version, "versions without gaps")
			}
		})
	}
}
