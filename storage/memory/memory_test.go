package memory_test

import (
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/storagetest"
)

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(testing.TB) eventstore.Storage { return memory.New() })
}
