package eventstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// deleteBetweenReads deletes one aggregate, as another process would,
// just before the first feed read that continues after a position.
type deleteBetweenReads struct {
	storage.Storage
	typ, id string
	deleted bool
}

func (s *deleteBetweenReads) ReadFeed(ctx context.Context, q storage.FeedQuery) (storage.FeedPage, error) {
	if q.After > 0 && !s.deleted {
		s.deleted = true
		if err := s.Storage.DeleteAggregate(ctx, s.typ, s.id); err != nil {
			return storage.FeedPage{}, err
		}
	}
	return s.Storage.ReadFeed(ctx, q)
}

// TestFeedBatchDeletedBetweenReads: a page of the all-types feed ends in
// the middle of a batch (the read budget), and the batch's aggregate is
// deleted before the reader reads on. The reader must not hand out the
// part it had as the whole batch: it gives the batch whole or not at all
// (here not at all: it is gone).
func TestFeedBatchDeletedBetweenReads(t *testing.T) {
	ctx := context.Background()
	ds := &deleteBetweenReads{Storage: memory.New(), typ: "order", id: "a"}
	st, err := eventstore.New(ds, &eventstore.Options{MaxReadBytes: 4_000})
	require.NoError(t, err)
	defer st.Close()
	pad := strings.Repeat("x", 3_000)
	evs := make([]eventstore.NewEvent, 3)
	for i := range evs {
		evs[i] = pev(i+1, "Placed", fmt.Sprintf(`{"pad":%q}`, pad))
	}
	save(t, st, "order", "a", evs...)
	save(t, st, "order", "b", pev(10, "Placed", `{}`))

	res, err := st.ReadFeed(ctx, "", 0, nil)
	require.NoError(t, err)
	require.True(t, ds.deleted, "the reader read on after a page that ended inside the batch")
	var got []string
	for _, e := range res.Entries {
		got = append(got, fmt.Sprintf("%s: %d events", e.AggregateID, len(e.Events)))
	}
	assert.Equal(t, []string{"b: 1 events"}, got, "the deleted aggregate's batch is gone, not cut")
}

// TestReadFeedRangeBatchDeletedBetweenReads: a storage read of a range
// of the feed (package archive's Export, hooks.ReadFeedRange)
// ends inside a batch (a byte budget of one event a read) whose aggregate
// is deleted before the next read. The range must not hold the part read
// as if it were the batch: the batch is gone, so is its entry.
func TestReadFeedRangeBatchDeletedBetweenReads(t *testing.T) {
	ctx := context.Background()
	ds := &deleteBetweenReads{Storage: memory.New(), typ: "order", id: "a"}
	st, err := eventstore.New(ds, &eventstore.Options{MaxReadBytes: 1})
	require.NoError(t, err)
	defer st.Close()
	for _, b := range []struct {
		id string
		n  int
	}{{"a", 3}, {"b", 1}} {
		events := make([]eventstore.NewEvent, b.n)
		for j := range events {
			events[j] = eventstore.NewEvent{ID: eventstore.NewEventID(), Type: "Happened", Data: []byte(`{"i":1}`)}
		}
		_, err := st.Save(ctx, "order", b.id, events, nil)
		require.NoError(t, err)
	}
	v, err := hooks.ReadFeedRange(ctx, st, 0, 4)
	require.NoError(t, err)
	require.True(t, ds.deleted, "the range was read in more than one storage read")
	var got []string
	for _, e := range v.([]eventstore.FeedEntry) {
		got = append(got, fmt.Sprintf("%s: %d events", e.AggregateID, len(e.Events)))
	}
	require.Equal(t, []string{"b: 1 events"}, got, "the deleted aggregate's batch is gone, not cut")
}
