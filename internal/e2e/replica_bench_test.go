package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// BenchmarkReplicaReads measures the read throughput of clients that
// load aggregates and read feed pages, on the primary alone and with the
// standby as a read replica, in alternating rounds of the same run. Both
// servers share this machine's CPU, so the ratio shows what the routing
// costs (the replica's checks, the read of its position, fallbacks), not
// the scale-out of a second machine.
//
//	go test ./internal/e2e -run '^$' -bench BenchmarkReplicaReads -benchtime 1x
func BenchmarkReplicaReads(b *testing.B) {
	primary, standby := newPair(b, false)
	ctx := context.Background()
	const aggs, perAgg, clients = 200, 10, 4
	seed, err := postgres.OpenURL(ctx, primary.url, &postgres.Options{Schema: "bench"})
	require.NoError(b, err)
	seedStore, err := eventstore.New(seed, nil)
	require.NoError(b, err)
	for i := range aggs {
		events := make([]eventstore.NewEvent, perAgg)
		for j := range events {
			events[j] = eventstore.NewEvent{ID: uuid.NewString(), Type: "Deposited", Data: json.RawMessage(`{"amount":"1.00","note":"benchmark"}`)}
		}
		_, err := seedStore.Save(ctx, "account", fmt.Sprintf("a%d", i), events, nil)
		require.NoError(b, err)
	}
	seedStore.Close()
	waitReplayed(b, primary, standby)

	open := func(opts *postgres.Options) (*eventstore.Store, func() (int64, int64)) {
		s, err := postgres.OpenURL(ctx, primary.url, opts)
		require.NoError(b, err)
		st, err := eventstore.New(s, nil)
		require.NoError(b, err)
		b.Cleanup(func() { st.Close() })
		return st, func() (int64, int64) {
			rs, onPrimary := postgres.ReplicaStatus(s)
			if len(rs) == 0 {
				return 0, 0
			}
			return rs[0].Reads, onPrimary
		}
	}
	plain, _ := open(&postgres.Options{Schema: "bench"})
	replicated, counts := open(&postgres.Options{Schema: "bench", Replicas: []string{standby.url}})

	const round = 3 * time.Second
	// measure runs the clients on st for a round and returns their reads
	// per second; with write, one more client saves in a loop through st,
	// so that reads must see its saves (read-your-writes).
	measure := func(st *eventstore.Store, write bool) float64 {
		var ops atomic.Int64
		stop := time.Now().Add(round)
		var wg sync.WaitGroup
		if write {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(stop); i++ {
					_, err := st.Save(ctx, "account", fmt.Sprintf("a%d", i%aggs), []eventstore.NewEvent{{ID: uuid.NewString(), Type: "Deposited", Data: json.RawMessage(`{"amount":"1.00"}`)}}, nil)
					require.NoError(b, err)
				}
			}()
		}
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(c), 1))
				for i := 0; time.Now().Before(stop); i++ {
					if i%2 == 0 {
						_, err := st.Load(ctx, "account", fmt.Sprintf("a%d", r.IntN(aggs)))
						require.NoError(b, err)
					} else {
						_, err := st.ReadFeed(ctx, "", r.Int64N(aggs*perAgg), &eventstore.FeedOptions{Limit: 20})
						require.NoError(b, err)
					}
					ops.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(ops.Load()) / round.Seconds()
	}
	for _, write := range []bool{false, true} {
		name := "reads"
		if write {
			name = "reads+writer"
		}
		b.Run(name, func(b *testing.B) {
			measure(plain, write) // warm up both
			measure(replicated, write)
			r0, p0 := counts()
			var sumP, sumR float64
			rounds := 0
			for range b.N {
				for k := range 3 {
					var p, r float64
					if k%2 == 0 {
						p, r = measure(plain, write), measure(replicated, write)
					} else {
						r, p = measure(replicated, write), measure(plain, write)
					}
					b.Logf("round %d: primary alone %.0f reads/s, with the replica %.0f reads/s (%.2f)", rounds+1, p, r, r/p)
					sumP, sumR = sumP+p, sumR+r
					rounds++
				}
			}
			r1, p1 := counts()
			b.ReportMetric(sumP/float64(rounds), "primary-reads/s")
			b.ReportMetric(sumR/float64(rounds), "replica-reads/s")
			b.ReportMetric(sumR/sumP, "ratio")
			b.ReportMetric(float64(r1-r0)/float64(r1-r0+p1-p0), "served-by-replica")
		})
	}
}
