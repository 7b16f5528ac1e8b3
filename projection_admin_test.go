package eventstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pev(id int, typ, data string) eventstore.NewEvent {
	return eventstore.NewEvent{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", id), Type: typ, Data: json.RawMessage(data)}
}

func countDef(name string, fns ...eventstore.Function) eventstore.Definition {
	return eventstore.Definition{Name: name, Feed: "order", Handlers: []eventstore.Handler{{EventType: "Placed", Functions: fns}}}
}

func TestPutCreatesReplacesAndIsIdempotent(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	d := countDef("n", eventstore.Function{Name: "inc", TargetSelector: "$.projection.count"})
	res, err := p.Put(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutCreated, res)
	res, err = p.Put(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutUnchanged, res, "a program may Put at every start")

	save(t, st, "order", "o1", pev(1, "Placed", `{"total":5}`))
	save(t, st, "order", "o1", pev(2, "Placed", `{"total":7}`))
	pj, err := p.Single(ctx, "n", "o1")
	require.NoError(t, err)
	assert.JSONEq(t, `{"count":"2"}`, string(pj.Data))

	d2 := countDef("n", eventstore.Function{Name: "add", TargetSelector: "$.projection.sum", EventSelector: "$.event.total"})
	res, err = p.Put(ctx, d2)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutReplacing, res)
	// Until the replacement has caught up, queries answer from the old one.
	pj, err = p.Single(ctx, "n", "o1")
	require.NoError(t, err)
	assert.JSONEq(t, `{"count":"2"}`, string(pj.Data))
	st1, err := p.Status(ctx, "n")
	require.NoError(t, err)
	assert.True(t, st1.Rebuilding)
	// The definition read back is the one put last, also while it rebuilds.
	got, err := p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, "add", got.Handlers[0].Functions[0].Name, "Definition answers with the replacement being rebuilt")
	defs, err := p.Definitions(ctx)
	require.NoError(t, err)
	require.Len(t, defs, 1, "a replacement is listed in the place of the definition it replaces")
	assert.Equal(t, "n", defs[0].Name)
	assert.Equal(t, "add", defs[0].Handlers[0].Functions[0].Name)

	require.NoError(t, p.CatchUp(ctx, "n"))
	pj, err = p.Single(ctx, "n", "o1")
	require.NoError(t, err)
	assert.JSONEq(t, `{"sum":"12"}`, string(pj.Data), "the replacement is rebuilt from the whole history")
	got, err = p.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, "add", got.Handlers[0].Functions[0].Name)
	defs, err = p.Definitions(ctx)
	require.NoError(t, err)
	assert.Len(t, defs, 1, "a replacement is not listed on its own")
}

// TestDefinitionAfterAnotherProjectorSwapped: a Projector that has the
// old definition cached answers Definition with the one another Projector
// (another process) put and swapped in, not with its stale copy.
func TestDefinitionAfterAnotherProjectorSwapped(t *testing.T) {
	ctx := context.Background()
	st, p1 := newProjector(t)
	p2 := eventstore.NewProjector(st, nil)
	save(t, st, "order", "o1", pev(1, "Placed", `{"total":5}`))
	_, err := p1.Put(ctx, countDef("n", eventstore.Function{Name: "inc", TargetSelector: "$.projection.count"}))
	require.NoError(t, err)
	_, err = p1.Single(ctx, "n", "o1") // p1 now has the first definition compiled and cached
	require.NoError(t, err)

	res, err := p2.Put(ctx, countDef("n", eventstore.Function{Name: "add", TargetSelector: "$.projection.sum", EventSelector: "$.event.total"}))
	require.NoError(t, err)
	require.Equal(t, eventstore.PutReplacing, res)
	got, err := p1.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, "add", got.Handlers[0].Functions[0].Name, "while the replacement rebuilds")
	require.NoError(t, p2.CatchUp(ctx, "n")) // builds the replacement and swaps it in
	got, err = p1.Definition(ctx, "n")
	require.NoError(t, err)
	assert.Equal(t, "add", got.Handlers[0].Functions[0].Name, "after another Projector swapped it in")
	defs, err := p1.Definitions(ctx)
	require.NoError(t, err)
	require.Len(t, defs, 1)
	assert.Equal(t, "add", defs[0].Handlers[0].Functions[0].Name)
}

func TestReplaceKeepsAnsweringUnderRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, p := newProjector(t)
	_, err := p.Put(ctx, countDef("n", eventstore.Function{Name: "inc", TargetSelector: "$.projection.count"}))
	require.NoError(t, err)
	for i := range 2000 {
		save(t, st, "order", "o1", pev(i+1, "Placed", `{"total":1}`))
	}
	_, err = p.Single(ctx, "n", "o1")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = p.Run(ctx) }()
	_, err = p.Put(ctx, countDef("n", eventstore.Function{Name: "add", TargetSelector: "$.projection.sum", EventSelector: "$.event.total"}))
	require.NoError(t, err)
	var sawOld, sawNew atomic.Int32
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pj, err := p.Single(ctx, "n", "o1")
		require.NoError(t, err, "queries keep answering while the replacement is built")
		switch string(pj.Data) {
		case `{"count":"2000"}`:
			sawOld.Add(1)
		case `{"sum":"2000"}`:
			sawNew.Add(1)
		default:
			t.Fatalf("a half-built or empty answer: %s", pj.Data)
		}
		if sawNew.Load() > 0 {
			break
		}
	}
	cancel()
	wg.Wait()
	assert.Positive(t, sawNew.Load(), "the replacement took over")
}

func TestDeleteAndResetDefinitions(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	d := countDef("n", eventstore.Function{Name: "inc", TargetSelector: "$.projection.count"})
	require.NoError(t, p.Create(ctx, d))
	save(t, st, "order", "o1", pev(1, "Placed", `{}`))
	_, err := p.Single(ctx, "n", "o1")
	require.NoError(t, err)

	require.NoError(t, p.Reset(ctx, "n"))
	pj, err := p.Single(ctx, "n", "o1")
	require.NoError(t, err, "a reset projection is rebuilt")
	assert.JSONEq(t, `{"count":"1"}`, string(pj.Data))

	require.NoError(t, p.Delete(ctx, "n"))
	_, err = p.Single(ctx, "n", "o1")
	assert.ErrorIs(t, err, eventstore.ErrNotFound)
	assert.ErrorIs(t, p.Delete(ctx, "n"), eventstore.ErrNotFound)
	require.NoError(t, p.Create(ctx, d), "the name can be used again")
}

func TestListAndCount(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	require.NoError(t, p.Create(ctx, countDef("l",
		eventstore.Function{Name: "set", TargetSelector: "$.projection.total", EventSelector: "$.event.total"},
		eventstore.Function{Name: "setref", TargetSelector: "$.projection.total"})))
	for i := range 25 {
		save(t, st, "order", fmt.Sprintf("o%02d", i), pev(i+1, "Placed", fmt.Sprintf(`{"total":%d}`, (i*7)%25)))
	}
	page, err := p.List(ctx, "l", eventstore.ListOptions{Limit: 10, Sort: eventstore.SortByReference, Descending: true})
	require.NoError(t, err)
	require.Len(t, page.Projections, 10)
	assert.EqualValues(t, 25, page.Total)
	assert.True(t, page.HasMore)
	assert.Equal(t, "24", page.Projections[0].Reference.Text, "numbers sort as numbers, not text")
	assert.Equal(t, "15", page.Projections[9].Reference.Text)

	page, err = p.List(ctx, "l", eventstore.ListOptions{RefFrom: eventstore.ParseReference("5"), RefTo: eventstore.ParseReference("9"), Sort: eventstore.SortByReference})
	require.NoError(t, err)
	assert.Len(t, page.Projections, 5)
	assert.False(t, page.HasMore)

	n, err := p.Count(ctx, "l", eventstore.ParseReference("7"))
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)

	_, err = p.List(ctx, "l", eventstore.ListOptions{Limit: 5000})
	var ve *eventstore.ValidationError
	assert.True(t, errors.As(err, &ve))
}

