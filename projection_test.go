package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

func fn(f, target, event string) eventstore.Function {
	return eventstore.Function{Name: f, TargetSelector: target, EventSelector: event}
}

func orderDef(name string, aggregated bool) eventstore.Definition {
	return eventstore.Definition{
		Name: name, Feed: "order", Aggregated: aggregated,
		Handlers: []eventstore.Handler{
			{EventType: "Placed", Functions: []eventstore.Function{
				{Name: "set", TargetSelector: "$.projection.status", RawData: []byte(`"placed"`)},
				fn("add", "$.projection.total", "$.event.total"),
				fn("inc", "$.projection.count", ""),
				fn("set", "$.projection.address.city", "$.event.address.city"),
			}},
			{EventType: "Shipped", Functions: []eventstore.Function{
				{Name: "set", TargetSelector: "$.projection.status", RawData: []byte(`"shipped"`)},
			}},
		},
	}
}

func newProjector(t *testing.T) (*eventstore.Store, *eventstore.Projector) {
	t.Helper()
	st := newStore(t)
	return st, eventstore.NewProjector(st, nil)
}

func createOrderDef(t *testing.T, p *eventstore.Projector, name string, aggregated bool) {
	t.Helper()
	require.NoError(t, p.Create(context.Background(), orderDef(name, aggregated)))
}

func save(t *testing.T, st *eventstore.Store, typ, id string, events ...eventstore.NewEvent) eventstore.SaveResult {
	t.Helper()
	res, err := st.Save(context.Background(), typ, id, events, nil)
	require.NoError(t, err)
	return res
}

func field(t *testing.T, p eventstore.Projection, path string) string {
	t.Helper()
	r := gjson.GetBytes(p.Data, path)
	require.True(t, r.Exists(), "field %s missing in %s", path, p.Data)
	return r.Raw
}

func TestProjectionSemantics(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	createOrderDef(t, p, "orders", false)

	save(t, st, "order", "o1", ev("Placed", `{"total": 0.1, "address": {"city": "Lyon"}}`))
	save(t, st, "order", "o1", ev("Placed", `{"total": 0.2}`), ev("Ignored", `{"total": 5}`))
	save(t, st, "invoice", "o1", ev("Placed", `{"total": 100}`)) // another feed

	got, err := p.Single(ctx, "orders", "o1")
	require.NoError(t, err)
	assert.Equal(t, "o1", got.ID)
	assert.Equal(t, `"0.3"`, field(t, got, "total"), "add is exact decimal arithmetic")
	assert.Equal(t, `"2"`, field(t, got, "count"))
	assert.Equal(t, `"placed"`, field(t, got, "status"))
	assert.Equal(t, `"Lyon"`, field(t, got, "address.city"), "a missing event field leaves the target unchanged")

	save(t, st, "order", "o1", ev("Shipped", ""))
	got, err = p.Single(ctx, "orders", "o1")
	require.NoError(t, err)
	assert.Equal(t, `"shipped"`, field(t, got, "status"))

	_, err = p.Single(ctx, "orders", "nobody")
	assert.ErrorIs(t, err, eventstore.ErrNotFound)
	_, err = p.Aggregated(ctx, "orders")
	assert.ErrorIs(t, err, eventstore.ErrNotFound, "a single projection is not queried as aggregated")
	_, err = p.Single(ctx, "missing", "o1")
	assert.ErrorIs(t, err, eventstore.ErrNotFound)
}

func TestAggregatedProjection(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	createOrderDef(t, p, "all-orders", true)
	_, err := p.Aggregated(ctx, "all-orders")
	assert.ErrorIs(t, err, eventstore.ErrNotFound, "no event yet")

	for i := range 10 {
		save(t, st, "order", fmt.Sprint("o", i), ev("Placed", fmt.Sprintf(`{"total": %d.5}`, i)))
	}
	got, err := p.Aggregated(ctx, "all-orders")
	require.NoError(t, err)
	assert.Equal(t, "all-orders", got.ID)
	assert.True(t, got.Aggregated)
	assert.Equal(t, `"50.0"`, field(t, got, "total"))
	assert.Equal(t, `"10"`, field(t, got, "count"))
	_, err = p.Single(ctx, "all-orders", "o1")
	assert.ErrorIs(t, err, eventstore.ErrNotFound, "an aggregated projection is not queried as single")
}

