package eventstore_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/storage/memory"
)

// Example_readme is the example of docs/library.md; TestReadmeExample
// checks that the README shows exactly the code between the markers.
func Example_readme() {
	// README begin
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := eventstore.New(memory.New(), nil) // or sqlite.Open(path, nil), postgres.OpenURL(ctx, url, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	p := eventstore.NewProjector(st, nil)

	// Put creates or replaces a definition: safe at every start.
	_, err = p.Put(ctx, eventstore.Definition{
		Name: "order-totals", Feed: "order", Aggregated: true,
		Handlers: []eventstore.Handler{{EventType: "OrderPlaced", Functions: []eventstore.Function{
			{Name: "add", TargetSelector: "$.projection.revenue", EventSelector: "$.event.total"},
			{Name: "inc", TargetSelector: "$.projection.orders"},
		}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	_, err = st.Save(ctx, "order", "o-1", []eventstore.NewEvent{{
		ID: "9d7e0c52-1b0a-4d38-a3a4-0d6a3f0e0001", Type: "OrderPlaced", Data: []byte(`{"total": 0.1}`),
	}}, &eventstore.SaveOptions{ExpectedVersion: eventstore.ExpectVersion(0)})
	if err != nil {
		log.Fatal(err)
	}
	proj, err := p.Aggregated(ctx, "order-totals") // reflects the save above
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(proj.Data))

	// Serve it over HTTP on any mux, at any prefix.
	h := httpapi.New(st, p, &httpapi.Options{Keys: []httpapi.KeyPair{{AccessKey: "demo", SecretAccessKey: "demo-secret"}}})
	mux := http.NewServeMux()
	mux.Handle("/es/", http.StripPrefix("/es", h))
	go p.Run(ctx) // optional: keeps projections current in the background

	srv := httptest.NewServer(mux) // or http.ListenAndServe(addr, mux)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/es/projections/aggregated/order-totals", nil)
	req.Header.Set("Serialized-Access-Key", "demo")
	req.Header.Set("Serialized-Secret-Access-Key", "demo-secret")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.StatusCode, len(body) > 0)
	// README end

	// Output:
	// {"revenue":"0.1","orders":"1"}
	// 200 true
}
