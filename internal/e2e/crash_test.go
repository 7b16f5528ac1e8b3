package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// batch is one save the clients attempted.
type batch struct {
	agg   string
	ids   []string
	cents []int64 // amount of each event, in cents
	acked bool    // the server answered 200
}

type loadedAggregate struct {
	AggregateVersion int64 `json:"aggregateVersion"`
	Events           []struct {
		EventID string `json:"eventId"`
		Version int64  `json:"version"`
		Data    struct {
			Amount json.Number `json:"amount"`
		} `json:"data"`
	} `json:"events"`
}

type projectionResult struct {
	ProjectionID string            `json:"projectionId"`
	Data         map[string]string `json:"data"`
}

func definition(name string, aggregated bool) map[string]any {
	return map[string]any{
		"projectionName": name, "feedName": "account", "aggregated": aggregated,
		"handlers": []any{map[string]any{
			"eventType": "Deposited",
			"functions": []any{
				map[string]any{"function": "add", "targetSelector": "$.projection.total", "eventSelector": "$.event.amount"},
				map[string]any{"function": "inc", "targetSelector": "$.projection.count"},
			},
		}},
	}
}

func saveBody(b *batch) map[string]any {
	events := make([]any, len(b.ids))
	for i, id := range b.ids {
		events[i] = map[string]any{"eventId": id, "eventType": "Deposited",
			"data": json.RawMessage(fmt.Sprintf(`{"amount": %d.%02d}`, b.cents[i]/100, b.cents[i]%100))}
	}
	return map[string]any{"events": events}
}

// loadAccount loads aggregate account/agg; ok is false when it has no
// events.
func (s *server) loadAccount(agg string) (a loadedAggregate, ok bool) {
	s.t.Helper()
	status, body, err := s.do(context.Background(), "GET", "/aggregates/account/"+agg, nil)
	require.NoError(s.t, err)
	if status == http.StatusNotFound {
		return a, false
	}
	require.Equal(s.t, http.StatusOK, status, "%s", body)
	require.NoError(s.t, json.Unmarshal(body, &a))
	return a, true
}

// crashAndCheck saves from many clients, SIGKILLs the server mid-load,
// restarts it on the same storage and checks that every acknowledged save is
// there, no batch is partly there, and the projections equal a rebuild.
func crashAndCheck(t *testing.T, storageArg string) {
	const (
		writers    = 16
		aggregates = 24
	)
	s := startServer(t, storageArg)
	s.mustDo("POST", "/projections/definitions", definition("totals", true), http.StatusOK)
	s.mustDo("POST", "/projections/definitions", definition("per-account", false), http.StatusOK)

	var (
		mu      sync.Mutex
		batches []*batch
		acked   int
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 42))
			for ctx.Err() == nil {
				b := &batch{agg: fmt.Sprint("acct-", rng.IntN(aggregates))}
				for range 1 + rng.IntN(4) {
					b.ids = append(b.ids, uuid.NewString())
					b.cents = append(b.cents, int64(1+rng.IntN(10000)))
				}
				mu.Lock()
				batches = append(batches, b)
				mu.Unlock()
				status, _, err := s.do(ctx, "POST", "/aggregates/account/"+b.agg+"/events", saveBody(b))
				if err != nil {
					return // the server is gone
				}
				if status == http.StatusOK {
					mu.Lock()
					b.acked = true
					acked++
					mu.Unlock()
				}
				if rng.IntN(8) == 0 { // queries keep the projector busy too
					_, _, _ = s.do(ctx, "GET", "/projections/aggregated/totals", nil)
				}
			}
		}()
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return acked >= 300
	}, 60*time.Second, 5*time.Millisecond, "clients could not save")
	s.kill() // SIGKILL while the clients are saving
	cancel()
	wg.Wait()

	s = startServer(t, storageArg)
	stored := map[string]int{} // event id -> version
	amounts := map[string]int64{}
	perAgg := map[string]int{}
	for i := range aggregates {
		agg := fmt.Sprint("acct-", i)
		a, ok := s.loadAccount(agg)
		if !ok {
			continue
		}
		perAgg[agg] = len(a.Events)
		for _, e := range a.Events {
			stored[e.EventID] = int(e.Version)
		}
	}
	lost, partial, storedBatches := 0, 0, 0
	var wantCents int64
	for _, b := range batches {
		n := 0
		versions := map[int]bool{}
		for i, id := range b.ids {
			if v, ok := stored[id]; ok {
				n++
				versions[v] = true
				amounts[id] = b.cents[i]
			}
		}
		switch {
		case n == len(b.ids):
			storedBatches++
			for _, c := range b.cents {
				wantCents += c
			}
			assert.Len(t, versions, 1, "the events of one batch share one version")
		case n > 0:
			partial++
		case b.acked:
			lost++
		}
	}
	t.Logf("%d batches attempted, %d acknowledged, %d stored", len(batches), acked, storedBatches)
	assert.Zero(t, lost, "acknowledged saves lost")
	assert.Zero(t, partial, "batches partly stored")
	assert.Equal(t, len(amounts), len(stored), "stored events the clients never sent")

	// Projections survived the crash and equal a rebuild from scratch.
	var totals projectionResult
	require.NoError(t, json.Unmarshal(s.mustDo("GET", "/projections/aggregated/totals", nil, http.StatusOK), &totals))
	assert.Equal(t, fmt.Sprint(len(stored)), totals.Data["count"], "every stored event counted exactly once")
	assert.Equal(t, fmt.Sprintf("%d.%02d", wantCents/100, wantCents%100), totals.Data["total"])

	s.mustDo("POST", "/projections/definitions", definition("rebuilt", true), http.StatusOK)
	var rebuilt projectionResult
	require.NoError(t, json.Unmarshal(s.mustDo("GET", "/projections/aggregated/rebuilt", nil, http.StatusOK), &rebuilt))
	assert.Equal(t, rebuilt.Data, totals.Data, "projection after the crash differs from a rebuild")
	for agg, n := range perAgg {
		var one projectionResult
		require.NoError(t, json.Unmarshal(s.mustDo("GET", "/projections/single/per-account/"+agg, nil, http.StatusOK), &one))
		assert.Equal(t, fmt.Sprint(n), one.Data["count"], agg)
	}

	// A client that did not learn the outcome retries: every retry succeeds,
	// and afterwards every batch is stored exactly once.
	for _, b := range batches {
		if !b.acked {
			s.mustDo("POST", "/aggregates/account/"+b.agg+"/events", saveBody(b), http.StatusOK)
		}
	}
	require.NoError(t, json.Unmarshal(s.mustDo("GET", "/projections/aggregated/totals", nil, http.StatusOK), &totals))
	total := 0
	for _, b := range batches {
		total += len(b.ids)
	}
	assert.Equal(t, fmt.Sprint(total), totals.Data["count"], "retries stored each batch exactly once")
}

func TestCrashSQLite(t *testing.T) {
	crashAndCheck(t, "sqlite:"+filepath.Join(t.TempDir(), "crash.db"))
}
