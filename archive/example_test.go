package archive_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/archive"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// Copy a store into another through an archive, import it twice (the
// second time every batch is a duplicate) and verify the copy.
func Example() {
	ctx := context.Background()
	src, _ := eventstore.New(memory.New(), nil)
	defer src.Close()
	_, err := src.Save(ctx, "order", "o-1", []eventstore.NewEvent{
		{ID: "5b0e7c1a-3f0d-4c1e-9a59-1d2f3e4a5b01", Type: "Placed", Data: []byte(`{"total":"12.50"}`)},
		{ID: "5b0e7c1a-3f0d-4c1e-9a59-1d2f3e4a5b02", Type: "Paid"},
	}, nil)
	if err != nil {
		panic(err)
	}

	var file bytes.Buffer // or an *os.File
	if _, err := archive.Export(ctx, src, archive.NewWriter(&file), 0); err != nil {
		panic(err)
	}
	header, _, _ := bytes.Cut(file.Bytes(), []byte("\n"))
	fmt.Println(string(header))

	dst, _ := eventstore.New(memory.New(), nil)
	defer dst.Close()
	for range 2 {
		stats, err := archive.Import(ctx, dst, archive.NewReader(bytes.NewReader(file.Bytes())))
		if err != nil {
			panic(err)
		}
		fmt.Printf("%+v\n", stats)
	}
	fmt.Println(archive.Verify(ctx, src, dst))
	// Output:
	// {"format":"eventstore-archive","version":1}
	// {Batches:1 Events:2 Duplicates:0}
	// {Batches:0 Events:0 Duplicates:1}
	// <nil>
}
