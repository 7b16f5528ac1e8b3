package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/storage/memory"
)

func ExampleNew() {
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	h := httpapi.New(st, p, &httpapi.Options{
		Keys: []httpapi.KeyPair{{AccessKey: "demo", SecretAccessKey: "demo-secret"}},
	})

	// Mount it under a prefix of the application's own mux.
	mux := http.NewServeMux()
	mux.Handle("/es/", http.StripPrefix("/es", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	call := func(method, path, body string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Service-Access-Key", "demo")
		req.Header.Set("Service-Secret-Access-Key", "demo-secret")
		req.Header.Set("X-Request-Id", "req-1") // optional: the handler draws one otherwise
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if len(b) == 0 {
			fmt.Println(method, path, res.StatusCode, "(empty body)")
			return
		}
		fmt.Println(method, path, res.StatusCode, strings.TrimSpace(string(b)))
	}

	call("POST", "/es/projections/definitions", `{"projectionName":"orders-per-city","feedName":"order",
		"aggregated":true,"handlers":[{"eventType":"OrderPlaced","functions":[
		{"function":"inc","targetSelector":"$.projection.count"},
		{"function":"add","targetSelector":"$.projection.revenue","eventSelector":"$.event.total"}]}]}`)
	call("POST", "/es/aggregates/order/o-1/events",
		`{"events":[{"eventId":"5a0f3c1e-8a39-4f3e-9d3b-1c2d3e4f5a61","eventType":"OrderPlaced","data":{"total":19.99}}]}`)
	call("POST", "/es/aggregates/order/o-2/events",
		`{"events":[{"eventId":"5a0f3c1e-8a39-4f3e-9d3b-1c2d3e4f5a62","eventType":"OrderPlaced","data":{"total":0.01}}]}`)
	call("POST", "/es/aggregates/order/o-2/events", `{"events":[{"eventId":"not-a-uuid","eventType":"OrderPlaced"}]}`)
	call("POST", "/es/aggregates/order/o-2/events", `{"events":[`)

	req, _ := http.NewRequest("GET", srv.URL+"/es/projections/aggregated/orders-per-city", nil)
	req.Header.Set("Service-Access-Key", "demo")
	req.Header.Set("Service-Secret-Access-Key", "demo-secret")
	res, _ := http.DefaultClient.Do(req)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	// updatedAt varies: print the data only.
	fmt.Println(res.StatusCode, strings.TrimSpace(string(b[strings.Index(string(b), `"data"`):])))
	// Output:
	// POST /es/projections/definitions 200 {"projectionName":"orders-per-city","feedName":"order","aggregated":true,"handlers":[{"eventType":"OrderPlaced","functions":[{"function":"inc","targetSelector":"$.projection.count"},{"function":"add","targetSelector":"$.projection.revenue","eventSelector":"$.event.total"}]}]}
	// POST /es/aggregates/order/o-1/events 200 (empty body)
	// POST /es/aggregates/order/o-2/events 200 (empty body)
	// POST /es/aggregates/order/o-2/events 422 {"code":"invalid","message":"events[0].eventId: must be a UUID such as 123e4567-e89b-12d3-a456-426614174000, got \"not-a-uuid\"","errors":[{"field":"events[0].eventId","message":"must be a UUID such as 123e4567-e89b-12d3-a456-426614174000, got \"not-a-uuid\""}],"requestId":"req-1"}
	// POST /es/aggregates/order/o-2/events 400 {"code":"malformed","message":"the body is not valid JSON: unexpected end at line 1, column 12 (byte 11)","errors":[],"requestId":"req-1"}
	// 200 "data":{"count":"2","revenue":"20.00"}}
}

// ExampleOptions_authorize mounts the handler behind the application's own
// authentication: Authorize decides instead of the key pairs.
func ExampleOptions_authorize() {
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	h := httpapi.New(st, p, &httpapi.Options{
		Authorize: func(r *http.Request) bool {
			// The application's session check; here a fixed bearer token.
			return r.Header.Get("Authorization") == "Bearer session-42"
		},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, token := range []string{"Bearer session-42", "Bearer stolen"} {
		req, _ := http.NewRequest("GET", srv.URL+"/feeds", nil)
		req.Header.Set("Authorization", token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		res.Body.Close()
		fmt.Println(token, res.StatusCode)
	}
	// Output:
	// Bearer session-42 200
	// Bearer stolen 401
}
