package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore/internal/limits"
)

// describedDef is a definition body with the description desc, a JSON
// value.
func describedDef(name, desc string) string {
	return `{"projectionName":"` + name + `","description":` + desc + `,"feedName":"order","aggregated":true,
		"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.n"}]}]}`
}

// TestDefinitionDescription: POST and PUT accept a description, GET and
// the list return it, a PUT changing only the description updates the
// definition without a rebuild, and a description that is not a string or
// is too long is a 422 naming description.
func TestDefinitionDescription(t *testing.T) {
	e := newEnv(t, nil)
	desc := func(path string) (string, bool) {
		t.Helper()
		var d map[string]any
		if err := json.Unmarshal([]byte(readBody(t, e.must(200, "GET", path, ""))), &d); err != nil {
			t.Fatal(err)
		}
		s, ok := d["description"].(string)
		return s, ok
	}

	created := readBody(t, e.must(200, "POST", "/projections/definitions", describedDef("posted", `"Orders placed.\nAll of them."`)))
	if !strings.Contains(created, `"description":"Orders placed.\nAll of them."`) {
		t.Errorf("POST answers with the definition as stored, description included: %s", created)
	}
	if got, _ := desc("/projections/definitions/posted"); got != "Orders placed.\nAll of them." {
		t.Errorf("GET after POST: description %q", got)
	}
	e.must(200, "PUT", "/projections/definitions/plain", strings.Replace(describedDef("plain", `null`), `"description":null,`, "", 1))
	if _, ok := desc("/projections/definitions/plain"); ok {
		t.Errorf("a definition without a description has no description field")
	}

	// A PUT that changes only the description: no rebuild.
	e.must(200, "POST", "/aggregates/order/o1/events", events(ev(uuidN(1), "Placed", "")))
	e.must(200, "GET", "/projections/aggregated/posted?awaitCreation=1000", "")
	before, err := e.p.Status(t.Context(), "posted")
	if err != nil {
		t.Fatal(err)
	}
	e.must(200, "PUT", "/projections/definitions/posted", describedDef("posted", `"Changed."`))
	if got, _ := desc("/projections/definitions/posted"); got != "Changed." {
		t.Errorf("GET after a PUT of a new description: %q", got)
	}
	after, err := e.p.Status(t.Context(), "posted")
	if err != nil {
		t.Fatal(err)
	}
	if after.Rebuilding || after.Checkpoint != before.Checkpoint {
		t.Errorf("a PUT changing only the description must not rebuild: rebuilding %v, checkpoint %d (was %d)",
			after.Rebuilding, after.Checkpoint, before.Checkpoint)
	}
	list := readBody(t, e.must(200, "GET", "/projections/definitions", ""))
	if !strings.Contains(list, `"description":"Changed."`) {
		t.Errorf("the list of definitions returns the description: %s", list)
	}

	for _, c := range []struct{ name, body string }{
		{"a number", describedDef("bad", `12`)},
		{"an object", describedDef("bad", `{"en":"x"}`)},
		{"too long", describedDef("bad", `"`+strings.Repeat("x", limits.MaxDescriptionBytes+1)+`"`)},
		{"a control character", describedDef("bad", `"a\u0000b"`)},
	} {
		for _, method := range []string{"POST", "PUT"} {
			path := "/projections/definitions"
			if method == "PUT" {
				path += "/bad"
			}
			b := mustErr(t, e.do(method, path, c.body), 422, "invalid")
			if !hasField(b.Errors, "description") {
				t.Errorf("%s of a description that is %s: the 422 must name description: %+v", method, c.name, b.Errors)
			}
		}
	}
	e.must(404, "GET", "/projections/definitions/bad", "")
}
