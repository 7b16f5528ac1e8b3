package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/internal/benchstorage"
	"github.com/google/uuid"
)

// BenchmarkSaveAll compares saving 10 aggregates × 10 events with one
// SaveAll against 10 separate Save calls, on every backend; compare the
// events/s of bulk and separate within one run.
func BenchmarkSaveAll(b *testing.B) {
	const aggs, perAgg = 10, 10
	for _, be := range benchstorage.All {
		b.Run(be.Name, func(b *testing.B) {
			st, err := eventstore.New(be.Open(b), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			batches := func(round int) []eventstore.Batch {
				out := make([]eventstore.Batch, aggs)
				for a := range out {
					evs := make([]eventstore.NewEvent, perAgg)
					for i := range evs {
						evs[i] = eventstore.NewEvent{ID: uuid.NewString(), Type: "Deposited", Data: []byte(`{"amount":"12.50"}`)}
					}
					out[a] = eventstore.Batch{AggregateID: fmt.Sprintf("acct-%d-%d", round, a), Events: evs}
				}
				return out
			}
			if _, err := st.SaveAll(ctx, "probe", batches(-1)); errors.Is(err, errors.ErrUnsupported) {
				b.Skip("the backend does not implement AppendAll yet")
			}
			b.Run("bulk", func(b *testing.B) {
				round := 0
				for b.Loop() {
					b.StopTimer()
					in := batches(round)
					round++
					b.StartTimer()
					if _, err := st.SaveAll(ctx, "bulk", in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(aggs*perAgg*b.N)/b.Elapsed().Seconds(), "events/s")
			})
			b.Run("separate", func(b *testing.B) {
				round := 0
				for b.Loop() {
					b.StopTimer()
					in := batches(round)
					round++
					b.StartTimer()
					for _, bt := range in {
						if _, err := st.Save(ctx, "separate", bt.AggregateID, bt.Events, nil); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportMetric(float64(aggs*perAgg*b.N)/b.Elapsed().Seconds(), "events/s")
			})
		})
	}
}
