package postgres_test

import (
	"testing"

	"github.com/eventkit-go/eventstore/storage/storagetest"
)

// BenchmarkTypeFeed reads a type's feed in a store where it holds 1 % of
// 1,000,000 events and in a store of that type alone, each in a schema of
// its own, and reports the ratio (storagetest.BenchmarkTypeFeed):
//
//	go test ./storage/postgres -run '^$' -bench TypeFeed
func BenchmarkTypeFeed(b *testing.B) {
	storagetest.BenchmarkTypeFeed(b, newStorage)
}
