package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/internal/benchstorage"
	"github.com/google/uuid"
)

// feedBenchPerBatch is the number of events per entry of the feed
// benchmarks: a page of 1,000 entries holds 2,000 events.
const feedBenchPerBatch = 2

// BenchmarkFeedHTTP reads GET /feeds/_all?limit=1000 (1,000 entries of two
// events each) through the handler, on every backend, and reports events
// per second. fixed-body is the baseline of the same run: a handler that
// writes the same two pages (captured from the memory backend) with the
// same headers, so that the cost of the recorder and of the request is
// paid by both; compare the backends' events/s with its.
func BenchmarkFeedHTTP(b *testing.B) {
	b.Run("fixed-body", func(b *testing.B) {
		h := feedHandler(b, benchstorage.All[0])
		var pages [2]*httptest.ResponseRecorder
		for i := range pages {
			pages[i] = httptest.NewRecorder()
			h.ServeHTTP(pages[i], feedRequest(i))
		}
		fixed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p := pages[0]
			if r.URL.Query().Get("since") != "0" {
				p = pages[1]
			}
			for k, v := range p.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(p.Code)
			_, _ = w.Write(p.Body.Bytes())
		})
		readFeedPages(b, fixed)
	})
	for _, be := range benchstorage.All {
		b.Run(be.Name, func(b *testing.B) { readFeedPages(b, feedHandler(b, be)) })
	}
}

// feedHandler returns a handler serving a new store of be holding 3,000
// entries of two events.
func feedHandler(b *testing.B, be benchstorage.Backend) http.Handler {
	const batches = 3000
	st, err := eventstore.New(be.Open(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	ctx := context.Background()
	all := make([]eventstore.Batch, 0, 100)
	for i := range batches {
		evs := make([]eventstore.NewEvent, feedBenchPerBatch)
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
	return httpapi.New(st, eventstore.NewProjector(st, nil), &httpapi.Options{Keys: []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}})
}

// feedRequest asks for page 0 or 1 of 1,000 entries of the feed of all
// types.
func feedRequest(page int) *http.Request {
	since := int64(page%2) * 1000 * feedBenchPerBatch
	r := httptest.NewRequest("GET", fmt.Sprintf("/feeds/_all?limit=1000&since=%d", since), nil)
	r.Header.Set(httpapi.HeaderAccessKey, testAccess)
	r.Header.Set(httpapi.HeaderSecretAccessKey, testSecret)
	return r
}

// readFeedPages reads pages 0 and 1 in turn from h and reports events/s.
func readFeedPages(b *testing.B, h http.Handler) {
	b.ReportAllocs()
	b.ResetTimer()
	page := 0
	for b.Loop() {
		r := feedRequest(page)
		page++
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(1000*feedBenchPerBatch*b.N)/b.Elapsed().Seconds(), "events/s")
}
