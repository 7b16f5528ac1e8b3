package httpapi_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/eventkit-go/eventstore/httpapi"
)

// openAPIChecked counts the responses checkOpenAPI validated.
var openAPIChecked atomic.Int64

var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

// spec loads and validates httpapi.OpenAPI once.
func spec(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromData(httpapi.OpenAPI)
		if specErr != nil {
			return
		}
		if specErr = specDoc.Validate(context.Background()); specErr != nil {
			return
		}
		specRouter, specErr = legacy.NewRouter(specDoc)
	})
	if specErr != nil {
		t.Fatalf("httpapi.OpenAPI: %v", specErr)
	}
	return specDoc, specRouter
}

// TestOpenAPIMatchesRouter: every route served is documented with its
// methods, and every documented operation is served.
func TestOpenAPIMatchesRouter(t *testing.T) {
	doc, _ := spec(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	e := newEnv(t, nil)
	served := httpapi.Routes(e.h)
	documented := map[string][]string{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[path] = append(documented[path], method)
		}
	}
	for _, m := range []map[string][]string{served, documented} {
		for k := range m {
			sort.Strings(m[k])
		}
	}
	for path, methods := range served {
		if !slices.Equal(methods, documented[path]) {
			t.Errorf("%s: served %v, documented %v", path, methods, documented[path])
		}
	}
	for path, methods := range documented {
		if _, ok := served[path]; !ok {
			t.Errorf("%s (%v) is documented but not served", path, methods)
		}
	}
	// Both spellings of the key headers are documented.
	var names []string
	for _, s := range doc.Components.SecuritySchemes {
		names = append(names, s.Value.Name)
	}
	sort.Strings(names)
	want := []string{httpapi.HeaderAccessKey, httpapi.HeaderSecretAccessKey, httpapi.HeaderSerializedAccessKey, httpapi.HeaderSerializedSecretAccessKey}
	sort.Strings(want)
	if !slices.Equal(names, want) {
		t.Errorf("security schemes name %v, want %v", names, want)
	}
	// The document is served.
	res := e.must(200, "GET", "/openapi.json", "")
	if b := readBody(t, res); !bytes.Equal([]byte(b), httpapi.OpenAPI) || res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /openapi.json: %s %.40q", res.Header.Get("Content-Type"), b)
	}
}

// checkOpenAPI validates a response of the test suite against the
// document: status, headers and body of the documented operation. Requests
// no route of the document matches (paths with bad segments, unknown
// paths) are checked for the error shape by the route walk instead.
func checkOpenAPI(t testing.TB, req *http.Request, res *http.Response, body []byte) {
	t.Helper()
	_, router := spec(t)
	route, params, err := router.FindRoute(req)
	if err != nil {
		return
	}
	openAPIChecked.Add(1)
	if res.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Errorf("%s %s: gzip: %v", req.Method, req.URL, err)
			return
		}
		body, _ = io.ReadAll(zr)
	}
	header := res.Header.Clone()
	header.Del("Content-Encoding")
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 res.StatusCode,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if req.Method == http.MethodHead || res.StatusCode == http.StatusNotModified || len(body) == 0 {
		in.Options.ExcludeResponseBody = true
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s: response %d does not follow httpapi/openapi.json: %v\nbody: %.300s",
			req.Method, req.URL, res.StatusCode, strings.ReplaceAll(err.Error(), "\n", " | "), body)
	}
}

// TestOpenAPIChecksResponses: the suite's responses are validated, and a
// response that breaks the document is caught.
func TestOpenAPIChecksResponses(t *testing.T) {
	e := newEnv(t, nil)
	before := openAPIChecked.Load()
	e.must(200, "GET", "/feeds", "")
	e.must(404, "GET", "/aggregates/order/o-1", "")
	e.must(200, "POST", "/projections/definitions", totalsDef)
	if n := openAPIChecked.Load() - before; n != 3 {
		t.Errorf("%d of 3 responses validated", n)
	}
	req, _ := http.NewRequest("GET", "http://example.com/feeds", nil)
	_, router := spec(t)
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatal(err)
	}
	bad := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 200,
		Header:                 http.Header{"Content-Type": {"application/json"}},
		Body:                   io.NopCloser(strings.NewReader(`{"feeds":[{"aggregateType":1}]}`)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), bad); err == nil {
		t.Error("a body breaking the document passes validation")
	}
}
