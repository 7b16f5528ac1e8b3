package httpapi_test

import (
	"net/http/httptest"
	"testing"

	"github.com/eventkit-go/eventstore/httpapi"
)

// TestAuthHeaderSpellings: both spellings of the key headers are
// accepted; mixing them, an empty value or a repeated header is 401.
func TestAuthHeaderSpellings(t *testing.T) {
	e := newEnv(t, nil)
	save := `{"events":[{"eventId":"8b0c3b68-3c8f-4d0e-9a43-6f7f5d0c1a01","eventType":"A"}]}`
	const (
		sa = httpapi.HeaderAccessKey
		ss = httpapi.HeaderSecretAccessKey
		ca = httpapi.HeaderSerializedAccessKey
		cs = httpapi.HeaderSerializedSecretAccessKey
	)
	// The official clients' spelling alone.
	e.must(200, "POST", "/aggregates/order/o-1/events", save, sa, "", ss, "", ca, testAccess, cs, testSecret)
	e.must(200, "GET", "/aggregates/order/o-1", "", sa, "", ss, "", ca, testAccess, cs, testSecret)
	// The interface's spelling alone.
	e.must(200, "GET", "/aggregates/order/o-1", "")

	for _, c := range []struct {
		name string
		hdr  []string
	}{
		{"one of each spelling", []string{ss, "", ca, "", cs, testSecret}},
		{"one of each spelling, other way", []string{sa, "", cs, ""}},
		{"all four headers", []string{ca, testAccess, cs, testSecret}},
		{"serialized spelling, secret missing", []string{sa, "", ss, "", ca, testAccess}},
		{"wrong serialized secret", []string{sa, "", ss, "", ca, testAccess, cs, "nope"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mustErr(t, e.do("GET", "/aggregates/order/o-1", "", c.hdr...), 401, "unauthorized")
		})
	}

	// Empty and repeated values, which e.do cannot express.
	for _, c := range []struct {
		name string
		set  func(h map[string][]string)
	}{
		{"empty access key", func(h map[string][]string) { h[ca] = []string{""}; h[cs] = []string{testSecret} }},
		{"empty secret", func(h map[string][]string) { h[sa] = []string{testAccess}; h[ss] = []string{""} }},
		{"repeated access key", func(h map[string][]string) {
			h[sa] = []string{testAccess, testAccess}
			h[ss] = []string{testSecret}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/aggregates/order/o-1", nil)
			c.set(r.Header)
			w := httptest.NewRecorder()
			e.h.ServeHTTP(w, r)
			mustErr(t, w.Result(), 401, "unauthorized")
		})
	}
}
