package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
)

// outboundLoopback lets a test server's reactions call a receiver on
// this host.
var outboundLoopback = []string{"-outbound-allow", "127.0.0.1/32"}

// checkTenantReactions runs the reactions part of the tenants scenario
// against the server at base (started with outboundLoopback), whose
// tenants A and B exist: reaction definitions are shared and refuse the
// header; each tenant's events schedule reactions of that tenant only,
// delivered with its id in the metadata; listing, deleting and executing
// a reaction with a tenant's header reaches that tenant's reactions only.
func checkTenantReactions(t *testing.T, base string) {
	t.Helper()
	var mu sync.Mutex
	var got []string // tenantId/aggregateId of each delivery
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body struct {
			Metadata struct {
				TenantID    string `json:"tenantId"`
				AggregateID string `json:"aggregateId"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(b, &body)
		mu.Lock()
		got = append(got, body.Metadata.TenantID+"/"+body.Metadata.AggregateID)
		mu.Unlock()
	}))
	defer srv.Close()
	expect := func(method, path, tenant, body string, code int, has, hasNot string) string {
		t.Helper()
		c, resp := tcall(t, method, base+path, tenant, body, false)
		if c != code || (has != "" && !strings.Contains(resp, has)) || (hasNot != "" && strings.Contains(resp, hasNot)) {
			t.Errorf("%s %s as tenant %q: %d %s; want %d with %q without %q", method, path, tenant, c, resp, code, has, hasNot)
		}
		return resp
	}
	def := func(name, offset string) string {
		return `{"reactionName":"` + name + `","feedName":"parcel","reactOnEventType":"Shipped","offset":"` + offset + `",` +
			`"action":{"actionType":"HTTP_POST","targetUri":"` + srv.URL + `"}}`
	}
	ship := func(tenant, id string) {
		t.Helper()
		expect("POST", "/aggregates/parcel/"+id+"/events", tenant,
			`{"events":[{"eventId":"`+uuid.NewString()+`","eventType":"Shipped","data":{}}]}`, 200, "", "")
	}
	delivered := func(want ...string) {
		t.Helper()
		waitFor(t, "deliveries", func() string {
			mu.Lock()
			defer mu.Unlock()
			for _, w := range want {
				found := false
				for _, g := range got {
					found = found || g == w
				}
				if !found {
					return "no delivery " + w + " in " + strings.Join(got, ", ")
				}
			}
			return ""
		})
	}

	expect("POST", "/reactions/definitions", tenantA, def("now", "PT0S"), 400, "shared", "")
	expect("GET", "/reactions/definitions", tenantA, "", 400, "shared", "")
	expect("POST", "/reactions/definitions", "", def("now", "PT0S"), 200, "", "")
	ship(tenantA, "p-a")
	ship(tenantB, "p-b")
	delivered(tenantA+"/p-a", tenantB+"/p-b")
	mu.Lock()
	if len(got) != 2 {
		t.Errorf("deliveries %v, want one for each tenant", got)
	}
	mu.Unlock()
	expect("GET", "/reactions?status=ALL", tenantA, "", 200, `"aggregateId":"p-a"`, "p-b")
	expect("GET", "/reactions?status=ALL", tenantB, "", 200, `"aggregateId":"p-b"`, "p-a")
	expect("GET", "/reactions?status=ALL", "", "", 200, `"reactions":[]`, "")
	expect("GET", "/reactions", tenantX, "", 400, "unknown_tenant", "")

	// A reaction an hour away: B's header cannot reach A's; A's can.
	expect("POST", "/reactions/definitions", "", def("later", "PT1H"), 200, "", "")
	ship(tenantA, "p-a2")
	var id string
	waitFor(t, "A's scheduled reaction", func() string {
		_, resp := tcall(t, "GET", base+"/reactions?status=SCHEDULED", tenantA, "", false)
		var page struct {
			Reactions []struct{ ReactionID, AggregateID string } `json:"reactions"`
		}
		_ = json.Unmarshal([]byte(resp), &page)
		for _, r := range page.Reactions {
			if r.AggregateID == "p-a2" {
				id = r.ReactionID
				return ""
			}
		}
		return resp
	})
	expect("POST", "/reactions/"+id+"/execute", tenantB, "", 404, "", "")
	expect("DELETE", "/reactions/"+id, tenantB, "", 404, "", "")
	expect("DELETE", "/reactions/"+id, "", "", 404, "", "")
	expect("POST", "/reactions/"+id+"/execute", tenantA, "", 200, "", "")
	delivered(tenantA + "/p-a2")

	// Deleting a tenant's aggregate removes its reactions, not the other
	// tenant's of the same id.
	ship(tenantB, "p-a2")
	waitFor(t, "B's reaction of p-a2", func() string {
		if _, resp := tcall(t, "GET", base+"/reactions?status=ALL&aggregateId=p-a2", tenantB, "", false); !strings.Contains(resp, `"aggregateId":"p-a2"`) {
			return resp
		}
		return ""
	})
	var tok struct {
		DeleteToken string `json:"deleteToken"`
	}
	_ = json.Unmarshal([]byte(expect("DELETE", "/aggregates/parcel/p-a2", tenantA, "", 200, "deleteToken", "")), &tok)
	expect("DELETE", "/aggregates/parcel/p-a2?deleteToken="+tok.DeleteToken, tenantA, "", 204, "", "")
	expect("GET", "/reactions?status=ALL", tenantA, "", 200, `"aggregateId":"p-a"`, "p-a2")
	expect("GET", "/reactions?status=ALL&aggregateId=p-a2", tenantB, "", 200, `"aggregateId":"p-a2"`, "")

	// Deleting the definitions in the project stops them in every tenant.
	expect("DELETE", "/reactions/definitions/now", "", "", 200, "", "")
	expect("DELETE", "/reactions/definitions/later", "", "", 200, "", "")
	ship(tenantB, "p-b2")
	expect("GET", "/reactions?status=ALL", tenantB, "", 200, "p-b", "p-b2")
}
