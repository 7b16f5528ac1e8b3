package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestFeedLongPollLatencyTwoServers measures how fast a save through
// server A reaches a long poll (GET /feeds/{type}?waitTime=) waiting on
// server B, both on one PostgreSQL database: from the moment A
// acknowledges the save (200) to the moment B answers (0 when B answered
// first), and, for information, from the moment the save was sent (which
// adds A's commit, fsync included). It prints p50 and p99 (the target is a
// p99 of at most 50 ms after the acknowledgement) and fails when the
// median shows polling instead of wake-ups. Both need the storage
// to report appends across processes (storage.AppendWatcher:
// LISTEN/NOTIFY); with polling alone it is about half the poll interval.
func TestFeedLongPollLatencyTwoServers(t *testing.T) {
	db := freshDatabase(t)
	a, b := startServer(t, db), startServer(t, db)
	save := func(id string) {
		a.mustDo("POST", "/aggregates/lat/"+id+"/events", map[string]any{
			"events": []map[string]any{{"eventId": uuid.NewString(), "eventType": "Ping"}},
		}, http.StatusOK)
	}
	save("warm-up")
	var head struct {
		CurrentSequenceNumber int64 `json:"currentSequenceNumber"`
	}
	require.NoError(t, json.Unmarshal(b.mustDo("GET", "/feeds/lat", nil, http.StatusOK), &head))
	since := head.CurrentSequenceNumber

	const rounds = 200
	var lat, total []time.Duration
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; i < rounds && time.Now().Before(deadline); i++ {
		type answer struct {
			at      time.Time
			status  int
			body    []byte
			err     error
			entries int
		}
		got := make(chan answer, 1)
		go func() {
			status, body, err := b.do(context.Background(), "GET", fmt.Sprintf("/feeds/lat?since=%d&waitTime=8000", since), nil)
			ans := answer{at: time.Now(), status: status, body: body, err: err}
			var f struct {
				Entries []struct {
					SequenceNumber int64 `json:"sequenceNumber"`
				} `json:"entries"`
			}
			if err == nil && json.Unmarshal(body, &f) == nil {
				ans.entries = len(f.Entries)
				if ans.entries > 0 {
					since = f.Entries[len(f.Entries)-1].SequenceNumber
				}
			}
			got <- ans
		}()
		time.Sleep(30 * time.Millisecond) // let B's poll start waiting
		start := time.Now()
		save(fmt.Sprint("agg-", i))
		acked := time.Now()
		ans := <-got
		require.NoError(t, ans.err)
		require.Equal(t, http.StatusOK, ans.status, "%s", ans.body)
		require.Equal(t, 1, ans.entries, "B's long poll must return A's save: %s", ans.body)
		lat = append(lat, max(0, ans.at.Sub(acked)))
		if d := ans.at.Sub(acked); d > 50*time.Millisecond {
			t.Logf("round %d: B answered %v after A's 200 (the save took %v)", i, d, acked.Sub(start))
		}
		total = append(total, ans.at.Sub(start))
	}
	slices.Sort(lat)
	slices.Sort(total)
	pct := func(d []time.Duration, p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	fmt.Printf("feed long-poll latency across servers (PostgreSQL, %d rounds): after A's 200: p50 %v p99 %v; from sending the save: p50 %v p99 %v\n",
		len(lat), pct(lat, 0.50), pct(lat, 0.99), pct(total, 0.50), pct(total, 0.99))
	// The 50 ms p99 target is a figure to read off the line above, not a
	// pass mark: a shared machine stalls now and then. What must hold is
	// that B is woken, not polling: with the 1 s poll alone the median is
	// about 500 ms.
	if p50 := pct(lat, 0.50); p50 > 100*time.Millisecond {
		t.Errorf("p50 %v: server B is not woken by A's saves (does the storage implement storage.AppendWatcher?)", p50)
	}
}
