package eventstore_test

import (
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/fakestorage"
	"github.com/eventkit-go/eventstore/internal/limits"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadFeedByDate reads entries by FeedOptions.From and To, alone and
// with the cursor, Limit, Types and partitions.
func TestReadFeedByDate(t *testing.T) {
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var now time.Time
	st, err := eventstore.New(memory.New(), &eventstore.Options{Now: func() time.Time { return now }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	ctx := t.Context()
	// Hours after day; saved out of time order.
	plan := []struct {
		typ, id string
		hour    int
	}{{"user", "u1", 1}, {"order", "o1", 3}, {"user", "u2", 2}, {"order", "o2", 5}, {"user", "u1", 4}, {"order", "o1", 2}, {"user", "u3", 26}}
	for _, p := range plan {
		now = day.Add(time.Duration(p.hour) * time.Hour)
		_, err := st.Save(ctx, p.typ, p.id, evs(2), nil)
		require.NoError(t, err)
	}
	at := func(h int) time.Time { return day.Add(time.Duration(h) * time.Hour) }
	names := func(es []eventstore.FeedEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.AggregateType+"/"+e.AggregateID+"@"+e.RecordedAt.Format("15"))
			for _, ev := range e.Events {
				assert.Equal(t, e.RecordedAt, ev.RecordedAt, "one time per batch")
			}
		}
		return out
	}
	for _, c := range []struct {
		name     string
		typ      string
		opts     eventstore.FeedOptions
		want     []string
		moreOnly bool
	}{
		{"both bounds, inclusive", "", eventstore.FeedOptions{From: at(2), To: at(4)},
			[]string{"order/o1@03", "user/u2@02", "user/u1@04", "order/o1@02"}, false},
		{"only From", "", eventstore.FeedOptions{From: at(5)}, []string{"order/o2@05", "user/u3@02"}, false},
		{"only To", "", eventstore.FeedOptions{To: at(2)}, []string{"user/u1@01", "user/u2@02", "order/o1@02"}, false},
		{"a type's feed", "order", eventstore.FeedOptions{From: at(2), To: at(3)}, []string{"order/o1@03", "order/o1@02"}, false},
		{"Types", "", eventstore.FeedOptions{From: at(2), To: at(5), Types: []string{"order"}}, []string{"order/o1@03", "order/o2@05", "order/o1@02"}, false},
		{"an empty range", "", eventstore.FeedOptions{From: at(6), To: at(7)}, nil, false},
		{"one instant", "", eventstore.FeedOptions{From: at(3), To: at(3)}, []string{"order/o1@03"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, err := st.ReadFeed(ctx, c.typ, 0, &c.opts)
			require.NoError(t, err)
			assert.Equal(t, c.want, names(res.Entries))
			assert.False(t, res.HasMore)
			// Paging with Limit 1 from Next reads the same, once each.
			var got []string
			after := int64(0)
			opts := c.opts
			opts.Limit = 1
			for range 20 {
				res, err := st.ReadFeed(ctx, c.typ, after, &opts)
				require.NoError(t, err)
				got = append(got, names(res.Entries)...)
				require.GreaterOrEqual(t, res.Next, after)
				after = res.Next
				if !res.HasMore {
					break
				}
			}
			assert.Equal(t, c.want, got)
			// Partitions split the range's entries.
			count := 0
			for n := range 2 {
				opts := c.opts
				opts.PartitionCount, opts.PartitionNumber = 2, n
				part, err := st.ReadFeed(ctx, c.typ, 0, &opts)
				require.NoError(t, err)
				for _, e := range part.Entries {
					assert.Equal(t, n, eventstore.Partition(e.AggregateID, 2))
				}
				count += len(part.Entries)
			}
			assert.Equal(t, len(c.want), count)
		})
	}
	// The head stays that of the whole feed.
	res, err := st.ReadFeed(ctx, "", 0, &eventstore.FeedOptions{From: at(6), To: at(7)})
	require.NoError(t, err)
	head, err := st.FeedHead(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, head, res.Head)
}

func TestReadFeedByDateValidation(t *testing.T) {
	st := newFakeStore(t, fakestorage.New())
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		opts  eventstore.FeedOptions
		field string
	}{
		{eventstore.FeedOptions{From: day, To: day.Add(-time.Nanosecond)}, "from"},
		{eventstore.FeedOptions{From: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}, "from"},
		{eventstore.FeedOptions{To: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "to"},
		{eventstore.FeedOptions{From: limits.MaxFeedTime.Add(time.Nanosecond)}, "from"},
	} {
		_, err := st.ReadFeed(t.Context(), "", 0, &c.opts)
		var ve *eventstore.ValidationError
		if assert.ErrorAs(t, err, &ve, "%+v", c) {
			assert.Equal(t, c.field, ve.Fields[0].Field)
		}
		assert.ErrorIs(t, err, storage.ErrInvalid)
	}
	_, err := st.ReadFeed(t.Context(), "", 0, &eventstore.FeedOptions{From: limits.MinFeedTime, To: limits.MaxFeedTime})
	assert.NoError(t, err)
}
