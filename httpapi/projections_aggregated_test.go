package httpapi_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestListAggregated: GET /projections/aggregated lists the aggregated
// projections' results with skip, limit and sort, in the shape the
// official Go client's ListAggregatedProjections decodes (before, it was
// 404).
func TestListAggregated(t *testing.T) {
	e := newEnv(t, nil)
	def := func(name, eventType string, aggregated bool) string {
		return fmt.Sprintf(`{"projectionName":%q,"feedName":"order","aggregated":%v,"handlers":[{"eventType":%q,"functions":[
			{"function":"inc","targetSelector":"$.projection.count"}]}]}`, name, aggregated, eventType)
	}
	e.must(200, "PUT", "/projections/definitions/totals-b", def("totals-b", "Placed", true))
	e.must(200, "PUT", "/projections/definitions/totals-a", def("totals-a", "Paid", true))
	e.must(200, "PUT", "/projections/definitions/never", def("never", "Lost", true))
	e.must(200, "PUT", "/projections/definitions/per-order", def("per-order", "Placed", false))
	e.must(200, "POST", "/aggregates/order/o-1/events", events(ev(uuidN(1), "Placed", `{}`), ev(uuidN(2), "Placed", `{}`)))
	time.Sleep(5 * time.Millisecond) // totals-a is created and updated after totals-b
	e.must(200, "POST", "/aggregates/order/o-1/events", events(ev(uuidN(3), "Paid", `{}`)))
	// Both results are there once the single projection's is.
	e.must(200, "GET", "/projections/aggregated/totals-b", "")
	e.must(200, "GET", "/projections/aggregated/totals-a", "")

	// What the Go client reads.
	var asClient struct {
		Projections []struct {
			ID   string          `json:"projectionId"`
			Data json.RawMessage `json:"data"`
		} `json:"projections"`
	}
	body := readBody(t, e.must(200, "GET", "/projections/aggregated", ""))
	if err := json.Unmarshal([]byte(body), &asClient); err != nil {
		t.Fatal(err)
	}
	if len(asClient.Projections) != 2 || asClient.Projections[0].ID != "totals-a" || string(asClient.Projections[0].Data) != `{"count":"1"}` ||
		asClient.Projections[1].ID != "totals-b" || string(asClient.Projections[1].Data) != `{"count":"2"}` {
		t.Errorf("GET /projections/aggregated: %s", body)
	}
	if gjson.Get(body, "totalCount").Int() != 2 || gjson.Get(body, "hasMore").Bool() || !gjson.Get(body, "projections.0.createdAt").Exists() {
		t.Errorf("GET /projections/aggregated: %s", body)
	}
	for q, want := range map[string]string{
		"?sort=-projectionId":        `["totals-b","totals-a"] more=false`,
		"?sort=createdAt":            `["totals-b","totals-a"] more=false`,
		"?sort=-updatedAt":           `["totals-a","totals-b"] more=false`,
		"?limit=1":                   `["totals-a"] more=true`,
		"?skip=1&limit=1":            `["totals-b"] more=false`,
		"?skip=5":                    `[] more=false`,
		"?sort=%2BupdatedAt&limit=1": `["totals-b"] more=true`,
	} {
		b := readBody(t, e.must(200, "GET", "/projections/aggregated"+q, ""))
		if got := fmt.Sprintf("%s more=%v", gjson.Get(b, "projections.#.projectionId").Raw, gjson.Get(b, "hasMore").Bool()); got != want || gjson.Get(b, "totalCount").Int() != 2 {
			t.Errorf("%s: %s, want %s (%s)", q, got, want, b)
		}
	}
	for _, q := range []string{"?sort=reference", "?sort=size", "?limit=0", "?skip=-1", "?id=x", "?limit=1&limit=2"} {
		b := mustErr(t, e.do("GET", "/projections/aggregated"+q, ""), 400, "malformed")
		if len(b.Errors) != 1 {
			t.Errorf("%s: %+v, want the parameter named", q, b)
		}
	}
	e.must(200, "HEAD", "/projections/aggregated", "")
}