func TestBigIntegersStayExact(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	createOrderDef(t, p, "orders", false)
	save(t, st, "order", "o1", ev("Placed", `{"total": 9007199254740993}`), ev("Placed", `{"total": 1}`))
	save(t, st, "order", "o2", ev("Placed", `{"total": 123456789012345678901234567890.000000001}`))
	got, err := p.Single(ctx, "orders", "o1")
	require.NoError(t, err)
	assert.Equal(t, `"9007199254740994"`, field(t, got, "total"))
	got, err = p.Single(ctx, "orders", "o2")
	require.NoError(t, err)
	assert.Equal(t, `"123456789012345678901234567890.000000001"`, field(t, got, "total"))
}

func TestSetFromEventValues(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	require.NoError(t, p.Create(ctx, eventstore.Definition{Name: "copy", Feed: "thing", Handlers: []eventstore.Handler{{
		EventType: "Set", Functions: []eventstore.Function{
			fn("set", "$.projection.n", "$.event.n"),
			fn("set", "$.projection.obj", "$.event.obj"),
			fn("set", "$.projection.flag", "$.event.flag"),
			fn("set", "$.projection.deep.er.x", "$.event.list.1"),
		},
	}}}))
	save(t, st, "thing", "t1", ev("Set", `{"n": 1.50e1, "obj": {"a": [1, 2]}, "flag": true, "list": ["a", "b"]}`))
	got, err := p.Single(ctx, "copy", "t1")
	require.NoError(t, err)
	assert.Equal(t, `"15.0"`, field(t, got, "n"), "numbers are rendered as exact decimal strings")
	assert.JSONEq(t, `{"a": [1, 2]}`, field(t, got, "obj"))
	assert.Equal(t, `true`, field(t, got, "flag"))
	assert.Equal(t, `"b"`, field(t, got, "deep.er.x"))
}

func TestAddNonNumberIsRecordedError(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	createOrderDef(t, p, "orders", false)
	save(t, st, "order", "o1", ev("Placed", `{"total": 2}`))
	bad := ev("Placed", `{"total": "lots"}`)
	save(t, st, "order", "o1", bad)
	save(t, st, "order", "o1", ev("Placed", `{"total": 3}`))

	got, err := p.Single(ctx, "orders", "o1")
	require.NoError(t, err)
	assert.Equal(t, `"5"`, field(t, got, "total"), "the bad event is skipped, later ones applied")
	assert.Equal(t, `"2"`, field(t, got, "count"), "a failing event changes nothing of the instance, not even the functions before the failure")

	status, err := p.Status(ctx, "orders")
	require.NoError(t, err)
	require.Len(t, status.Errors, 1)
	assert.Equal(t, bad.ID, status.Errors[0].EventID)
	assert.Equal(t, "o1", status.Errors[0].InstanceID)
	assert.Contains(t, status.Errors[0].Message, "not a number")
}

func TestAddOnNonNumberTargetIsRecordedError(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	require.NoError(t, p.Create(ctx, eventstore.Definition{Name: "p", Feed: "f", Handlers: []eventstore.Handler{
		{EventType: "S", Functions: []eventstore.Function{{Name: "set", TargetSelector: "$.projection.x", RawData: []byte(`"text"`)}}},
		{EventType: "I", Functions: []eventstore.Function{fn("inc", "$.projection.x", "")}},
		{EventType: "N", Functions: []eventstore.Function{fn("inc", "$.projection.x.y", "")}},
	}}))
	save(t, st, "f", "1", ev("S", ""), ev("I", ""), ev("N", ""))
	got, err := p.Single(ctx, "p", "1")
	require.NoError(t, err)
	assert.Equal(t, `"text"`, field(t, got, "x"))
	status, err := p.Status(ctx, "p")
	require.NoError(t, err)
	assert.Len(t, status.Errors, 2)
}

