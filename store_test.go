package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newStore(t *testing.T) *eventstore.Store {
	t.Helper()
	st, err := eventstore.New(memory.New(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func ev(typ, data string) eventstore.NewEvent {
	e := eventstore.NewEvent{ID: uuid.NewString(), Type: typ}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

func TestNewRejectsNilStorage(t *testing.T) {
	_, err := eventstore.New(nil, nil)
	assert.ErrorIs(t, err, eventstore.ErrInvalid)
}

func TestSaveValidation(t *testing.T) {
	ctx := context.Background()
	good := ev("Placed", `{"a":1}`)
	cases := []struct {
		name      string
		typ, id   string
		events    []eventstore.NewEvent
		wantField string
	}{
		{"empty batch", "order", "1", nil, "events"},
		{"bad uuid", "order", "1", []eventstore.NewEvent{good, {ID: "not-a-uuid", Type: "X"}}, "events[1].eventId"},
		{"uuid without hyphens", "order", "1", []eventstore.NewEvent{{ID: strings.ReplaceAll(uuid.NewString(), "-", ""), Type: "X"}}, "events[0].eventId"},
		{"missing id", "order", "1", []eventstore.NewEvent{{Type: "X"}}, "events[0].eventId"},
		{"empty type", "order", "1", []eventstore.NewEvent{{ID: uuid.NewString()}}, "events[0].eventType"},
		{"NUL in type", "order", "1", []eventstore.NewEvent{good, ev("A\x00B", "")}, "events[1].eventType"},
		{"data array", "order", "1", []eventstore.NewEvent{good, ev("X", `[1,2]`)}, "events[1].data"},
		{"data string", "order", "1", []eventstore.NewEvent{ev("X", `"s"`)}, "events[0].data"},
		{"data invalid json", "order", "1", []eventstore.NewEvent{ev("X", `{"a":`)}, "events[0].data"},
		{"same id twice", "order", "1", []eventstore.NewEvent{good, good}, "events[1].eventId"},
		{"slash in type", "or/der", "1", []eventstore.NewEvent{good}, "aggregateType"},
		{"empty id", "order", "", []eventstore.NewEvent{good}, "aggregateId"},
		{"control char in id", "order", "a\nb", []eventstore.NewEvent{good}, "aggregateId"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := newStore(t)
			_, err := st.Save(ctx, c.typ, c.id, c.events, nil)
			require.ErrorIs(t, err, eventstore.ErrInvalid)
			var ve *eventstore.ValidationError
			require.True(t, errors.As(err, &ve), "error %v is not a *ValidationError", err)
			fields := make([]string, len(ve.Fields))
			for i, f := range ve.Fields {
				fields[i] = f.Field
			}
			assert.Contains(t, fields, c.wantField)
			assert.Contains(t, err.Error(), c.wantField)
			if c.id != "" && c.typ != "" {
				_, err = st.Load(ctx, c.typ, c.id)
				assert.Error(t, err, "nothing may be stored after a rejected batch")
			}
		})
	}
	t.Run("negative expected version", func(t *testing.T) {
		st := newStore(t)
		_, err := st.Save(ctx, "order", "1", []eventstore.NewEvent{good}, &eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(-1)})
		assert.ErrorIs(t, err, eventstore.ErrInvalid)
	})
}

func TestSaveAcceptsNullAndMissingData(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	_, err := st.Save(ctx, "order", "1", []eventstore.NewEvent{ev("A", ""), ev("B", "null"), ev("C", " {} ")}, nil)
	require.NoError(t, err)
	agg, err := st.Load(ctx, "order", "1")
	require.NoError(t, err)
	require.Len(t, agg.Events, 3)
	assert.Nil(t, agg.Events[0].Data)
	assert.Nil(t, agg.Events[1].Data)
	assert.Equal(t, " {} ", string(agg.Events[2].Data))
}

func TestSaveNormalizesIDsAndCopiesData(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	id := uuid.NewString()
	data := []byte(`{"n":1}`)
	_, err := st.Save(ctx, "order", "1", []eventstore.NewEvent{{ID: strings.ToUpper(id), Type: "A", Data: data}}, nil)
	require.NoError(t, err)
	copy(data, `{"n":2}`)

	agg, err := st.Load(ctx, "order", "1")
	require.NoError(t, err)
	assert.Equal(t, id, agg.Events[0].ID, "ids are stored in lower case")
	assert.Equal(t, `{"n":1}`, string(agg.Events[0].Data), "Save must copy the caller's data")

	// The upper-case id is the same event: a retry is a duplicate.
	res, err := st.Save(ctx, "order", "1", []eventstore.NewEvent{{ID: id, Type: "A", Data: []byte(`{"n":1}`)}}, nil)
	require.NoError(t, err)
	assert.True(t, res.Duplicate)
	// The same id with other data is not a retry.
	_, err = st.Save(ctx, "order", "1", []eventstore.NewEvent{{ID: id, Type: "A"}}, nil)
	var ce *eventstore.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, id, ce.ReusedID)
}

func TestVersionsCountSaves(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	r1, err := st.Save(ctx, "order", "1", []eventstore.NewEvent{ev("A", ""), ev("B", ""), ev("C", "")}, nil)
	require.NoError(t, err)
	r2, err := st.Save(ctx, "order", "1", []eventstore.NewEvent{ev("D", "")}, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(1), r1.Version)
	assert.Equal(t, int64(2), r2.Version)
	assert.Greater(t, r2.Position, r1.Position)

	agg, err := st.Load(ctx, "order", "1")
	require.NoError(t, err)
	assert.Equal(t, int64(2), agg.Version)
	var versions, seqs []int64
	for _, e := range agg.Events {
		versions = append(versions, e.Version)
		seqs = append(seqs, e.Sequence)
	}
	assert.Equal(t, []int64{1, 1, 1, 2}, versions)
	assert.Equal(t, []int64{1, 2, 3, 4}, seqs)
}

func TestRecordedAtUsesClock(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 6789, time.FixedZone("x", 3600))
	st, err := eventstore.New(memory.New(), &eventstore.Options{Now: func() time.Time { return now }})
	require.NoError(t, err)
	defer st.Close()
	_, err = st.Save(ctx, "order", "1", []eventstore.NewEvent{ev("A", "")}, nil)
	require.NoError(t, err)
	agg, err := st.Load(ctx, "order", "1")
	require.NoError(t, err)
	assert.Equal(t, now.UTC().Truncate(time.Microsecond), agg.Events[0].RecordedAt)
	assert.Equal(t, time.UTC, agg.Events[0].RecordedAt.Location())
}

