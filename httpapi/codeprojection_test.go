package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/tidwall/gjson"
)

// counter is the state of a projection in Go: how many events and their
// "n" summed.
type counter struct {
	Count int `json:"count"`
	Sum   int `json:"sum"`
}

func (c *counter) Apply(e *eventstore.Event) error {
	var d struct{ N int }
	if err := json.Unmarshal(e.Data, &d); err != nil {
		return err
	}
	c.Count++
	c.Sum += d.N
	return nil
}

func (c *counter) MarshalJSON() ([]byte, error) {
	type plain counter
	return json.Marshal((*plain)(c))
}

func counterProjection(name string, aggregated bool) eventstore.CodeProjection {
	return eventstore.CodeProjection{Name: name, Feed: "acct", Version: 2, Aggregated: aggregated, EventTypes: []string{"Deposited"},
		Decode: func(data []byte) (eventstore.CodeState, error) {
			var c counter
			if data != nil {
				if err := json.Unmarshal(data, &c); err != nil {
					return nil, err
				}
			}
			return &c, nil
		}}
}

// TestCodeProjectionOverHTTP: a projection in Go is served on the same
// endpoints as a definition's (instances, lists, counts, the overview, the
// definitions with their code version), and the API cannot replace or
// delete it (409, saying why).
func TestCodeProjectionOverHTTP(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	if err := e.p.Register(ctx, counterProjection("perAcct", false)); err != nil {
		t.Fatal(err)
	}
	if err := e.p.Register(ctx, counterProjection("total", true)); err != nil {
		t.Fatal(err)
	}
	e.must(200, "POST", "/aggregates/acct/a1/events", events(ev(uuidN(1), "Deposited", `{"n":2}`), ev(uuidN(2), "Deposited", `{"n":3}`)))
	e.must(200, "POST", "/aggregates/acct/a2/events", events(ev(uuidN(3), "Deposited", `{"n":10}`)))

	one := readBody(t, e.must(200, "GET", "/projections/single/perAcct/a1", ""))
	if gjson.Get(one, "data.count").Int() != 2 || gjson.Get(one, "data.sum").Int() != 5 || gjson.Get(one, "projectionId").Str != "a1" {
		t.Errorf("single: %s", one)
	}
	agg := readBody(t, e.must(200, "GET", "/projections/aggregated/total", ""))
	if gjson.Get(agg, "data.sum").Int() != 15 {
		t.Errorf("aggregated: %s", agg)
	}
	list := readBody(t, e.must(200, "GET", "/projections/single/perAcct", ""))
	if gjson.Get(list, "totalCount").Int() != 2 || gjson.Get(list, "projections.#.projectionId").String() != `["a1","a2"]` {
		t.Errorf("list: %s", list)
	}
	count := readBody(t, e.must(200, "GET", "/projections/single/perAcct/_count", ""))
	if gjson.Get(count, "count").Int() != 2 {
		t.Errorf("count: %s", count)
	}
	over := readBody(t, e.must(200, "GET", "/projections", ""))
	if gjson.Get(over, `projections.#(projectionName=="perAcct").projectionsCount`).Int() != 2 {
		t.Errorf("overview: %s", over)
	}
	def := readBody(t, e.must(200, "GET", "/projections/definitions/perAcct", ""))
	if gjson.Get(def, "code.version").Int() != 2 || gjson.Get(def, "handlers.0.eventType").Str != "Deposited" || gjson.Get(def, "feedName").Str != "acct" {
		t.Errorf("definition: %s", def)
	}
	defs := readBody(t, e.must(200, "GET", "/projections/definitions", ""))
	if gjson.Get(defs, "totalCount").Int() != 2 {
		t.Errorf("definitions: %s", defs)
	}

	jsonDef := `{"projectionName":"perAcct","feedName":"acct","handlers":[{"eventType":"Deposited","functions":[{"function":"inc","targetSelector":"$.projection.n"}]}]}`
	for _, req := range []struct{ method, path, body string }{
		{"PUT", "/projections/definitions/perAcct", jsonDef},
		{"POST", "/projections/definitions", jsonDef},
		{"DELETE", "/projections/definitions/perAcct", ""},
	} {
		body := readBody(t, e.must(409, req.method, req.path, req.body))
		if msg := gjson.Get(body, "message").Str; !containsAll(msg, "perAcct", "written in Go") {
			t.Errorf("%s %s: %s, want a message saying the projection is written in Go", req.method, req.path, body)
		}
	}
	withCode := `{"projectionName":"x","feedName":"acct","code":{"version":1},"handlers":[{"eventType":"Deposited","functions":[{"function":"inc","targetSelector":"$.projection.n"}]}]}`
	e.must(422, "PUT", "/projections/definitions/x", withCode)
	// Still there and applied: a reset over the API rebuilds it.
	e.must(200, "DELETE", "/projections/single/perAcct", "")
	one = readBody(t, e.must(200, "GET", "/projections/single/perAcct/a1", ""))
	if gjson.Get(one, "data.sum").Int() != 5 {
		t.Errorf("after a reset: %s", one)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
