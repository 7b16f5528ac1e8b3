package sqlite_test

import (
	"testing"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/storagetest"
)

// BenchmarkFeedDate reads one-hour windows of a 1,000,000-event feed by
// date and the same events by position, and reports the ratio
// (storagetest.BenchmarkFeedDate):
//
//	go test ./storage/sqlite -run '^$' -bench FeedDate
func BenchmarkFeedDate(b *testing.B) {
	storagetest.BenchmarkFeedDate(b, func(tb testing.TB) storage.Storage { return openTemp(tb) })
}
