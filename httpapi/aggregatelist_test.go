package httpapi_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

type aggregateListResp struct {
	Aggregates []struct {
		AggregateID      string `json:"aggregateId"`
		AggregateVersion int64  `json:"aggregateVersion"`
		CreatedAt        int64  `json:"createdAt"`
		UpdatedAt        int64  `json:"updatedAt"`
	} `json:"aggregates"`
	HasMore    bool  `json:"hasMore"`
	TotalCount int64 `json:"totalCount"`
}

func (e *env) aggregateList(path string) aggregateListResp {
	e.t.Helper()
	var l aggregateListResp
	if err := json.Unmarshal([]byte(readBody(e.t, e.must(200, "GET", path, ""))), &l); err != nil {
		e.t.Fatal(err)
	}
	return l
}

func (l aggregateListResp) ids() []string {
	out := make([]string, len(l.Aggregates))
	for i, a := range l.Aggregates {
		out[i] = fmt.Sprintf("%s@%d", a.AggregateID, a.AggregateVersion)
	}
	return out
}

// TestListAggregates: GET /aggregates/{type} pages a type's aggregates by
// id with their versions and times; HEAD answers the same without a body.
func TestListAggregates(t *testing.T) {
	e := newEnv(t, nil)
	before := time.Now().UnixMilli()
	save := func(typ, id string) {
		e.must(200, "POST", "/aggregates/"+typ+"/"+id+"/events", events(ev(uuid.NewString(), "Touched", "")))
	}
	for _, id := range []string{"o-3", "o-1", "O-2", "o-2"} {
		save("order", id)
	}
	save("order", "o-1")
	save("invoice", "i-1")

	all := e.aggregateList("/aggregates/order")
	if want := []string{"O-2@1", "o-1@2", "o-2@1", "o-3@1"}; !slices.Equal(all.ids(), want) || all.TotalCount != 4 || all.HasMore {
		t.Errorf("GET /aggregates/order: %v, total %d, hasMore %v; want %v, 4, false", all.ids(), all.TotalCount, all.HasMore, want)
	}
	for _, a := range all.Aggregates {
		if a.CreatedAt < before-1000 || a.UpdatedAt < a.CreatedAt || a.UpdatedAt > time.Now().UnixMilli()+1000 {
			t.Errorf("%s: createdAt %d, updatedAt %d; want milliseconds since the epoch, in order", a.AggregateID, a.CreatedAt, a.UpdatedAt)
		}
	}
	page := e.aggregateList("/aggregates/order?skip=1&limit=2")
	if want := []string{"o-1@2", "o-2@1"}; !slices.Equal(page.ids(), want) || page.TotalCount != 4 || !page.HasMore {
		t.Errorf("skip=1&limit=2: %v, total %d, hasMore %v; want %v, 4, true", page.ids(), page.TotalCount, page.HasMore, want)
	}
	past := e.aggregateList("/aggregates/order?skip=10")
	if len(past.Aggregates) != 0 || past.TotalCount != 4 || past.HasMore {
		t.Errorf("skip past the end: %v, total %d, hasMore %v; want none, 4, false", past.ids(), past.TotalCount, past.HasMore)
	}
	if res := e.must(200, "HEAD", "/aggregates/order", ""); readBody(t, res) != "" {
		t.Error("HEAD /aggregates/order must answer without a body")
	}

	// Deleted aggregates are gone; a type without aggregates is 404.
	e.must(204, "DELETE", "/aggregates/order/o-1?deleteToken="+e.deleteToken("/aggregates/order/o-1"), "")
	if l := e.aggregateList("/aggregates/order"); l.TotalCount != 3 || slices.Contains(l.ids(), "o-1@2") {
		t.Errorf("after deleting o-1: %v, total %d", l.ids(), l.TotalCount)
	}
	mustErr(t, e.do("GET", "/aggregates/payment", ""), 404, "not_found")
	mustErr(t, e.do("HEAD", "/aggregates/payment", ""), 404, "not_found")
	e.must(204, "DELETE", "/aggregates/invoice?deleteToken="+e.deleteToken("/aggregates/invoice"), "")
	mustErr(t, e.do("GET", "/aggregates/invoice", ""), 404, "not_found")
}

// deleteToken asks for the token of a two-step delete of path.
func (e *env) deleteToken(path string) string {
	e.t.Helper()
	var tok struct {
		DeleteToken string `json:"deleteToken"`
	}
	if err := json.Unmarshal([]byte(readBody(e.t, e.must(200, "DELETE", path, ""))), &tok); err != nil {
		e.t.Fatal(err)
	}
	return tok.DeleteToken
}

// TestListAggregatesBadParams: a malformed or out-of-range parameter, or
// one the endpoint does not know, is 400 naming it.
func TestListAggregatesBadParams(t *testing.T) {
	e := newEnv(t, nil)
	e.must(200, "POST", "/aggregates/order/o-1/events", events(ev(id1, "Touched", "")))
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "skip=-1", "skip=1073741825", "skip=1&skip=2",
		"sort=aggregateId", "since=1", "limit=%zz"} {
		mustErr(t, e.do("GET", "/aggregates/order?"+q, ""), 400, "malformed")
	}
	mustErr(t, e.do("GET", "/aggregates/%2e%2e", ""), 400, "malformed")
	e.must(200, "GET", "/aggregates/order?limit=1000&skip=1073741824", "")
}
