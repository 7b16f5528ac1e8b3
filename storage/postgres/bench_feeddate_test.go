package postgres_test

import (
	"testing"

	"github.com/eventkit-go/eventstore/storage/storagetest"
)

// BenchmarkFeedDate reads one-hour windows of a 1,000,000-event feed by
// date and the same events by position, and reports the ratio
// (storagetest.BenchmarkFeedDate):
//
//	go test ./storage/postgres -run '^$' -bench FeedDate
func BenchmarkFeedDate(b *testing.B) {
	storagetest.BenchmarkFeedDate(b, newStorage)
}