func TestConcurrentExpectedVersionOneWins(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	_, err := st.Save(ctx, "acct", "1", []eventstore.NewEvent{ev("Opened", "")}, nil)
	require.NoError(t, err)
	const k = 32
	errs := make(chan error, k)
	var wg sync.WaitGroup
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := st.Save(ctx, "acct", "1", []eventstore.NewEvent{ev("Deposited", "")},
				&eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(1)})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	wins, conflicts := 0, 0
	for err := range errs {
		switch {
		case err == nil:
			wins++
		case errors.Is(err, eventstore.ErrConflict):
			conflicts++
		default:
			t.Errorf("unexpected error %v", err)
		}
	}
	assert.Equal(t, 1, wins)
	assert.Equal(t, k-1, conflicts)
	agg, err := st.Load(ctx, "acct", "1")
	require.NoError(t, err)
	assert.Equal(t, int64(2), agg.Version)
}

func TestClosedStore(t *testing.T) {
	ctx := context.Background()
	st, err := eventstore.New(memory.New(), nil)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "Close is idempotent")
	_, err = st.Save(ctx, "a", "1", []eventstore.NewEvent{ev("A", "")}, nil)
	assert.ErrorIs(t, err, eventstore.ErrClosed)
	_, err = st.Load(ctx, "a", "1")
	assert.ErrorIs(t, err, eventstore.ErrClosed)
}

func TestErrorsNameAggregate(t *testing.T) {
	st := newStore(t)
	_, err := st.Load(context.Background(), "order", "missing")
	require.ErrorIs(t, err, eventstore.ErrNotFound)
	assert.Equal(t, fmt.Sprintf("aggregate order/missing: %v", eventstore.ErrNotFound), err.Error())
}

// requestChecker is a Storage that records what each Append receives.
type requestChecker struct {
	storage.Storage
	t *testing.T
}

func (c requestChecker) Append(ctx context.Context, req storage.AppendRequest) (storage.AppendResult, error) {
	if cap(req.Events) != len(req.Events) {
		c.t.Errorf("request of %d events has capacity %d: a Storage appending to it would write past the batch", len(req.Events), cap(req.Events))
	}
	return c.Storage.Append(ctx, req)
}

func (c requestChecker) AppendAll(ctx context.Context, reqs []storage.AppendRequest) ([]storage.AppendResult, error) {
	for i, req := range reqs {
		if cap(req.Events) != len(req.Events) {
			c.t.Errorf("request %d of %d events has capacity %d: a Storage appending to it would write over the next", i, len(req.Events), cap(req.Events))
		}
	}
	return c.Storage.AppendAll(ctx, reqs)
}

// The Store reuses the event slices of its storage requests: each request
// must hold its own batch alone, whatever the saves before it held.
func TestSaveRequestsHoldTheirBatchAlone(t *testing.T) {
	ctx := context.Background()
	st, err := eventstore.New(requestChecker{memory.New(), t}, nil)
	require.NoError(t, err)
	defer st.Close()
	var want []string
	for i, n := range []int{5, 1, 3, 64, 2, 65, 1} {
		batch := make([]eventstore.NewEvent, n)
		for j := range batch {
			batch[j] = ev(fmt.Sprintf("T%d", i), fmt.Sprintf(`{"save":%d,"n":%d}`, i, j))
			want = append(want, string(batch[j].Data))
		}
		_, err := st.Save(ctx, "order", "1", batch, nil)
		require.NoError(t, err)
	}
	agg, err := st.Load(ctx, "order", "1")
	require.NoError(t, err)
	got := make([]string, len(agg.Events))
	for i, e := range agg.Events {
		got[i] = string(e.Data)
	}
	assert.Equal(t, want, got)
}

// SaveAll builds its requests' events in one slice: each request must
// still hold its own batch alone.
func TestSaveAllRequestsHoldTheirBatchAlone(t *testing.T) {
	ctx := context.Background()
	st, err := eventstore.New(requestChecker{memory.New(), t}, nil)
	require.NoError(t, err)
	defer st.Close()
	batches := make([]eventstore.Batch, 4)
	for i := range batches {
		batches[i].AggregateID = fmt.Sprint(i)
		for j := range i + 1 {
			batches[i].Events = append(batches[i].Events, ev("T", fmt.Sprintf(`{"batch":%d,"n":%d}`, i, j)))
		}
	}
	_, err = st.SaveAll(ctx, "order", batches)
	require.NoError(t, err)
	for i, b := range batches {
		agg, err := st.Load(ctx, "order", b.AggregateID)
		require.NoError(t, err)
		require.Len(t, agg.Events, len(b.Events))
		for j, e := range agg.Events {
			assert.Equal(t, b.Events[j].ID, e.ID, "batch %d event %d", i, j)
			assert.Equal(t, string(b.Events[j].Data), string(e.Data), "batch %d event %d", i, j)
		}
	}
}