func TestDefinitionCreatedAfterEventsRebuildsHistory(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	for i := range 1200 { // more than one batch
		save(t, st, "order", "o1", ev("Placed", `{"total": 1}`))
		if i%100 == 0 {
			save(t, st, "other", "x", ev("Placed", `{"total": 1}`))
		}
	}
	createOrderDef(t, p, "late", true)
	got, err := p.Aggregated(ctx, "late")
	require.NoError(t, err)
	assert.Equal(t, `"1200"`, field(t, got, "total"))
	assert.Equal(t, `"1200"`, field(t, got, "count"))

	save(t, st, "order", "o2", ev("Placed", `{"total": 1}`))
	got, err = p.Aggregated(ctx, "late")
	require.NoError(t, err)
	assert.Equal(t, `"1201"`, field(t, got, "count"), "later events keep it current")
}

func TestDuplicateDefinitionIsConflict(t *testing.T) {
	ctx := context.Background()
	_, p := newProjector(t)
	createOrderDef(t, p, "orders", false)
	err := p.Create(ctx, orderDef("orders", true))
	assert.ErrorIs(t, err, eventstore.ErrConflict)
	d, err := p.Definition(ctx, "orders")
	require.NoError(t, err)
	assert.False(t, d.Aggregated, "the first definition is kept")
}

func TestDefinitionValidation(t *testing.T) {
	ctx := context.Background()
	base := func() eventstore.Definition { return orderDef("x", false) }
	cases := []struct {
		name  string
		edit  func(d *eventstore.Definition)
		field string
	}{
		{"no name", func(d *eventstore.Definition) { d.Name = "" }, "projectionName"},
		{"slash in name", func(d *eventstore.Definition) { d.Name = "a/b" }, "projectionName"},
		{"no feed", func(d *eventstore.Definition) { d.Feed = "" }, "feedName"},
		{"no handlers", func(d *eventstore.Definition) { d.Handlers = nil }, "handlers"},
		{"no event type", func(d *eventstore.Definition) { d.Handlers[1].EventType = "" }, "handlers[1].eventType"},
		{"duplicate event type", func(d *eventstore.Definition) { d.Handlers[1].EventType = "Placed" }, "handlers[1].eventType"},
		{"no functions", func(d *eventstore.Definition) { d.Handlers[1].Functions = nil }, "handlers[1].functions"},
		{"unknown function", func(d *eventstore.Definition) { d.Handlers[0].Functions[1].Name = "mul" }, "handlers[0].functions[1].function"},
		{"target without root", func(d *eventstore.Definition) { d.Handlers[0].Functions[1].TargetSelector = "total" }, "handlers[0].functions[1].targetSelector"},
		{"target with event root", func(d *eventstore.Definition) { d.Handlers[0].Functions[1].TargetSelector = "$.event.total" }, "handlers[0].functions[1].targetSelector"},
		{"target is the whole projection", func(d *eventstore.Definition) { d.Handlers[0].Functions[1].TargetSelector = "$.projection" }, "handlers[0].functions[1].targetSelector"},
		{"empty key", func(d *eventstore.Definition) { d.Handlers[0].Functions[1].TargetSelector = "$.projection..a" }, "handlers[0].functions[1].targetSelector"},
		{"gjson syntax", func(d *eventstore.Definition) { d.Handlers[0].Functions[1].EventSelector = "$.event.items.#.price" }, "handlers[0].functions[1].eventSelector"},
		{"wildcard", func(d *eventstore.Definition) { d.Handlers[0].Functions[1].EventSelector = "$.event.t*" }, "handlers[0].functions[1].eventSelector"},
		{"add without input", func(d *eventstore.Definition) { d.Handlers[0].Functions[1].EventSelector = "" }, "handlers[0].functions[1]"},
		{"add with non-number raw", func(d *eventstore.Definition) {
			d.Handlers[0].Functions[1] = eventstore.Function{Name: "add", TargetSelector: "$.projection.t", RawData: []byte(`"x"`)}
		}, "handlers[0].functions[1].rawData"},
		{"inc with input", func(d *eventstore.Definition) { d.Handlers[0].Functions[2].EventSelector = "$.event.n" }, "handlers[0].functions[2]"},
		{"set with both inputs", func(d *eventstore.Definition) { d.Handlers[0].Functions[3].RawData = []byte(`"x"`) }, "handlers[0].functions[3]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, p := newProjector(t)
			d := base()
			c.edit(&d)
			err := p.Create(ctx, d)
			require.ErrorIs(t, err, eventstore.ErrInvalid)
			var ve *eventstore.ValidationError
			require.True(t, errors.As(err, &ve))
			var fields []string
			for _, f := range ve.Fields {
				fields = append(fields, f.Field)
			}
			assert.Contains(t, fields, c.field)
			if d.Name != "" && d.Name != "a/b" {
				_, err = p.Definition(ctx, d.Name)
				assert.ErrorIs(t, err, eventstore.ErrNotFound, "an invalid definition is not stored")
			}
		})
	}
}

func TestReadYourWritesUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	createOrderDef(t, p, "orders", false)
	createOrderDef(t, p, "totals", true)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = p.Run(runCtx) }()

	const writers, saves = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers*saves)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprint("o", w)
			for i := 1; i <= saves; i++ {
				if _, err := st.Save(ctx, "order", id, []eventstore.NewEvent{ev("Placed", `{"total": 1}`)}, nil); err != nil {
					errs <- err
					return
				}
				got, err := p.Single(ctx, "orders", id)
				if err != nil {
					errs <- err
					return
				}
				if c := gjson.GetBytes(got.Data, "count").String(); c != fmt.Sprint(i) {
					errs <- fmt.Errorf("%s after save %d: count %s: read-your-writes broken", id, i, c)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got, err := p.Aggregated(ctx, "totals")
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf(`"%d"`, writers*saves), field(t, got, "count"), "every event applied exactly once")
}

// twoStores returns two Stores on one memory storage, as two processes on
// one database; the storage is closed when the test ends.
func twoStores(t *testing.T) (*eventstore.Store, *eventstore.Store) {
	t.Helper()
	mem := memory.New()
	st1, err := eventstore.New(mem, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st1.Close() })
	st2, err := eventstore.New(mem, nil)
	require.NoError(t, err)
	return st1, st2
}

