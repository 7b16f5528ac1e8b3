package memory_test

import (
	"context"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// An in-memory store for a test: nothing to set up or clean, nothing kept.
func ExampleNew() {
	ctx := context.Background()
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		panic(err)
	}
	defer st.Close()

	_, err = st.Save(ctx, "cart", "c-1", []eventstore.NewEvent{
		{ID: "5b0e7c1a-3f0d-4c1e-9a59-1d2f3e4a5b01", Type: "ItemAdded", Data: []byte(`{"sku":"pen"}`)},
	}, nil)
	if err != nil {
		panic(err)
	}
	agg, err := st.Load(ctx, "cart", "c-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(agg.Version, agg.Events[0].Type, string(agg.Events[0].Data))
	// Output: 1 ItemAdded {"sku":"pen"}
}
