package eventstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/benchstorage"
	"github.com/google/uuid"
)

// BenchmarkSnapshotLoad measures, on every backend, loading a
// 100,000-event aggregate from a snapshot at its last 100 events
// (LoadSnapshot, then LoadRange after the snapshot's version) against
// loading a 100-event aggregate whole (Load), the two alternating in one
// loop so that both see the same machine. It reports the time of each
// per load and their ratio, snapshot/short. The long aggregate is 999
// saves of 100 events then 100 saves of one; the snapshot is at version
// 999, so 100 events follow it. The events and the 1 KiB snapshot are not
// decoded: what is measured is the store's reads.
func BenchmarkSnapshotLoad(b *testing.B) {
	ctx := context.Background()
	data := []byte(`{"cents":100,"memo":"monthly deposit"}`)
	events := func(n int) []eventstore.NewEvent {
		out := make([]eventstore.NewEvent, n)
		for i := range out {
			out[i] = eventstore.NewEvent{ID: uuid.NewString(), Type: "Deposited", Data: data}
		}
		return out
	}
	for _, be := range benchstorage.All {
		b.Run(be.Name, func(b *testing.B) {
			st, err := eventstore.New(be.Open(b), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			save := func(id string, n int) eventstore.SaveResult {
				res, err := st.Save(ctx, "account", id, events(n), nil)
				if err != nil {
					b.Fatal(err)
				}
				return res
			}
			for range 999 {
				save("long", 100)
			}
			for range 100 {
				save("long", 1)
				save("short", 1)
			}
			err = st.SaveSnapshot(ctx, eventstore.Snapshot{AggregateType: "account", AggregateID: "long",
				Version: 999, StateVersion: 1, Data: make([]byte, 1024)})
			if err != nil {
				b.Fatal(err)
			}
			var short, snap time.Duration
			b.ReportAllocs()
			for b.Loop() {
				t0 := time.Now()
				agg, err := st.Load(ctx, "account", "short")
				if err != nil || len(agg.Events) != 100 {
					b.Fatal(len(agg.Events), err)
				}
				t1 := time.Now()
				s, err := st.LoadSnapshot(ctx, "account", "long")
				if err != nil || s.Version != 999 {
					b.Fatal(s.Version, err)
				}
				agg, _, err = st.LoadRange(ctx, "account", "long", s.Version, 0)
				if err != nil || len(agg.Events) != 100 || agg.Version != 1099 {
					b.Fatal(len(agg.Events), agg.Version, err)
				}
				t2 := time.Now()
				short += t1.Sub(t0)
				snap += t2.Sub(t1)
			}
			b.ReportMetric(float64(short.Nanoseconds())/float64(b.N), "short-ns/load")
			b.ReportMetric(float64(snap.Nanoseconds())/float64(b.N), "snapshot-ns/load")
			b.ReportMetric(float64(snap)/float64(short), "snapshot/short")
		})
	}
}
