package storage_test

import (
	"fmt"

	"github.com/eventkit-go/eventstore/storage"
)

// ExampleAppendMetadata encodes metadata as backends store it and reads it
// back.
func ExampleAppendMetadata() {
	m := storage.Metadata{CorrelationID: "req-17", CausationID: "cmd-3", Values: map[string]string{"tenant": "acme"}}
	b := storage.AppendMetadata(nil, m)
	fmt.Println(string(b))
	back, err := storage.ParseMetadata(b)
	fmt.Println(back.Equal(m), err)
	v, ok := back.Value("tenant")
	fmt.Println(v, ok)
	fmt.Println(len(storage.AppendMetadata(nil, storage.Metadata{})))
	// Output:
	// {"causationId":"cmd-3","correlationId":"req-17","tenant":"acme"}
	// true <nil>
	// acme true
	// 0
}
