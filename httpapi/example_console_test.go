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

// The console is served at ConsolePath under the handler's mount point,
// without credentials; Options.DisableConsole turns it off. GET /status,
// with credentials, is the server's version, storage and save rate.
func ExampleConsolePath() {
	st, _ := eventstore.New(memory.New(), nil)
	defer st.Close()
	p := eventstore.NewProjector(st, nil)
	keys := []httpapi.KeyPair{{AccessKey: "demo", SecretAccessKey: "demo-secret"}}
	mux := http.NewServeMux()
	mux.Handle("/es/", http.StripPrefix("/es", httpapi.New(st, p, &httpapi.Options{Keys: keys, Version: "v1.0.0", StorageName: "memory"})))
	mux.Handle("/quiet/", http.StripPrefix("/quiet", httpapi.New(st, p, &httpapi.Options{Keys: keys, DisableConsole: true})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	get := func(path string, withKeys bool) *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if withKeys {
			req.Header.Set(httpapi.HeaderAccessKey, "demo")
			req.Header.Set(httpapi.HeaderSecretAccessKey, "demo-secret")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		return res
	}
	res := get("/es"+httpapi.ConsolePath, false)
	res.Body.Close()
	fmt.Println(res.StatusCode, res.Header.Get("Content-Type"), strings.HasPrefix(res.Header.Get("Content-Security-Policy"), "default-src 'none'"))
	res = get("/quiet"+httpapi.ConsolePath+"app.js", false)
	res.Body.Close()
	fmt.Println(res.StatusCode)
	res = get("/es/status", true)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	fmt.Println(res.StatusCode, string(b[:strings.Index(string(b), `,"saves"`)]))
	// Output:
	// 200 text/html; charset=utf-8 true
	// 401
	// 200 {"version":"v1.0.0","storage":"memory","ready":false,"tenants":false,"reactions":false,"console":true
}
