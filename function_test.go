package eventstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goCaller is a FunctionCaller of Go functions, by URI.
type goCaller struct {
	mu    sync.Mutex
	calls []eventstore.FunctionCall
	fns   map[string]func(ctx context.Context, c eventstore.FunctionCall) (eventstore.FunctionResult, error)
}

func (g *goCaller) CheckURI(_ context.Context, uri string) error {
	if g.fns[uri] == nil {
		return errors.New("no such function")
	}
	return nil
}

func (g *goCaller) CallFunction(ctx context.Context, c eventstore.FunctionCall) (eventstore.FunctionResult, error) {
	g.mu.Lock()
	g.calls = append(g.calls, c)
	g.mu.Unlock()
	return g.fns[c.URI](ctx, c)
}

func extDef(name, uri string) eventstore.Definition {
	return eventstore.Definition{Name: name, Feed: "order", Handlers: []eventstore.Handler{{EventType: "Placed", FunctionURI: uri}}}
}

// TestFunctionDefinition: functionUri and signingSecret are checked
// (httpapi decodes them from JSON); the secret is stored and returned to Go but left out of the
// JSON form, and changing it alone updates the definition in place.
func TestFunctionDefinition(t *testing.T) {
	ctx := context.Background()
	var d eventstore.Definition
	err := json.Unmarshal([]byte(`{"projectionName":"p","feedName":"order",
		"handlers":[{"eventType":"Placed","functionUri":"https://fn.example.com/fold"}]}`), &d)
	require.NoError(t, err)
	d.SigningSecret = "k"
	assert.Equal(t, "https://fn.example.com/fold", d.Handlers[0].FunctionURI)
	b, err := json.Marshal(d)
	require.NoError(t, err)
	assert.JSONEq(t, `{"projectionName":"p","feedName":"order","aggregated":false,
		"handlers":[{"eventType":"Placed","functionUri":"https://fn.example.com/fold"}]}`, string(b), "the secret is never shown back")

	g := &goCaller{fns: map[string]func(context.Context, eventstore.FunctionCall) (eventstore.FunctionResult, error){
		"https://fn.example.com/fold": nil}}
	g.fns["https://fn.example.com/fold"] = func(context.Context, eventstore.FunctionCall) (eventstore.FunctionResult, error) {
		return eventstore.FunctionResult{State: json.RawMessage(`{}`)}, nil
	}
	st := newStore(t)
	p := eventstore.NewProjector(st, &eventstore.ProjectorOptions{Functions: g})
	res, err := p.Put(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutCreated, res)
	got, err := p.Definition(ctx, "p")
	require.NoError(t, err)
	assert.Equal(t, "k", got.SigningSecret)
	d.SigningSecret = "k2"
	res, err = p.Put(ctx, d)
	require.NoError(t, err)
	assert.Equal(t, eventstore.PutUpdated, res, "a new secret alone: no rebuild")
	got, err = p.Definition(ctx, "p")
	require.NoError(t, err)
	assert.Equal(t, "k2", got.SigningSecret)

	for _, tc := range []struct {
		h     eventstore.Handler
		field string
	}{
		{eventstore.Handler{EventType: "Placed", FunctionURI: "https://fn.example.com/fold",
			Functions: []eventstore.Function{{Name: "inc", TargetSelector: "$.projection.n"}}}, "handlers[0].functions"},
		{eventstore.Handler{EventType: "Placed", FunctionURI: "/fold"}, "handlers[0].functionUri"},
		{eventstore.Handler{EventType: "Placed", FunctionURI: "https://u:p@fn.example.com/fold"}, "handlers[0].functionUri"},
		{eventstore.Handler{EventType: "Placed", FunctionURI: "https://other.example.com/"}, "handlers[0].functionUri"},
	} {
		_, err := p.Put(ctx, eventstore.Definition{Name: "q", Feed: "order", Handlers: []eventstore.Handler{tc.h}})
		var ve *eventstore.ValidationError
		require.True(t, errors.As(err, &ve), "%v", err)
		assert.Equal(t, tc.field, ve.Fields[0].Field, "%v", err)
	}
}

