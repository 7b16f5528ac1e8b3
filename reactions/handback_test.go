package reactions_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/stretchr/testify/require"
)

// TestStopHandsClaimsBack stops an Engine while it holds reactions it
// claimed: one in the middle of its delivery (cut short) and the others
// waiting for a slot. Another Engine on the same storage (the next process
// of a rolling restart) must deliver them all within seconds rather than
// after their lease of more than a minute.
func TestStopHandsClaimsBack(t *testing.T) {
	s := memory.New()
	started := make(chan struct{}, 10)
	var delivered atomic.Int32
	block := map[string]reactions.Func{"remind": func(ctx context.Context, _ reactions.Delivery) error {
		started <- struct{}{}
		<-ctx.Done() // never finishes: the shutdown cuts it short
		return ctx.Err()
	}}
	deliver := map[string]reactions.Func{"remind": func(context.Context, reactions.Delivery) error {
		delivered.Add(1)
		return nil
	}}
	d := reactions.Definition{Name: "remind", FeedName: "order", ReactOnEventType: "placed",
		Action: reactions.Action{Type: reactions.ActionFunc, Function: "remind"}}
	// The attempt cut short counts as a failed one: its retry is due after
	// Backoff.
	st, e := setup(t, s, &reactions.Options{Funcs: block, Concurrency: 1, Backoff: time.Millisecond, Timeout: time.Second})
	require.NoError(t, e.Create(t.Context(), d))
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		save(t, st, id, "placed", `{}`)
	}
	stop := run(t, e)
	<-started
	waitFor(t, "all three claimed", func() bool { return statuses(t, e)[reactions.StatusOngoing] == 3 })
	t0 := time.Now()
	stop()

	_, e2 := setup(t, s, &reactions.Options{Funcs: deliver, PollInterval: 10 * time.Millisecond})
	stop2 := run(t, e2)
	defer stop2()
	waitFor(t, "the three delivered by the next engine", func() bool { return delivered.Load() == 3 })
	t.Logf("delivered %v after the stop", time.Since(t0))
	waitFor(t, "completed", func() bool { return statuses(t, e2)[reactions.StatusCompleted] == 3 })
}
