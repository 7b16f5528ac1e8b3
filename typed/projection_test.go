package typed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/typed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type itemAdded struct {
	SKU   string  `json:"sku"`
	Price float64 `json:"price"`
}

type itemRemoved struct {
	SKU string `json:"sku"`
}

type cart struct {
	Items map[string]float64 `json:"items"`
	Total float64            `json:"total"`
	Adds  int                `json:"adds"`
}

// cartRegistry registers the cart events.
func cartRegistry(t *testing.T) *typed.Registry {
	reg := typed.NewRegistry(nil)
	require.NoError(t, errors.Join(
		typed.Register[itemAdded](reg, "ItemAdded"),
		typed.Register[itemRemoved](reg, "ItemRemoved"),
	))
	return reg
}

// cartProjection folds carts; times multiplies prices (another version of
// the code). A negative price fails after changing the state in place.
func cartProjection(t *testing.T, reg *typed.Registry, name string, opts *typed.ProjectionOptions, times float64) *typed.Projection[cart] {
	p, err := typed.NewProjection(reg, name, "cart", opts,
		typed.On(func(c *cart, e typed.EventOf[itemAdded]) error {
			if c.Items == nil {
				c.Items = map[string]float64{}
			}
			c.Items[e.Value.SKU] = e.Value.Price * times
			c.Adds++
			if e.Value.Price < 0 {
				return fmt.Errorf("price %v is negative", e.Value.Price)
			}
			c.Total += e.Value.Price * times
			return nil
		}),
		typed.On(func(c *cart, e typed.EventOf[itemRemoved]) error {
			c.Total -= c.Items[e.Value.SKU]
			delete(c.Items, e.Value.SKU)
			return nil
		}),
	)
	require.NoError(t, err)
	return p
}

func TestProjection(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			st := b.open(t, 1)[0]
			reg := cartRegistry(t)
			ts := typed.NewStore(st, reg)
			p := eventstore.NewProjector(st, nil)
			carts := cartProjection(t, reg, "carts", nil, 1)
			all := cartProjection(t, reg, "all-carts", &typed.ProjectionOptions{Aggregated: true}, 1)
			require.NoError(t, carts.Register(ctx, p))
			require.NoError(t, all.Register(ctx, p))

			_, err := ts.Save(ctx, "cart", "c1", []any{itemAdded{"A", 2}, itemAdded{"B", 3}, itemRemoved{"A"}}, nil)
			require.NoError(t, err)
			_, err = ts.Save(ctx, "cart", "c2", []any{itemAdded{"C", 10}}, nil)
			require.NoError(t, err)

			c1, err := carts.Get(ctx, p, "c1")
			require.NoError(t, err, "read your writes")
			assert.Equal(t, cart{Items: map[string]float64{"B": 3}, Total: 3, Adds: 2}, c1)
			total, err := all.Aggregated(ctx, p)
			require.NoError(t, err)
			assert.Equal(t, 13.0, total.Total)

			page, err := carts.List(ctx, p, eventstore.ListOptions{Sort: eventstore.SortByID, Descending: true})
			require.NoError(t, err)
			require.Len(t, page.Instances, 2)
			assert.Equal(t, int64(2), page.Total)
			assert.Equal(t, "c2", page.Instances[0].ID)
			assert.Equal(t, 10.0, page.Instances[0].State.Total)
			assert.False(t, page.Instances[1].CreatedAt.IsZero())
			n, err := carts.Count(ctx, p)
			require.NoError(t, err)
			assert.Equal(t, int64(2), n)
			_, err = carts.Get(ctx, p, "nobody")
			assert.ErrorIs(t, err, eventstore.ErrNotFound)

			// The instances are the JSON of the states, on the Projector's
			// untyped queries (and so over HTTP).
			raw, err := p.Single(ctx, "carts", "c2")
			require.NoError(t, err)
			assert.JSONEq(t, `{"items":{"C":10},"total":10,"adds":1}`, string(raw.Data))

			// A failing handler changes nothing, even the map it changed in
			// place; data that does not decode into the Go type is recorded
			// naming the types.
			_, err = ts.Save(ctx, "cart", "c1", []any{itemAdded{"D", -1}, itemAdded{"E", 1}}, nil)
			require.NoError(t, err)
			_, err = st.Save(ctx, "cart", "c1", []eventstore.NewEvent{{ID: eventstore.NewEventID(), Type: "ItemAdded", Data: []byte(`{"price":"cheap"}`)}}, nil)
			require.NoError(t, err)
			c1, err = carts.Get(ctx, p, "c1")
			require.NoError(t, err)
			assert.Equal(t, cart{Items: map[string]float64{"B": 3, "E": 1}, Total: 4, Adds: 3}, c1)
			s, err := p.Status(ctx, "carts")
			require.NoError(t, err)
			require.Len(t, s.Errors, 2)
			assert.Contains(t, s.Errors[0].Message, "price -1 is negative")
			assert.Contains(t, s.Errors[1].Message, `"ItemAdded"`)
			assert.Contains(t, s.Errors[1].Message, "typed_test.itemAdded")

			// Await waits for an instance a later save makes.
			got := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				c, err := carts.Await(ctx, p, "late")
				if err == nil && c.Total != 5 {
					err = fmt.Errorf("late = %+v", c)
				}
				got <- err
			}()
			time.Sleep(10 * time.Millisecond)
			_, err = ts.Save(ctx, "cart", "late", []any{itemAdded{"F", 5}}, nil)
			require.NoError(t, err)
			require.NoError(t, <-got)
		})
	}
}