// TestFunctionGoCaller: a Go FunctionCaller gets the event, the body and
// the secret (the name without a signingSecret); an error changes nothing
// and is recorded; the projection goes on.
func TestFunctionGoCaller(t *testing.T) {
	ctx := context.Background()
	g := &goCaller{fns: map[string]func(context.Context, eventstore.FunctionCall) (eventstore.FunctionResult, error){
		"go:fold": func(_ context.Context, c eventstore.FunctionCall) (eventstore.FunctionResult, error) {
			if string(c.Event.Data) == `{"fail":true}` {
				return eventstore.FunctionResult{}, errors.New("refused by the function")
			}
			return eventstore.FunctionResult{State: json.RawMessage(`{"seen":"` + c.Event.ID + `"}`), Reference: json.RawMessage(`42`)}, nil
		}}}
	st := newStore(t)
	p := eventstore.NewProjector(st, &eventstore.ProjectorOptions{Functions: g})
	require.NoError(t, p.Create(ctx, extDef("p", "go:fold")))
	first := save(t, st, "order", "o1", eventstore.NewEvent{ID: eventstore.NewEventID(), Type: "Placed"})
	save(t, st, "order", "o1", eventstore.NewEvent{ID: eventstore.NewEventID(), Type: "Placed", Data: json.RawMessage(`{"fail":true}`)})
	got, err := p.Single(ctx, "p", "o1")
	require.NoError(t, err)
	require.Len(t, g.calls, 2)
	assert.Equal(t, "p", g.calls[0].Secret)
	assert.Equal(t, "p", g.calls[0].Projection)
	assert.JSONEq(t, `{"seen":"`+g.calls[0].Event.ID+`"}`, string(got.Data))
	assert.Equal(t, eventstore.RefNumber, got.Reference.Kind)
	assert.Equal(t, first.Position, got.Position, "the failed event changed nothing")
	assert.JSONEq(t, `{"seen":"`+g.calls[0].Event.ID+`"}`, string(json.RawMessage(gjsonGet(g.calls[1].Body, "currentState"))))
	s, err := p.Status(ctx, "p")
	require.NoError(t, err)
	require.Len(t, s.Errors, 1)
	assert.Equal(t, "refused by the function", s.Errors[0].Message)

	// A process without Functions records an error per event.
	q := eventstore.NewProjector(st, nil)
	require.NoError(t, p.Create(ctx, extDef("p2", "go:fold")))
	_, err = q.Single(ctx, "p2", "o1")
	assert.ErrorIs(t, err, eventstore.ErrNotFound)
	s, err = q.Status(ctx, "p2")
	require.NoError(t, err)
	require.Len(t, s.Errors, 2)
	assert.Contains(t, s.Errors[0].Message, "external functions are not enabled in this process")
}

func gjsonGet(b []byte, path string) string {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(b, &m)
	return string(m[path])
}

// TestFunctionSlowHoldsOnlyItself: under Run, a projection whose function
// blocks does not keep the others from catching up round after round.
func TestFunctionSlowHoldsOnlyItself(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	g := &goCaller{fns: map[string]func(context.Context, eventstore.FunctionCall) (eventstore.FunctionResult, error){
		"go:slow": func(ctx context.Context, _ eventstore.FunctionCall) (eventstore.FunctionResult, error) {
			select {
			case <-release:
			case <-ctx.Done():
				return eventstore.FunctionResult{}, ctx.Err()
			}
			return eventstore.FunctionResult{State: json.RawMessage(`{}`)}, nil
		}}}
	st, err := eventstore.New(memory.New(), &eventstore.Options{PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p := eventstore.NewProjector(st, &eventstore.ProjectorOptions{Functions: g})
	require.NoError(t, p.Create(ctx, extDef("slow", "go:slow")))
	createOrderDef(t, p, "fast", false)
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	for i := range 3 {
		res := save(t, st, "order", "o1", eventstore.NewEvent{ID: eventstore.NewEventID(), Type: "Placed"})
		require.Eventually(t, func() bool {
			s, err := p.Status(ctx, "fast")
			return err == nil && s.Checkpoint >= res.Position
		}, 5*time.Second, 5*time.Millisecond, "save %d reaches the fast projection while the slow one waits", i)
	}
	s, err := p.Status(ctx, "slow")
	require.NoError(t, err)
	assert.Zero(t, s.Checkpoint, "the slow one still waits for its function")
	close(release)
	require.Eventually(t, func() bool {
		s, err := p.Status(ctx, "slow")
		return err == nil && s.Behind == 0
	}, 5*time.Second, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
}
