package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// TestReportStartup: on a store whose projection is behind, the server
// logs the store's size and the projector's progress until it has caught
// up.
func TestReportStartup(t *testing.T) {
	ctx := context.Background()
	st, err := eventstore.New(memory.New(), nil)
	require.NoError(t, err)
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	var def eventstore.Definition
	err = json.Unmarshal([]byte(`{"projectionName":"n","feedName":"order","aggregated":true,
		"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.n"}]}]}`), &def)
	require.NoError(t, err)
	require.NoError(t, p.Create(ctx, def))
	for range 50 {
		_, err := st.Save(ctx, "order", uuid.NewString(), []eventstore.NewEvent{{ID: uuid.NewString(), Type: "Placed"}}, nil)
		require.NoError(t, err)
	}
	var logs syncBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		reportStartup(ctx, st, p, slog.New(slog.NewTextHandler(&logs, nil)), 20*time.Millisecond)
	}()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "projector catching up") }, 5*time.Second, 5*time.Millisecond)
	require.NoError(t, p.CatchUp(ctx))
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reportStartup did not return after the projections caught up")
	}
	out := logs.String()
	assert.Contains(t, out, `msg="store opened" feed_head=50 projections=1`)
	assert.Contains(t, out, "positions_behind=50")
	assert.Contains(t, out, "projections caught up")
}

// TestReportStartupNothingToCatchUp: when the newest events are of a type
// no projection reads, the projections' checkpoints stay below the head
// but nothing is behind (Status.Behind 0): the server says they have
// caught up at once instead of logging "projector catching up ...
// per_second=0" every interval forever.
func TestReportStartupNothingToCatchUp(t *testing.T) {
	ctx := context.Background()
	st, err := eventstore.New(memory.New(), nil)
	require.NoError(t, err)
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	for _, name := range []string{"a", "b"} {
		var def eventstore.Definition
		err := json.Unmarshal([]byte(`{"projectionName":"`+name+`","feedName":"order","aggregated":true,
			"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.n"}]}]}`), &def)
		require.NoError(t, err)
		require.NoError(t, p.Create(ctx, def))
	}
	_, err = st.Save(ctx, "order", uuid.NewString(), []eventstore.NewEvent{{ID: uuid.NewString(), Type: "Placed"}}, nil)
	require.NoError(t, err)
	require.NoError(t, p.CatchUp(ctx))
	for range 5 {
		_, err := st.Save(ctx, "user", uuid.NewString(), []eventstore.NewEvent{{ID: uuid.NewString(), Type: "Joined"}}, nil)
		require.NoError(t, err)
	}
	ov, err := p.Statuses(ctx)
	require.NoError(t, err)
	require.Len(t, ov, 2)
	require.Less(t, ov[0].Checkpoint, ov[0].Head, "the case of the issue: checkpoints below the head of all types")
	var logs syncBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		reportStartup(ctx, st, p, slog.New(slog.NewTextHandler(&logs, nil)), 20*time.Millisecond)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reportStartup still reports progress with nothing to catch up")
	}
	assert.NotContains(t, logs.String(), "projector catching up")
	assert.Contains(t, logs.String(), "projections caught up")
}
