package archive_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/sqlite"
	"github.com/stretchr/testify/require"
)

// TestReadFeedRange checks the ranges Export reads the feed in
// (hooks.ReadFeedRange) against the feed read page by page, on every
// backend: for ranges that start and end inside batches, at their ends,
// inside one batch longer than the range, across deleted aggregates and
// to the head, the entries whose cursor is in the range, whole, in order;
// also with a byte budget that makes every storage read one event.
func TestReadFeedRange(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"memory", "sqlite", "postgres"} {
		for _, budget := range []int64{0, 1} {
			t.Run(fmt.Sprintf("%s/budget=%d", kind, budget), func(t *testing.T) {
				st, err := eventstore.New(openStorage(t, kind), &eventstore.Options{MaxReadBytes: budget})
				require.NoError(t, err)
				t.Cleanup(func() { _ = st.Close() })
				at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
				var group []eventstore.ImportedBatch
				for i := range 120 {
					n := 1 + i%4
					if i%25 == 7 {
						n = 30 // longer than some ranges
					}
					events := make([]eventstore.NewEvent, n)
					for j := range events {
						events[j] = eventstore.NewEvent{ID: eventstore.NewEventID(), Type: "Happened", Data: []byte(`{"i":1}`)}
					}
					group = append(group, eventstore.ImportedBatch{AggregateType: []string{"order", "cart"}[i%2],
						AggregateID: fmt.Sprint("a-", i%40), Events: events, RecordedAt: at,
						ExpectedVersion: eventstore.ExpectVersion(int64(i / 40))})
					if len(group) == 40 {
						_, err := st.SaveImported(ctx, group)
						require.NoError(t, err)
						group = group[:0]
					}
				}
				for i := 0; i < 40; i += 9 {
					require.NoError(t, st.DeleteAggregate(ctx, []string{"order", "cart"}[i%2], fmt.Sprint("a-", i)))
				}
				var all []eventstore.FeedEntry
				for after := int64(0); ; {
					res, err := st.ReadFeed(ctx, "", after, &eventstore.FeedOptions{Limit: 100})
					require.NoError(t, err)
					all = append(all, res.Entries...)
					if !res.HasMore {
						break
					}
					after = res.Next
				}
				head, err := st.FeedHead(ctx, "")
				require.NoError(t, err)
				require.Equal(t, all[len(all)-1].Cursor, head)
				straddled := 0
				for after := int64(0); after <= head; after += 1 + after%7 {
					for _, size := range []int64{0, 1, 2, 5, 13, 64, head} {
						upTo := min(after+size, head)
						var want []eventstore.FeedEntry
						for _, e := range all {
							if e.Cursor > after && e.Cursor <= upTo {
								want = append(want, e)
							}
							if p := e.Events[0].Position; p <= after && e.Cursor > after && e.Cursor <= upTo {
								straddled++
							}
						}
						got, err := hooks.ReadFeedRange(ctx, st, after, upTo)
						require.NoError(t, err, "(%d, %d]", after, upTo)
						require.Equal(t, len(want), len(got.([]eventstore.FeedEntry)), "(%d, %d]", after, upTo)
						if len(want) > 0 {
							require.Equal(t, want, got, "(%d, %d]", after, upTo)
						}
					}
				}
				require.NotZero(t, straddled, "ranges that start inside a batch")
				_, err = hooks.ReadFeedRange(ctx, st, 5, 4)
				require.ErrorIs(t, err, eventstore.ErrInvalid)
			})
		}
	}
}

// openStorage opens an empty Storage of kind, closed by the Store given
// it; a PostgreSQL one on a fresh schema, dropped at the end (it skips
// when PostgreSQL is unreachable, unless EVENTSTORE_POSTGRES_REQUIRED=1).
func openStorage(t *testing.T, kind string) storage.Storage {
	switch kind {
	case "memory":
		return memory.New()
	case "sqlite":
		s, err := sqlite.Open(filepath.Join(t.TempDir(), "es.db"), nil)
		require.NoError(t, err)
		return s
	}
	return openPostgresStorage(t)
}
