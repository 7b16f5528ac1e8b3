package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSaveImported: imported batches keep their recorded times, of any
// type, out of order, with positions in the batches' order; a feed read by
// date finds them by those times.
func TestSaveImported(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		ctx := t.Context()
		saveAll(t, st, []saved{{"order", "live", 1}}) // recorded now
		old := time.Date(2019, 5, 1, 12, 0, 0, 123456789, time.UTC)
		older := time.Date(2011, 1, 2, 3, 4, 5, 6000, time.UTC)
		user := evs(1)
		res, err := st.SaveImported(ctx, []eventstore.ImportedBatch{
			{AggregateType: "order", AggregateID: "o1", Events: evs(2), ExpectedVersion: eventstore.ExpectVersion(0), RecordedAt: old},
			{AggregateType: "user", AggregateID: "o1", Events: user, RecordedAt: older},
			{AggregateType: "order", AggregateID: "o2", Events: evs(1), RecordedAt: old.Add(time.Hour)},
		})
		require.NoError(t, err)
		require.Len(t, res, 3)
		assert.Less(t, res[0].Position, res[1].Position)
		assert.Less(t, res[1].Position, res[2].Position)

		agg, err := st.Load(ctx, "order", "o1")
		require.NoError(t, err)
		for _, e := range agg.Events {
			assert.Equal(t, old.Truncate(time.Microsecond), e.RecordedAt, "the batch's time, at microsecond precision")
		}
		agg, err = st.Load(ctx, "user", "o1")
		require.NoError(t, err)
		assert.Equal(t, older, agg.Events[0].RecordedAt)

		// By date: only the imported order events of 2019, in position order.
		f, err := st.ReadFeed(ctx, "", 0, &eventstore.FeedOptions{From: old.Add(-time.Minute), To: old.Add(2 * time.Hour)})
		require.NoError(t, err)
		var got []string
		for _, e := range f.Entries {
			got = append(got, e.AggregateType+"/"+e.AggregateID)
			assert.Equal(t, e.Events[0].RecordedAt, e.RecordedAt)
		}
		assert.Equal(t, []string{"order/o1", "order/o2"}, got)
		f, err = st.ReadFeed(ctx, "user", 0, &eventstore.FeedOptions{To: time.Date(2012, 1, 1, 0, 0, 0, 0, time.UTC)})
		require.NoError(t, err)
		require.Len(t, f.Entries, 1)
		assert.Equal(t, "o1", f.Entries[0].AggregateID)

		// Run again: duplicates, nothing stored twice.
		res, err = st.SaveImported(ctx, []eventstore.ImportedBatch{
			{AggregateType: "user", AggregateID: "o1", Events: user, RecordedAt: older},
		})
		require.NoError(t, err)
		assert.True(t, res[0].Duplicate)
	})
}

func TestSaveImportedValidation(t *testing.T) {
	forBackends(t, func(t *testing.T, st *eventstore.Store) {
		ctx := t.Context()
		now := time.Now()
		for _, c := range []struct {
			name  string
			batch eventstore.ImportedBatch
			field string
		}{
			{"no time", eventstore.ImportedBatch{AggregateType: "order", AggregateID: "o1", Events: evs(1)}, "batches[0].recordedAt"},
			{"before 1970", eventstore.ImportedBatch{AggregateType: "order", AggregateID: "o1", Events: evs(1), RecordedAt: time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)}, "batches[0].recordedAt"},
			{"in the future", eventstore.ImportedBatch{AggregateType: "order", AggregateID: "o1", Events: evs(1), RecordedAt: now.Add(6 * time.Minute)}, "batches[0].recordedAt"},
			{"bad type", eventstore.ImportedBatch{AggregateType: "a/b", AggregateID: "o1", Events: evs(1), RecordedAt: now}, "batches[0].aggregateType"},
			{"no events", eventstore.ImportedBatch{AggregateType: "order", AggregateID: "o1", RecordedAt: now}, "batches[0].events"},
		} {
			_, err := st.SaveImported(ctx, []eventstore.ImportedBatch{c.batch})
			var ve *eventstore.ValidationError
			require.True(t, errors.As(err, &ve), "%s: %v", c.name, err)
			require.ErrorIs(t, err, eventstore.ErrInvalid)
			assert.Equal(t, c.field, ve.Fields[0].Field, c.name)
		}
		// Within the skew is taken; so is one aggregate twice, in order.
		_, err := st.SaveImported(ctx, []eventstore.ImportedBatch{{AggregateType: "order", AggregateID: "o1", Events: evs(1), RecordedAt: now.Add(time.Minute)}})
		require.NoError(t, err)
		res, err := st.SaveImported(ctx, []eventstore.ImportedBatch{
			{AggregateType: "x", AggregateID: "a", Events: evs(1), RecordedAt: now},
			{AggregateType: "y", AggregateID: "a", Events: evs(1), RecordedAt: now},
			{AggregateType: "x", AggregateID: "a", Events: evs(1), RecordedAt: now, ExpectedVersion: eventstore.ExpectVersion(1)},
		})
		require.NoError(t, err)
		assert.Equal(t, []int64{1, 1, 2}, []int64{res[0].Version, res[1].Version, res[2].Version})
		_, err = st.SaveImported(ctx, nil)
		require.ErrorIs(t, err, eventstore.ErrInvalid)
	})
}

// ExampleStore_SaveImported saves events recorded in another store,
// keeping the time they were recorded there.
func ExampleStore_SaveImported() {
	ctx := context.Background()
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	at := time.Date(2020, 3, 1, 9, 30, 0, 0, time.UTC)
	_, err := st.SaveImported(ctx, []eventstore.ImportedBatch{{
		AggregateType: "order", AggregateID: "o-1", RecordedAt: at,
		Events:          []eventstore.NewEvent{{ID: "5b0e7c1a-3f0d-4c1e-9a59-1d2f3e4a5b01", Type: "Placed", Data: []byte(`{"total":"9.90"}`)}},
		ExpectedVersion: eventstore.ExpectVersion(0),
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	agg, _ := st.Load(ctx, "order", "o-1")
	fmt.Println(agg.Version, agg.Events[0].RecordedAt)
	// Output: 1 2020-03-01 09:30:00 +0000 UTC
}
