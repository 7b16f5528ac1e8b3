package httpapi_test

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// searchDefBody is a single projection of customers whose name and city
// are indexed.
const searchDefBody = `{"projectionName":"customers","feedName":"customer","indexedFields":["$.projection.name","city"],
	"handlers":[{"eventType":"Registered","functions":[{"function":"merge"},{"function":"setref","targetSelector":"$.projection.born"}]}]}`

// TestProjectionSearch: a definition's indexedFields are stored and
// returned; search on the list and its _count keeps the instances whose
// indexed fields match, with the other parameters; a bad search is a 400
// naming search.
func TestProjectionSearch(t *testing.T) {
	e := newEnv(t, nil)
	created := readBody(t, e.must(200, "POST", "/projections/definitions", searchDefBody))
	if !strings.Contains(created, `"indexedFields":["$.projection.name","city"]`) {
		t.Errorf("POST answers with indexedFields: %s", created)
	}
	got := readBody(t, e.must(200, "GET", "/projections/definitions/customers", ""))
	if !strings.Contains(got, `"indexedFields":["$.projection.name","city"]`) {
		t.Errorf("GET returns indexedFields: %s", got)
	}
	for i, c := range [][3]string{{"Ada Lovelace", "London", "1815"}, {"Alan Turing", "London", "1912"}, {"Grace Hopper", "New York", "1906"}} {
		e.must(200, "POST", "/aggregates/customer/c"+string(rune('1'+i))+"/events",
			events(ev(uuidN(i+1), "Registered", `{"name":"`+c[0]+`","city":"`+c[1]+`","born":`+c[2]+`}`)))
	}
	list := func(query string) ([]string, int64) {
		t.Helper()
		var out struct {
			Projections []struct {
				ProjectionID string `json:"projectionId"`
			} `json:"projections"`
			TotalCount int64 `json:"totalCount"`
		}
		if err := json.Unmarshal([]byte(readBody(t, e.must(200, "GET", "/projections/single/customers?"+query, ""))), &out); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range out.Projections {
			ids = append(ids, p.ProjectionID)
		}
		return ids, out.TotalCount
	}
	count := func(query string) int64 {
		t.Helper()
		var out struct{ Count int64 }
		if err := json.Unmarshal([]byte(readBody(t, e.must(200, "GET", "/projections/single/customers/_count?"+query, ""))), &out); err != nil {
			t.Fatal(err)
		}
		return out.Count
	}
	for _, c := range []struct {
		query string
		want  []string
		total int64
	}{
		{"search=LOND", []string{"c1", "c2"}, 2},
		{"search=" + url.QueryEscape("lond al"), []string{"c2"}, 1},
		{"search=" + url.QueryEscape("New-York"), []string{"c3"}, 1},
		{"search=ondon", nil, 0},
		{"search=lond&sort=-projectionId", []string{"c2", "c1"}, 2},
		{"search=lond&limit=1&skip=1", []string{"c2"}, 2},
		{"search=lond&from=1900", []string{"c2"}, 1},
		{"search=lond&reference=1815", []string{"c1"}, 1},
		{"search=a&id=c2&id=c3", []string{"c2"}, 1},
		{"search=a&sort=reference", []string{"c1", "c2"}, 2},
	} {
		ids, total := list(c.query)
		if !slices.Equal(ids, c.want) || total != c.total {
			t.Errorf("GET ?%s: %q (totalCount %d), want %q (%d)", c.query, ids, total, c.want, c.total)
		}
	}
	if n := count("search=lond"); n != 2 {
		t.Errorf("_count?search=lond: %d, want 2", n)
	}
	if n := count("search=lond&reference=1912"); n != 1 {
		t.Errorf("_count?search=lond&reference=1912: %d, want 1", n)
	}
	if n := count("search=zzz"); n != 0 {
		t.Errorf("_count?search=zzz: %d, want 0", n)
	}

	for _, q := range []string{
		"search=" + strings.Repeat("a", 201),
		"search=" + url.QueryEscape("a b c d e f g h i j k"),
		"search=" + url.QueryEscape(" -- "),
		"search=",
		"search=a&search=b",
	} {
		for _, path := range []string{"/projections/single/customers?", "/projections/single/customers/_count?"} {
			b := mustErr(t, e.do("GET", path+q, ""), 400, "malformed")
			if !hasField(b.Errors, "search") {
				t.Errorf("GET %s%s: the 400 must name search: %+v", path, q, b.Errors)
			}
		}
	}
	// A projection without indexedFields refuses a search.
	e.must(200, "POST", "/projections/definitions", strings.Replace(strings.Replace(searchDefBody, `"indexedFields":["$.projection.name","city"],`, "", 1), "customers", "plain", 1))
	b := mustErr(t, e.do("GET", "/projections/single/plain?search=a", ""), 400, "malformed")
	if !hasField(b.Errors, "search") || !strings.Contains(b.Message, "no indexedFields") {
		t.Errorf("a search of a projection without indexedFields: %+v", b)
	}
	// Bad indexedFields are a 422 naming them.
	b = mustErr(t, e.do("PUT", "/projections/definitions/customers", strings.Replace(searchDefBody, `"city"]`, `"$.event.x"]`, 1)), 422, "invalid")
	if !hasField(b.Errors, "indexedFields[1]") {
		t.Errorf("a bad indexedField: the 422 must name it: %+v", b.Errors)
	}
}
