package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/internal/benchstorage"
	"github.com/google/uuid"
)

// BenchmarkFeedHTTP reads GET /feeds/_all?limit=1000 (1,000 entries of two
// events each) through the handler, on every backend, and reports events
// per second.
func BenchmarkFeedHTTP(b *testing.B) {
	const batches, perBatch = 3000, 2
	for _, be := range benchstorage.All {
		b.Run(be.Name, func(b *testing.B) {
			st, err := eventstore.New(be.Open(b), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			ctx := context.Background()
			all := make([]eventstore.Batch, 0, 100)
			for i := range batches {
				evs := make([]eventstore.NewEvent, perBatch)
				for k := range evs {
					evs[k] = eventstore.NewEvent{ID: uuid.NewString(), Type: "OrderPlaced", Data: []byte(`{"total":"12.50","city":"Lyon","items":[1,2,3]}`)}
				}
				all = append(all, eventstore.Batch{AggregateID: fmt.Sprint("o-", i), Events: evs})
				if len(all) == cap(all) {
					if _, err := st.SaveAll(ctx, "order", all); err != nil {
						if errors.Is(err, errors.ErrUnsupported) {
							b.Skip("the backend does not implement AppendAll yet")
						}
						b.Fatal(err)
					}
					all = all[:0]
				}
			}
			h := httpapi.New(st, eventstore.NewProjector(st, nil), &httpapi.Options{Keys: []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}})
			b.ResetTimer()
			page := 0
			for b.Loop() {
				since := int64(page%2) * 1000 * perBatch // pages 1 and 2 in turn
				page++
				r := httptest.NewRequest("GET", fmt.Sprintf("/feeds/_all?limit=1000&since=%d", since), nil)
				r.Header.Set(httpapi.HeaderAccessKey, testAccess)
				r.Header.Set(httpapi.HeaderSecretAccessKey, testSecret)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			b.ReportMetric(float64(1000*perBatch*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
