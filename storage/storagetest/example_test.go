package storagetest_test

import (
	"testing"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/storagetest"
)

// A backend proves it conforms with one test function; every subtest gets a
// fresh Storage from the function passed in.
func ExampleRun() {
	_ = func(t *testing.T) { // in the backend's _test.go file: func TestConformance(t *testing.T)
		storagetest.Run(t, func(tb testing.TB) storage.Storage { return memory.New() })
	}
}
