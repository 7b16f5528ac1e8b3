package reactions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// SyncDefinitions gives an Engine another's definitions: created from
// their creation elsewhere (earlier events never fire, those stored
// between the creation and the sync do), replaced, deleted with their
// pending reactions cancelled; nothing changes when they are equal.
// ForTenant's Engine puts the tenant into every delivery's metadata.
func TestSyncDefinitions(t *testing.T) {
	ctx := t.Context()
	rc, srv := newReceiver(t, "s3cret")
	project, st, e := tenantEngine(t)

	save(t, st, "o-before", "placed", `{}`) // before the definitions: never fires
	time.Sleep(2 * time.Millisecond)        // recorded strictly before them
	d := def(srv.URL)
	require.NoError(t, project.Create(ctx, d))
	later := def(srv.URL)
	later.Name, later.Offset = "later", "PT1H"
	require.NoError(t, project.Create(ctx, later))
	defs, err := project.Definitions(ctx)
	require.NoError(t, err)
	require.Len(t, defs, 2)
	assert.False(t, defs[0].CreatedAt.IsZero(), "Definitions gives the creation time")

	save(t, st, "o-0", "placed", `{}`) // after the creation, before the sync: fires
	changed, err := e.SyncDefinitions(ctx, defs)
	require.NoError(t, err)
	assert.True(t, changed)
	got, err := e.Definitions(ctx)
	require.NoError(t, err)
	assert.Equal(t, defs, got, "the same definitions, created at the same time")
	changed, err = e.SyncDefinitions(ctx, defs)
	require.NoError(t, err)
	assert.False(t, changed, "equal definitions change nothing")

	stop := run(t, e)
	defer stop()
	save(t, st, "o-1", "placed", `{}`)
	<-rc.got
	<-rc.got
	waitFor(t, "the later ones scheduled", func() bool { return statuses(t, e)[reactions.StatusScheduled] == 2 })
	rc.mu.Lock()
	var aggs []string
	for _, body := range rc.bodies {
		var b struct {
			Metadata map[string]any `json:"metadata"`
		}
		require.NoError(t, json.Unmarshal(body, &b))
		aggs = append(aggs, fmt.Sprint(b.Metadata["aggregateId"]))
		assert.Equal(t, "1b4e28ba-2fa1-41d2-883f-0016d3cca427", b.Metadata["tenantId"])
	}
	rc.mu.Unlock()
	assert.ElementsMatch(t, []string{"o-0", "o-1"}, aggs, "the events after the creation fired, the one before did not")

	// Replaced: the description changes; deleted: "later" goes, its pending
	// reaction cancelled.
	d.Description = "now described"
	changed, err = e.SyncDefinitions(ctx, []reactions.Definition{d})
	require.NoError(t, err)
	assert.True(t, changed)
	got1, err := e.Definition(ctx, d.Name)
	require.NoError(t, err)
	assert.Equal(t, "now described", got1.Description)
	_, err = e.Definition(ctx, "later")
	assert.True(t, errors.Is(err, eventstore.ErrNotFound), "%v", err)
	assert.Equal(t, 2, statuses(t, e)[reactions.StatusCanceled])

	// A bad definition is refused, the others still synced.
	bad := def(srv.URL)
	bad.Name, bad.ReactOnEventType = "bad", ""
	_, err = e.SyncDefinitions(ctx, []reactions.Definition{bad, d})
	var v *eventstore.ValidationError
	assert.True(t, errors.As(err, &v), "%v", err)
	_, err = e.Definition(ctx, d.Name)
	assert.NoError(t, err)
}

// A definition that SyncDefinitions creates without a creation time, or
// with one more than a minute ago, starts at its feed's head: an Engine
// that learns of a definition late (a tenant first opened long after)
// does not fire for the events stored since.
func TestSyncDefinitionsStartAtHead(t *testing.T) {
	for name, createdAt := range map[string]time.Time{"no creation time": {}, "created long ago": time.Now().Add(-2 * time.Minute)} {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			rc, srv := newReceiver(t, "s3cret")
			_, st, e := tenantEngine(t)
			save(t, st, "o-0", "placed", `{}`)
			d := def(srv.URL)
			d.CreatedAt = createdAt
			_, err := e.SyncDefinitions(ctx, []reactions.Definition{d})
			require.NoError(t, err)
			stop := run(t, e)
			defer stop()
			save(t, st, "o-1", "placed", `{}`)
			<-rc.got
			time.Sleep(100 * time.Millisecond) // five poll intervals for a stray delivery
			rc.mu.Lock()
			defer rc.mu.Unlock()
			require.Len(t, rc.bodies, 1)
			var b struct {
				Metadata map[string]any `json:"metadata"`
			}
			require.NoError(t, json.Unmarshal(rc.bodies[0], &b))
			assert.Equal(t, "o-1", b.Metadata["aggregateId"], "the event stored before the sync fired nothing")
		})
	}
}

