package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/sqlite"
)

// A durable store in one file: events survive closing and reopening it.
func ExampleOpen() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "events.db")

	s, err := sqlite.Open(path, nil)
	if err != nil {
		panic(err)
	}
	st, _ := eventstore.New(s, nil)
	_, err = st.Save(ctx, "cart", "c-1", []eventstore.NewEvent{
		{ID: "5b0e7c1a-3f0d-4c1e-9a59-1d2f3e4a5b01", Type: "ItemAdded"},
	}, nil)
	if err != nil {
		panic(err)
	}
	_ = st.Close()

	s, err = sqlite.Open(path, nil) // reopen: the event is still there
	if err != nil {
		panic(err)
	}
	st, _ = eventstore.New(s, nil)
	defer st.Close()
	agg, err := st.Load(ctx, "cart", "c-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(len(agg.Events), agg.Events[0].Type)
	// Output: 1 ItemAdded
}