// TestProjectionVersions: two clients of one store (on PostgreSQL two
// pools, as two processes) run versions 1 and 2 of a projection; version
// 2 is rebuilt and takes over, version 1 stops applying, and neither
// rebuilds it back.
func TestProjectionVersions(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			ctx := t.Context()
			stores := b.open(t, 2)
			reg := cartRegistry(t)
			ts := typed.NewStore(stores[0], reg)
			v1 := cartProjection(t, reg, "carts", nil, 1)
			v2 := cartProjection(t, reg, "carts", &typed.ProjectionOptions{Version: 2}, 10)
			old := eventstore.NewProjector(stores[0], nil)
			require.NoError(t, v1.Register(ctx, old))
			_, err := ts.Save(ctx, "cart", "c1", []any{itemAdded{"A", 2}}, nil)
			require.NoError(t, err)
			c, err := v1.Get(ctx, old, "c1")
			require.NoError(t, err)
			assert.Equal(t, 2.0, c.Total)

			newer := eventstore.NewProjector(stores[1], nil)
			require.NoError(t, v2.Register(ctx, newer))
			require.NoError(t, newer.CatchUp(ctx, "carts"), "builds version 2 and swaps it in")
			c, err = v2.Get(ctx, newer, "c1")
			require.NoError(t, err)
			assert.Equal(t, 20.0, c.Total)

			// Both keep running; saves are applied by version 2 only.
			runCtx, stop := context.WithCancel(ctx)
			done := make(chan struct{}, 2)
			for _, p := range []*eventstore.Projector{old, newer} {
				go func() { _ = p.Run(runCtx); done <- struct{}{} }()
			}
			for i := range 5 {
				_, err := ts.Save(ctx, "cart", "c1", []any{itemAdded{fmt.Sprint("s", i), 1}}, nil)
				require.NoError(t, err)
				_, err = v1.Get(ctx, old, "c1") // the old version's queries answer, applying nothing
				require.NoError(t, err)
			}
			require.NoError(t, newer.CatchUp(ctx, "carts"))
			stop()
			<-done
			<-done
			c, err = v2.Get(ctx, newer, "c1")
			require.NoError(t, err)
			assert.Equal(t, 70.0, c.Total, "every save applied once, by version 2")
			s, err := old.Status(ctx, "carts")
			require.NoError(t, err)
			assert.Equal(t, int64(2), s.Definition.Code.Version)
			assert.False(t, s.Rebuilding)
			assert.Empty(t, s.Errors)
		})
	}
}

func TestNewProjectionErrors(t *testing.T) {
	reg := cartRegistry(t)
	type unknown struct{}
	fold := func(*cart, typed.EventOf[itemAdded]) error { return nil }
	_, err := typed.NewProjection(reg, "p", "cart", nil, typed.On(func(*cart, typed.EventOf[unknown]) error { return nil }))
	assert.ErrorIs(t, err, typed.ErrUnregistered)
	assert.ErrorIs(t, err, eventstore.ErrInvalid)
	assert.Contains(t, err.Error(), "unknown")
	_, err = typed.NewProjection(reg, "p", "cart", nil, typed.On(fold), typed.On(fold))
	assert.ErrorIs(t, err, eventstore.ErrInvalid)
	_, err = typed.NewProjection[cart](reg, "p", "cart", nil)
	assert.ErrorIs(t, err, eventstore.ErrInvalid)
	_, err = typed.NewProjection(nil, "p", "cart", nil, typed.On(fold))
	assert.ErrorIs(t, err, eventstore.ErrInvalid)
	_, err = typed.NewProjection(reg, "p", "cart", nil, typed.Handler[cart]{})
	assert.ErrorIs(t, err, eventstore.ErrInvalid)

	// What Register checks (names, versions) is refused there.
	p, err := typed.NewProjection(reg, "bad name/", "cart", &typed.ProjectionOptions{Version: -1}, typed.On(fold))
	require.NoError(t, err)
	st := mustStore(t, memory.New())
	err = p.Register(t.Context(), eventstore.NewProjector(st, nil))
	var ve *eventstore.ValidationError
	require.ErrorAs(t, err, &ve)
	fields := []string{}
	for _, f := range ve.Fields {
		fields = append(fields, f.Field)
	}
	assert.Equal(t, []string{"name", "version"}, fields)
}

// TestProjectionDecodesAsEncodingJSON: events whose data the fast decoder
// of JSONCodec hands to encoding/json (a key in another case, an escape)
// fold as encoding/json decodes them, and data of the wrong type is an
// error recorded for its event.
func TestProjectionDecodesAsEncodingJSON(t *testing.T) {
	ctx := t.Context()
	st := mustStore(t, memory.New())
	reg := cartRegistry(t)
	p := eventstore.NewProjector(st, nil)
	carts := cartProjection(t, reg, "carts", nil, 1)
	require.NoError(t, carts.Register(ctx, p))
	var events []eventstore.NewEvent
	for _, data := range []string{`{"sku":"x","price":1.5}`, `{"SKU":"y","PRICE":2}`, `{"sku":"z\u00e9","price":3}`, `{"sku":"w","price":"4"}`} {
		events = append(events, eventstore.NewEvent{ID: eventstore.NewEventID(), Type: "ItemAdded", Data: json.RawMessage(data)})
	}
	_, err := st.Save(ctx, "cart", "c1", events, nil)
	require.NoError(t, err)
	c1, err := carts.Get(ctx, p, "c1")
	require.NoError(t, err)
	assert.Equal(t, cart{Items: map[string]float64{"x": 1.5, "y": 2, "zé": 3}, Total: 6.5, Adds: 3}, c1)
	s, err := p.Status(ctx, "carts")
	require.NoError(t, err)
	require.Len(t, s.Errors, 1)
	assert.Contains(t, s.Errors[0].Message, "typed_test.itemAdded")
	assert.Equal(t, events[3].ID, s.Errors[0].EventID)
}
