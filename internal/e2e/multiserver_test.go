package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTwoServersOnePostgres runs two server processes on one database, as a
// deployment with several instances would: clients save through both, and
// the two must behave as one store (no lost or doubled event, versions
// strictly increasing per aggregate, every projection event applied exactly
// once, the same projection seen through either).
func TestTwoServersOnePostgres(t *testing.T) {
	db := freshDatabase(t)
	servers := []*server{startServer(t, db), startServer(t, db)}
	servers[0].mustDo("POST", "/projections/definitions", definition("totals", true), http.StatusOK)
	servers[1].mustDo("POST", "/projections/definitions", definition("per-account", false), http.StatusOK)
	// The name is taken for both: the second instance sees the first's definition.
	servers[1].mustDo("POST", "/projections/definitions", definition("totals", true), http.StatusConflict)

	const writers, saves, aggregates = 8, 40, 6
	var (
		mu      sync.Mutex
		acked   = map[string]bool{} // event id -> saved (200)
		wantSum int64
	)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			s := servers[w%2]
			for i := range saves {
				b := &batch{agg: fmt.Sprint("acct-", (w+i)%aggregates), ids: []string{uuid.NewString(), uuid.NewString()}, cents: []int64{int64(100 + i), 5}}
				status, body, err := s.do(context.Background(), "POST", "/aggregates/account/"+b.agg+"/events", saveBody(b))
				if err != nil || status != http.StatusOK {
					t.Errorf("save through server %d: %d %s %v", w%2, status, body, err)
					return
				}
				mu.Lock()
				for k, id := range b.ids {
					acked[id] = true
					wantSum += b.cents[k]
				}
				mu.Unlock()
				// Read your writes on the instance that saved.
				var one projectionResult
				if err := json.Unmarshal(s.mustDo("GET", "/projections/single/per-account/"+b.agg, nil, http.StatusOK), &one); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	require.Len(t, acked, writers*saves*2)

	// Both instances load the same aggregates: every event once, versions
	// contiguous.
	perAgg := map[string]string{}
	for i := range aggregates {
		agg := fmt.Sprint("acct-", i)
		var bodies [2]string
		for k, s := range servers {
			body := s.mustDo("GET", "/aggregates/account/"+agg, nil, http.StatusOK)
			bodies[k] = string(body)
			var a loadedAggregate
			require.NoError(t, json.Unmarshal(body, &a))
			seen := map[string]bool{}
			last := int64(0)
			for _, e := range a.Events {
				assert.True(t, acked[e.EventID], "unknown event %s", e.EventID)
				assert.False(t, seen[e.EventID], "event %s stored twice", e.EventID)
				seen[e.EventID] = true
				assert.Contains(t, []int64{last, last + 1}, e.Version, "versions of %s jump", agg)
				last = e.Version
			}
			assert.Equal(t, last, a.AggregateVersion)
			perAgg[agg] = fmt.Sprint(len(a.Events))
		}
		assert.Equal(t, bodies[0], bodies[1], "the two instances disagree on %s", agg)
	}

	// Both instances converge on the same projections, applied exactly once
	// (saves through the other instance arrive within the poll interval).
	want := map[string]string{"count": fmt.Sprint(len(acked)), "total": fmt.Sprintf("%d.%02d", wantSum/100, wantSum%100)}
	for k, s := range servers {
		require.Eventually(t, func() bool {
			var got projectionResult
			status, body, err := s.do(context.Background(), "GET", "/projections/aggregated/totals", nil)
			return err == nil && status == http.StatusOK && json.Unmarshal(body, &got) == nil &&
				got.Data["count"] == want["count"] && got.Data["total"] == want["total"]
		}, 10*time.Second, 50*time.Millisecond, "server %d never showed totals %v", k, want)
		for agg, n := range perAgg {
			require.Eventually(t, func() bool {
				var got projectionResult
				status, body, err := s.do(context.Background(), "GET", "/projections/single/per-account/"+agg, nil)
				return err == nil && status == http.StatusOK && json.Unmarshal(body, &got) == nil && got.Data["count"] == n
			}, 10*time.Second, 50*time.Millisecond, "server %d: per-account %s never counted %s", k, agg, n)
		}
	}
}