// tenantEngine returns a project's Engine on memory, polling every 20 ms,
// and the Store and Engine (ForTenant) of a tenant of it, closed after
// the test.
func tenantEngine(t *testing.T) (project *reactions.Engine, st *eventstore.Store, e *reactions.Engine) {
	t.Helper()
	_, project = setup(t, memory.New(), &reactions.Options{PollInterval: 20 * time.Millisecond})
	tenantStorage := memory.New()
	st, err := eventstore.New(tenantStorage, nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	e, err = project.ForTenant(st, tenantStorage, "1b4e28ba-2fa1-41d2-883f-0016d3cca427")
	require.NoError(t, err)
	return project, st, e
}

// Options.Concurrency bounds the attempts of an Engine and its tenants'
// Engines together.
func TestForTenantSharesConcurrency(t *testing.T) {
	ctx := t.Context()
	var mu sync.Mutex
	inFlight, most, done := 0, 0, 0
	slow := func(context.Context, reactions.Delivery) error {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		time.Sleep(150 * time.Millisecond)
		mu.Lock()
		inFlight--
		done++
		mu.Unlock()
		return nil
	}
	_, project := setup(t, memory.New(), &reactions.Options{Concurrency: 2, PollInterval: 10 * time.Millisecond,
		Funcs: map[string]reactions.Func{"slow": slow}})
	d := reactions.Definition{Name: "r", FeedName: "order", ReactOnEventType: "placed",
		Action: reactions.Action{Type: reactions.ActionFunc, Function: "slow"}}
	var stops []func()
	for _, tenant := range []string{"1b4e28ba-2fa1-41d2-883f-0016d3cca427", "2c5f39cb-3ab2-42e3-994a-1127e4ddb538"} {
		s := memory.New()
		st, err := eventstore.New(s, nil)
		require.NoError(t, err)
		defer st.Close()
		e, err := project.ForTenant(st, s, tenant)
		require.NoError(t, err)
		_, err = e.SyncDefinitions(ctx, []reactions.Definition{d})
		require.NoError(t, err)
		for i := range 6 {
			save(t, st, fmt.Sprint("o-", i), "placed", `{}`)
		}
		stops = append(stops, run(t, e))
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	waitFor(t, "12 deliveries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done == 12
	})
	mu.Lock()
	assert.LessOrEqual(t, most, 2, "at most Concurrency attempts at once across the tenants' Engines")
	assert.Equal(t, 2, most, "both slots used")
	mu.Unlock()
}

// gatedStorage blocks the first read of the head of all types until gate
// is closed: the feed watch of Run takes its starting point late.
type gatedStorage struct {
	storage.Storage
	storage.ReactionStorage
	gate chan struct{}
	once sync.Once
}

func (g *gatedStorage) FeedHead(ctx context.Context, aggregateType string) (int64, error) {
	if aggregateType == "" {
		g.once.Do(func() { <-g.gate })
	}
	return g.Storage.FeedHead(ctx, aggregateType)
}

// An event saved after Run's first scheduling round and before its feed
// watch took its starting point is scheduled at once, not at the next
// poll.
func TestRunSchedulesEventsSavedWhileStarting(t *testing.T) {
	ctx := t.Context()
	ms := memory.New()
	g := &gatedStorage{Storage: ms, ReactionStorage: ms.(storage.ReactionStorage), gate: make(chan struct{})}
	st, err := eventstore.New(g, nil)
	require.NoError(t, err)
	defer st.Close()
	e, err := reactions.New(st, g, &reactions.Options{PollInterval: time.Hour,
		Funcs: map[string]reactions.Func{"f": func(context.Context, reactions.Delivery) error { return nil }}})
	require.NoError(t, err)
	require.NoError(t, e.Create(ctx, reactions.Definition{Name: "r", FeedName: "order", ReactOnEventType: "placed",
		Offset: "PT1H", Action: reactions.Action{Type: reactions.ActionFunc, Function: "f"}}))
	stop := run(t, e)
	defer stop()
	time.Sleep(100 * time.Millisecond) // the first round ran; the watch waits at the gate
	save(t, st, "o-1", "placed", `{}`)
	close(g.gate)
	waitFor(t, "the reaction scheduled", func() bool { return statuses(t, e)[reactions.StatusScheduled] == 1 })
}
