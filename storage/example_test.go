package storage_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// countingStorage wraps a backend and counts the appends that reach it:
// the shape of a decorator (metrics, tracing, fault injection) written
// against the contract. Every method it does not override is the wrapped
// backend's.
type countingStorage struct {
	storage.Storage
	appends atomic.Int64
}

func (c *countingStorage) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	c.appends.Add(1)
	return c.Storage.Append(ctx, req)
}

// Example wraps a backend in a decorator of the contract and hands it to
// eventstore.New: the application works with the Store, the Store calls
// the Storage.
func Example() {
	ctx := context.Background()
	backend := &countingStorage{Storage: memory.New()}
	st, err := eventstore.New(backend, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	id := eventstore.NewEventID()
	for range 2 { // a retry with the same id stores nothing twice
		res, err := st.Save(ctx, "order", "o-1", []eventstore.NewEvent{{ID: id, Type: "Placed"}}, nil)
		fmt.Println(res.Version, res.Duplicate, err)
	}
	fmt.Println("appends that reached the backend:", backend.appends.Load())
	// Output:
	// 1 false <nil>
	// 1 true <nil>
	// appends that reached the backend: 2
}

// ExamplePlanAppend shows the rules every backend applies inside its
// atomic append step.
func ExamplePlanAppend() {
	req := storage.AppendRequest{AggregateType: "order", AggregateID: "o-1",
		ExpectedVersion: storage.ExpectVersion(1), Events: []storage.Event{{ID: "e-2"}}}
	_, _, err := storage.PlanAppend(req, 2, nil)
	fmt.Println(err)
	_, done, err := storage.PlanAppend(req, 1, nil)
	fmt.Println(done, err)
	// Output:
	// expected version 1 of order/o-1, it is at 2
	// false <nil>
}
