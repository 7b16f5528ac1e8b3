package sqlite_test

import (
	"testing"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/storagetest"
)

// BenchmarkTypeFeed reads a type's feed in a store where it holds 1 % of
// 1,000,000 events and in a store of that type alone, and reports the
// ratio (storagetest.BenchmarkTypeFeed):
//
//	go test ./storage/sqlite -run '^$' -bench TypeFeed
func BenchmarkTypeFeed(b *testing.B) {
	storagetest.BenchmarkTypeFeed(b, func(tb testing.TB) storage.Storage { return openTemp(tb) })
}
