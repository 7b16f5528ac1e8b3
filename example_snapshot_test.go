package eventstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/google/uuid"
)

// ExampleStore_SaveSnapshot folds an account's balance, saves it as a
// snapshot every ten saves, and loads the account from its latest
// snapshot and the events after it.
func ExampleStore_SaveSnapshot() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()

	type balance struct{ Cents int64 }
	const stateVersion = 1 // bumped when balance changes shape
	apply := func(b *balance, events []eventstore.Event) {
		for _, e := range events {
			var d struct{ Cents int64 }
			_ = json.Unmarshal(e.Data, &d)
			b.Cents += d.Cents
		}
	}

	var state balance
	for i := 1; i <= 25; i++ {
		e := eventstore.NewEvent{ID: uuid.NewString(), Type: "Deposited", Data: []byte(`{"Cents":100}`)}
		res, err := st.Save(ctx, "account", "a-1", []eventstore.NewEvent{e}, nil)
		if err != nil {
			fmt.Println(err)
			return
		}
		state.Cents += 100
		if res.Version%10 == 0 {
			data, _ := json.Marshal(state)
			err := st.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "account", AggregateID: "a-1",
				Version: res.Version, StateVersion: stateVersion, Data: data})
			if err != nil {
				fmt.Println(err)
			}
		}
	}

	// Load: the snapshot (if any, of this shape), then the events after it.
	var loaded balance
	var after int64
	snap, err := st.LoadSnapshot(ctx, "account", "a-1")
	switch {
	case err == nil && snap.StateVersion == stateVersion && json.Unmarshal(snap.Data, &loaded) == nil:
		after = snap.Version
	case err == nil, errors.Is(err, eventstore.ErrNotFound):
		loaded = balance{} // none, or of another shape: fold from the first event
	default:
		fmt.Println(err)
		return
	}
	agg, _, err := st.LoadRange(ctx, "account", "a-1", after, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	apply(&loaded, agg.Events)
	fmt.Printf("snapshot at version %d, %d events after it, balance %d at version %d\n",
		snap.Version, len(agg.Events), loaded.Cents, agg.Version)

	// A snapshot of a version the aggregate does not have is refused.
	err = st.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "account", AggregateID: "a-1", Version: 26})
	fmt.Println(errors.Is(err, eventstore.ErrConflict))
	// Output:
	// snapshot at version 20, 5 events after it, balance 2500 at version 25
	// true
}
