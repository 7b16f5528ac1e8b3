package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/tenancy"
)

var _ httpapi.Tenants = (*tenancy.Set)(nil)

// newTenantEnv is newEnv with the tenants of a tenancy.Set on memory.
func newTenantEnv(t *testing.T, observed chan<- httpapi.RequestInfo) *env {
	t.Helper()
	st, err := eventstore.New(memory.New(), nil)
	if err != nil {
		t.Fatal(err)
	}
	p := eventstore.NewProjector(st, nil)
	set, err := tenancy.New(context.Background(), tenancy.Options{
		Registry:    memory.New(),
		Open:        func(context.Context, string) (storage.Storage, error) { return memory.New(), nil },
		Definitions: p,
		MaxTenants:  2,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = set.Close()
		_ = st.Close()
	})
	h := httpapi.New(st, p, &httpapi.Options{Keys: []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}, Tenants: set,
		Observer: func(ri httpapi.RequestInfo) {
			if observed != nil {
				observed <- ri
			}
		}})
	return &env{t: t, st: st, p: p, h: h}
}

func TestTenantsAPI(t *testing.T) {
	observed := make(chan httpapi.RequestInfo, 1000)
	e := newTenantEnv(t, observed)
	const a, b, c = "1b4e28ba-2fa1-41d2-883f-0016d3cca427", "2c5f39cb-3ab2-42e3-994a-1127e4ddb538", "3d6a4adc-4bc3-43f4-a05b-2238f5eec649"
	body := func(res *http.Response) string {
		b, _ := io.ReadAll(res.Body)
		return string(b)
	}
	e.must(200, "GET", "/tenants", "")
	e.must(200, "POST", "/tenants", `{"tenantId":"`+a+`","reference":"Acme"}`)
	e.must(204, "POST", "/tenants", `{"tenantId":"`+a+`"}`)
	e.must(200, "POST", "/tenants", `{"tenantId":"`+b+`"}`)
	if s := body(e.must(403, "POST", "/tenants", `{"tenantId":"`+c+`"}`)); !strings.Contains(s, "maximum of 2 tenants") {
		t.Errorf("third tenant: %s", s)
	}
	e.must(400, "POST", "/tenants", `{"tenantId":"x"}`)
	e.must(422, "POST", "/tenants", `{"tenantId":1}`)
	e.must(200, "PUT", "/tenants/"+a, `{"reference":"Acme Inc"}`)
	e.must(404, "PUT", "/tenants/"+c, `{"reference":"x"}`)
	e.must(200, "PUT", "/tenants/"+a, `{"tenantId":"`+a+`","reference":"Acme Inc"}`) // as the official client sends it
	e.must(400, "PUT", "/tenants/"+a, `{"tenantId":"`+b+`","reference":"Acme Inc"}`)
	if s := body(e.must(200, "GET", "/tenants", "")); !strings.Contains(s, `"tenantId":"`+a+`","tenantNumber":"1"`) || !strings.Contains(s, `"reference":"Acme Inc"`) {
		t.Errorf("list: %s", s)
	}
	e.must(200, "POST", "/projections/definitions", `{"projectionName":"n","feedName":"order","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`)
	save := `{"events":[{"eventId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","eventType":"Placed"}]}`
	e.must(200, "POST", "/aggregates/order/o-1/events", save, httpapi.HeaderTenantID, a)
	e.must(404, "GET", "/aggregates/order/o-1", "", httpapi.HeaderTenantID, b)
	e.must(404, "GET", "/aggregates/order/o-1", "")
	for len(observed) > 0 {
		<-observed
	}
	e.must(200, "GET", "/aggregates/order/o-1", "", httpapi.HeaderServiceTenantID, a)
	if ri := <-observed; ri.Tenant != a || ri.Route != "/aggregates/{type}/{id}" {
		t.Errorf("observed %+v", ri)
	}
	e.must(400, "GET", "/aggregates/order/o-1", "", httpapi.HeaderTenantID, c)
	e.must(400, "GET", "/projections/definitions", "", httpapi.HeaderTenantID, a)
	e.must(400, "GET", "/tenants", "", httpapi.HeaderTenantID, a)
	// A delete token of one tenant deletes nothing of another.
	var tok struct{ DeleteToken string }
	res := e.must(200, "DELETE", "/aggregates/order/o-1", "", httpapi.HeaderTenantID, a)
	if err := json.NewDecoder(res.Body).Decode(&tok); err != nil || tok.DeleteToken == "" {
		t.Fatalf("delete token: %v", err)
	}
	e.must(200, "POST", "/aggregates/order/o-1/events", save, httpapi.HeaderTenantID, b)
	e.must(403, "DELETE", "/aggregates/order/o-1?deleteToken="+tok.DeleteToken, "", httpapi.HeaderTenantID, b)
	e.must(204, "DELETE", "/aggregates/order/o-1?deleteToken="+tok.DeleteToken, "", httpapi.HeaderTenantID, a)
	e.must(200, "GET", "/aggregates/order/o-1", "", httpapi.HeaderTenantID, b)

	e.must(200, "DELETE", "/tenants/"+a, "")
	e.must(404, "DELETE", "/tenants/"+a, "")
	e.must(400, "GET", "/feeds/_all", "", httpapi.HeaderTenantID, a)
	e.must(409, "POST", "/tenants", `{"tenantId":"`+a+`"}`)
	// The deleted tenant no longer counts against the maximum.
	e.must(200, "POST", "/tenants", `{"tenantId":"`+c+`"}`)
}

func TestTenantHeaderWithoutTenants(t *testing.T) {
	e := newEnv(t, nil)
	e.must(400, "GET", "/aggregates/order/o-1", "", httpapi.HeaderTenantID, "1b4e28ba-2fa1-41d2-883f-0016d3cca427")
	e.must(400, "GET", "/tenants", "")
	e.must(400, "POST", "/tenants", `{"tenantId":"1b4e28ba-2fa1-41d2-883f-0016d3cca427"}`)
}