// Two Projectors (as in two processes) sharing one storage apply every
// event exactly once.
func TestProjectorsSharingStorageApplyOnce(t *testing.T) {
	ctx := context.Background()
	st1, st2 := twoStores(t)
	p1 := eventstore.NewProjector(st1, &eventstore.ProjectorOptions{BatchSize: 3})
	p2 := eventstore.NewProjector(st2, &eventstore.ProjectorOptions{BatchSize: 5})
	createOrderDef(t, p1, "totals", true)

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, p := st1, p1
			if i%2 == 1 {
				st, p = st2, p2
			}
			for range 50 {
				_, err := st.Save(ctx, "order", fmt.Sprint("o", i), []eventstore.NewEvent{ev("Placed", `{"total": 2}`)}, nil)
				assert.NoError(t, err)
				_, err = p.Aggregated(ctx, "totals")
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	for _, p := range []*eventstore.Projector{p1, p2} {
		got, err := p.Aggregated(ctx, "totals")
		require.NoError(t, err)
		assert.Equal(t, `"200"`, field(t, got, "count"))
		assert.Equal(t, `"400"`, field(t, got, "total"))
	}
}

// A Projector that remembers where it committed (and so reads no
// definition before applying new events) still notices a reset made by
// another process: with nothing new to apply it checks the stored
// checkpoint, and with new events its commit is refused and it reads it.
func TestProjectorNoticesResetElsewhere(t *testing.T) {
	ctx := context.Background()
	st1, st2 := twoStores(t)
	p1, p2 := eventstore.NewProjector(st1, nil), eventstore.NewProjector(st2, nil)
	createOrderDef(t, p1, "totals", true)
	for range 3 {
		save(t, st1, "order", "o1", ev("Placed", `{"total": 2}`))
	}
	got, err := p1.Aggregated(ctx, "totals")
	require.NoError(t, err)
	require.Equal(t, `"3"`, field(t, got, "count"))

	require.NoError(t, p2.Reset(ctx, "totals"))
	got, err = p1.Aggregated(ctx, "totals")
	require.NoError(t, err, "rebuilt after a reset elsewhere, with nothing new")
	assert.Equal(t, `"3"`, field(t, got, "count"))

	require.NoError(t, p2.Reset(ctx, "totals"))
	save(t, st1, "order", "o1", ev("Placed", `{"total": 2}`))
	got, err = p1.Aggregated(ctx, "totals")
	require.NoError(t, err, "rebuilt after a reset elsewhere, with a new event")
	assert.Equal(t, `"4"`, field(t, got, "count"))
	assert.Equal(t, `"8"`, field(t, got, "total"))
}

// A Projector that keeps the states it committed does not apply new
// events to them once another process has committed since: its commit is
// refused and it starts again from the stored states.
func TestProjectorRecentStatesAfterCommitElsewhere(t *testing.T) {
	ctx := context.Background()
	st1, st2 := twoStores(t)
	p1, p2 := eventstore.NewProjector(st1, nil), eventstore.NewProjector(st2, nil)
	createOrderDef(t, p1, "totals", true)
	save(t, st1, "order", "o1", ev("Placed", `{"total": 2}`))
	got, err := p1.Aggregated(ctx, "totals")
	require.NoError(t, err)
	require.Equal(t, `"1"`, field(t, got, "count"))

	// Another process applies the next event: p1's kept state is stale.
	save(t, st2, "order", "o1", ev("Placed", `{"total": 2}`))
	got, err = p2.Aggregated(ctx, "totals")
	require.NoError(t, err)
	require.Equal(t, `"2"`, field(t, got, "count"))

	save(t, st1, "order", "o1", ev("Placed", `{"total": 2}`))
	got, err = p1.Aggregated(ctx, "totals")
	require.NoError(t, err)
	assert.Equal(t, `"3"`, field(t, got, "count"), "every event applied once, to the stored state")
	assert.Equal(t, `"6"`, field(t, got, "total"))
}

func TestRunKeepsProjectionsCurrent(t *testing.T) {
	ctx := context.Background()
	st, p := newProjector(t)
	createOrderDef(t, p, "totals", true)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	save(t, st, "order", "o1", ev("Placed", `{"total": 1}`))
	require.Eventually(t, func() bool {
		s, err := p.Status(ctx, "totals")
		return err == nil && s.Checkpoint >= 1
	}, 5*time.Second, time.Millisecond, "Run applies saves without a query")
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
}

func TestUpdatedAtIsEventTime(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	st, err := eventstore.New(memory.New(), &eventstore.Options{Now: func() time.Time { return at }})
	require.NoError(t, err)
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	createOrderDef(t, p, "orders", false)
	res := save(t, st, "order", "o1", ev("Placed", `{"total": 1}`))
	got, err := p.Single(ctx, "orders", "o1")
	require.NoError(t, err)
	assert.Equal(t, at, got.UpdatedAt)
	assert.Equal(t, res.Position, got.Position)
}

// hooks.DefinitionsPoll is how soon Run applies a definition
// that another process created: within about that time, and not before.
func TestProjectorDefinitionsPoll(t *testing.T) {
	ctx := context.Background()
	// applied runs a Projector with poll on one of two Stores sharing a
	// storage, creates a definition through the other (a process not
	// running its Projector), saves through the first for d, and reports
	// whether the running Projector applied the definition meanwhile.
	applied := func(poll, d time.Duration) bool {
		st1, st2 := twoStores(t)
		other := eventstore.NewProjector(st1, nil)
		// A definition Run finds at its first listing: once Run has
		// applied it, it has listed the definitions.
		createOrderDef(t, other, "first", true)
		po := &eventstore.ProjectorOptions{}
		*hooks.DefinitionsPoll(po) = poll
		p := eventstore.NewProjector(st2, po)
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { _ = p.Run(runCtx); close(done) }()
		defer func() { stop(); <-done }()
		save(t, st2, "order", "o0", ev("Placed", `{"total": 2}`))
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			s, err := other.Status(ctx, "first")
			require.NoError(t, err)
			if s.Checkpoint > 0 {
				break
			}
			require.True(t, time.Now().Before(deadline), "Run never applied the definition it found at start")
		}
		createOrderDef(t, other, "totals", true)
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			save(t, st2, "order", "o1", ev("Placed", `{"total": 2}`))
			s, err := other.Status(ctx, "totals")
			require.NoError(t, err)
			if s.Checkpoint > 0 {
				return true
			}
		}
		return false
	}
	assert.True(t, applied(200*time.Millisecond, 5*time.Second), "polling every 200ms, Run never applied the new definition")
	assert.False(t, applied(time.Hour, time.Second), "polling every hour, Run applied the new definition within a second")
}