func TestIDFieldAndHandlerFeeds(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	require.NoError(t, p.Create(ctx, eventstore.Definition{
		Name: "customers", IDField: "customerId",
		Handlers: []eventstore.Handler{
			{EventType: "Placed", Feed: "order", Functions: []eventstore.Function{{Name: "inc", TargetSelector: "$.projection.orders"}}},
			{EventType: "Paid", Feed: "payment", Functions: []eventstore.Function{{Name: "add", TargetSelector: "$.projection.paid", EventSelector: "$.event.amount"}}},
		},
	}))
	save(t, st, "order", "o1", pev(1, "Placed", `{"customerId":"c1"}`))
	save(t, st, "order", "o2", pev(2, "Placed", `{"customerId":"c1"}`))
	save(t, st, "payment", "p1", pev(3, "Paid", `{"customerId":"c1","amount":"9.5"}`))
	save(t, st, "order", "o3", pev(4, "Placed", `{}`))
	pj, err := p.Single(ctx, "customers", "c1")
	require.NoError(t, err)
	assert.JSONEq(t, `{"orders":"2","paid":"9.5"}`, string(pj.Data))
	s, err := p.Status(ctx, "customers")
	require.NoError(t, err)
	require.Len(t, s.Errors, 1, "an event without the idField is a recorded error")
	assert.Contains(t, s.Errors[0].Message, "customerId")
}

func TestDeleteFunctionRemovesInstance(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	require.NoError(t, p.Create(ctx, eventstore.Definition{Name: "open", Feed: "order", Handlers: []eventstore.Handler{
		{EventType: "Placed", Functions: []eventstore.Function{{Name: "set", TargetSelector: "$.projection.open", RawData: json.RawMessage(`true`)}}},
		{EventType: "Closed", Functions: []eventstore.Function{{Name: "delete"}}},
	}}))
	save(t, st, "order", "o1", pev(1, "Placed", `{}`))
	_, err := p.Single(ctx, "open", "o1")
	require.NoError(t, err)
	save(t, st, "order", "o1", pev(2, "Closed", `{}`))
	_, err = p.Single(ctx, "open", "o1")
	assert.ErrorIs(t, err, eventstore.ErrNotFound)
	save(t, st, "order", "o1", pev(3, "Placed", `{}`))
	pj, err := p.Single(ctx, "open", "o1")
	require.NoError(t, err, "a later event creates the instance again")
	assert.JSONEq(t, `{"open":true}`, string(pj.Data))
}

func TestInstanceLimitIsARecordedError(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	p := eventstore.NewProjector(st, &eventstore.ProjectorOptions{MaxInstanceBytes: 4096})
	require.NoError(t, p.Create(ctx, countDef("big", eventstore.Function{Name: "append", TargetSelector: "$.projection.l"})))
	pad := fmt.Sprintf(`{"pad":%q}`, string(make([]byte, 0))+fmt.Sprintf("%01000d", 0))
	for i := range 6 {
		save(t, st, "order", "o1", pev(i+1, "Placed", pad))
	}
	pj, err := p.Single(ctx, "big", "o1")
	require.NoError(t, err)
	assert.LessOrEqual(t, len(pj.Data), 4096)
	s, err := p.Status(ctx, "big")
	require.NoError(t, err)
	assert.Len(t, s.Errors, 2, "events that would grow the instance past the limit are recorded errors")
}

// TestBehindCountsOwnFeed checks Status.Behind: a projection that applied
// every event of its feed is not behind, however many events of other
// feeds were stored after; an unapplied event of its own feed makes it
// behind again.
func TestBehindCountsOwnFeed(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	_, err := p.Put(ctx, countDef("n", eventstore.Function{Name: "inc", TargetSelector: "$.projection.count"}))
	require.NoError(t, err)
	save(t, st, "order", "o1", pev(1, "Placed", `{}`))
	require.NoError(t, p.CatchUp(ctx))
	for i := range 5 {
		save(t, st, "user", fmt.Sprintf("u%d", i), pev(10+i, "Joined", `{}`))
	}
	s, err := p.Status(ctx, "n")
	require.NoError(t, err)
	assert.Greater(t, s.Head, s.Checkpoint, "events of another feed came after the checkpoint")
	assert.Zero(t, s.Behind, "nothing of the projection's own feed is left to apply")

	save(t, st, "order", "o2", pev(20, "Placed", `{}`))
	all, err := p.Statuses(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	assert.Equal(t, all[0].Head-all[0].Checkpoint, all[0].Behind, "an event of its own feed is waiting")
	assert.Positive(t, all[0].Behind)

	require.NoError(t, p.CatchUp(ctx))
	s, err = p.Status(ctx, "n")
	require.NoError(t, err)
	assert.Zero(t, s.Behind)
}
