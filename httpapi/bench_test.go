package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// BenchmarkQueryHTTP measures an aggregated projection query through the
// handler (auth, routing, projector catch-up check, storage read, ETag,
// encoding) against a baseline handler that only writes the same body
// with the same headers; compare api's ns/op with baseline's. Both pay for
// httptest.NewRecorder.
func BenchmarkQueryHTTP(b *testing.B) {
	ctx := context.Background()
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	if err := p.Create(ctx, eventstore.Definition{Name: "totals", Feed: "order", Aggregated: true,
		Handlers: []eventstore.Handler{{EventType: "OrderPlaced", Functions: []eventstore.Function{
			{Name: "add", TargetSelector: "$.projection.revenue", EventSelector: "$.event.total"},
			{Name: "inc", TargetSelector: "$.projection.orders"},
			{Name: "set", TargetSelector: "$.projection.lastCity", EventSelector: "$.event.city"},
		}}}}); err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		_, err := st.Save(ctx, "order", "o-"+strconv.Itoa(i), []eventstore.NewEvent{{
			ID: "00000000-0000-4000-8000-" + pad12(i), Type: "OrderPlaced",
			Data: []byte(`{"total": 12.34, "city": "Lyon"}`)}}, nil)
		if err != nil {
			b.Fatal(err)
		}
	}
	h := httpapi.New(st, p, &httpapi.Options{Keys: []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}})
	// Run keeps the projection current, as in a server: queries then only
	// check the checkpoint.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _ = p.Run(runCtx) }()
	if err := p.CatchUp(ctx, "totals"); err != nil {
		b.Fatal(err)
	}

	req := httptest.NewRequest("GET", "/projections/aggregated/totals", nil)
	req.Header.Set(httpapi.HeaderAccessKey, testAccess)
	req.Header.Set(httpapi.HeaderSecretAccessKey, testSecret)
	first := httptest.NewRecorder()
	h.ServeHTTP(first, req)
	if first.Code != 200 {
		b.Fatalf("query: %d %s", first.Code, first.Body)
	}
	body := first.Body.Bytes()
	hdr := first.Header().Clone()
	baseline := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range hdr {
			w.Header()[k] = v
		}
		w.WriteHeader(200)
		_, _ = w.Write(body)
	})

	serve := func(b *testing.B, h http.Handler, r *http.Request, want int) {
		b.ReportAllocs()
		for b.Loop() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != want {
				b.Fatalf("status %d", w.Code)
			}
		}
	}
	b.Run("baseline", func(b *testing.B) { serve(b, baseline, req, 200) })
	b.Run("api", func(b *testing.B) { serve(b, h, req, 200) })
	cond := req.Clone(ctx)
	cond.Header.Set("If-None-Match", hdr.Get("ETag"))
	b.Run("api-304", func(b *testing.B) { serve(b, h, cond, 304) })
}

func pad12(i int) string {
	s := strconv.Itoa(i)
	for len(s) < 12 {
		s = "0" + s
	}
	return s
}
