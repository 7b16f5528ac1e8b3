package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eventkit-go/eventstore/reactions"
	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/postgres"
)

const (
	tenantA = "1b4e28ba-2fa1-41d2-883f-0016d3cca427"
	tenantB = "2c5f39cb-3ab2-42e3-994a-1127e4ddb538"
	tenantX = "3d6a4adc-4bc3-43f4-a05b-2238f5eec649" // never added
	saveO2  = `{"events":[{"eventId":"9d0f7780-8536-41ef-955c-f18a02a01bf8","eventType":"Placed"}]}`
	saveI1  = `{"events":[{"eventId":"ad1a8891-9647-42f0-a66d-a29b13b12c09","eventType":"Sent"}]}`
)

// tcall is call with the tenant header: Serialized-Tenant-Id, or with
// service set its other spelling; none when tenant is "".
func tcall(t *testing.T, method, url, tenant, body string, service bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Serialized-Access-Key", "ak_t")
	req.Header.Set("Serialized-Secret-Access-Key", "sk_t")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tenant != "" {
		if service {
			req.Header.Set("Service-Tenant-Id", tenant)
		} else {
			req.Header.Set("Serialized-Tenant-Id", tenant)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// tenantEnv is the environment of the one project these tests serve.
var tenantEnv = map[string]string{"EVENTSTORE_ACCESS_KEY": "ak_t", "EVENTSTORE_SECRET_ACCESS_KEY": "sk_t"}

// checkTenants runs the tenants scenario against the server at base;
// exists reports whether the storage of a tenant exists (nil: not
// checked).
func checkTenants(t *testing.T, base string, exists func(id string) bool) {
	t.Helper()
	expect := func(method, path, tenant, body string, code int, has, hasNot string) {
		t.Helper()
		got, resp := tcall(t, method, base+path, tenant, body, false)
		if got != code || (has != "" && !strings.Contains(resp, has)) || (hasNot != "" && strings.Contains(resp, hasNot)) {
			t.Errorf("%s %s as tenant %q: %d %s; want %d with %q without %q", method, path, tenant, got, resp, code, has, hasNot)
		}
	}
	count := func(tenant, want string) {
		t.Helper()
		waitFor(t, "count of tenant "+tenant, func() string {
			if code, body := tcall(t, "GET", base+"/projections/aggregated/n", tenant, "", false); code != 200 || !strings.Contains(body, `"count":"`+want+`"`) {
				return body
			}
			return ""
		})
	}

	// A definition made before the tenants exist.
	expect("POST", "/projections/definitions", "", defCount, 200, "", "")

	// The tenants API.
	expect("GET", "/tenants", "", "", 200, `{"tenants":[]}`, "")
	expect("POST", "/tenants", "", `{"tenantId":"`+strings.ToUpper(tenantA)+`","reference":"Acme"}`, 200, "", "")
	expect("POST", "/tenants", "", `{"tenantId":"`+tenantA+`","reference":"Other"}`, 204, "", "")
	expect("POST", "/tenants", "", `{"tenantId":"`+tenantB+`"}`, 200, "", "")
	expect("POST", "/tenants", "", `{"tenantId":"nope"}`, 400, "tenantId", "")
	expect("POST", "/tenants", "", `{"reference":"x"}`, 400, "tenantId", "")
	expect("POST", "/tenants", "", `{"tenantId":"`+tenantX+`","reference":"`+strings.Repeat("r", 257)+`"}`, 400, "reference", "")
	expect("POST", "/tenants", "", `{"tenantId":"`+tenantX+`","reference":"a\u0007b"}`, 400, "reference", "")
	expect("POST", "/tenants", "", `{"tenantId":"`+tenantX+`","ref":"x"}`, 422, "not a field", "")
	expect("POST", "/tenants", tenantA, `{"tenantId":"`+tenantX+`"}`, 400, "shared", "")
	expect("GET", "/tenants", tenantA, "", 400, "shared", "")
	expect("GET", "/tenants", "", "", 200, `"tenantId":"`+tenantA+`","tenantNumber":"1"`, tenantX)
	expect("GET", "/tenants", "", "", 200, `"tenantId":"`+tenantB+`","tenantNumber":"2"`, `"Other"`)
	expect("PUT", "/tenants/"+tenantA, "", `{"reference":"Acme Inc"}`, 200, "", "")
	expect("PUT", "/tenants/"+tenantX, "", `{"reference":"Acme Inc"}`, 404, "", "")
	expect("PUT", "/tenants/nope", "", `{"reference":"Acme Inc"}`, 400, "", "")
	expect("GET", "/tenants", "", "", 200, `"reference":"Acme Inc","deleted":false`, "")

	// Definitions are shared and refuse the header.
	expect("GET", "/projections/definitions", tenantA, "", 400, "shared", "")
	expect("POST", "/projections/definitions", tenantA, defOther, 400, "shared", "")

	// Each tenant's data is its own.
	expect("POST", "/aggregates/order/o-1/events", tenantA, saveO1, 200, "", "")
	expect("GET", "/aggregates/order/o-1", tenantA, "", 200, "7c9e6679", "")
	expect("GET", "/aggregates/order/o-1", tenantB, "", 404, "", "")
	expect("HEAD", "/aggregates/order/o-1", tenantB, "", 404, "", "")
	expect("GET", "/aggregates/order/o-1", "", "", 404, "", "")
	expect("GET", "/aggregates/order", tenantB, "", 404, "", "")
	expect("GET", "/feeds/order", tenantB, "", 404, "", "")
	expect("GET", "/feeds/_all", tenantB, "", 200, `"entries":[]`, "o-1")
	expect("GET", "/feeds/_all", "", "", 200, `"entries":[]`, "o-1")
	expect("GET", "/feeds", tenantB, "", 200, "", "order")
	expect("GET", "/feeds/_all", tenantA, "", 200, "o-1", "")
	// The same ids in B are B's own first events.
	expect("POST", "/aggregates/order/o-1/events", tenantB, `{"expectedVersion":0,`+saveO1[1:], 200, "", "")
	expect("POST", "/aggregates/order/o-1/events", tenantB, saveO2, 200, "", "")
	expect("GET", "/aggregates/order/o-1", tenantA, "", 200, `"aggregateVersion":1`, "9d0f7780")
	if code, body := tcall(t, "GET", base+"/aggregates/order/o-1", tenantB, "", true); code != 200 || !strings.Contains(body, `"aggregateVersion":2`) {
		t.Errorf("B with Service-Tenant-Id: %d %s", code, body)
	}
	count(tenantA, "1")
	count(tenantB, "2")
	expect("GET", "/projections/aggregated/n", "", "", 404, "", "")
	expect("GET", "/projections", tenantA, "", 200, `"n"`, "")

	// A definition made after the tenants exist applies to each.
	expect("POST", "/projections/definitions", "", defOther, 200, "", "")
	expect("POST", "/aggregates/invoice/i-1/events", tenantA, saveI1, 200, "", "")
	waitFor(t, "A's single projection", func() string {
		if code, body := tcall(t, "GET", base+"/projections/single/m/i-1", tenantA, "", false); code != 200 || !strings.Contains(body, `"count":"1"`) {
			return body
		}
		return ""
	})
	expect("GET", "/projections/single/m/i-1", tenantB, "", 404, "", "")
	expect("GET", "/projections/single/m/i-1", "", "", 404, "", "")
	// A definition deleted in the project is deleted in the tenants.
	expect("DELETE", "/projections/definitions/m", "", "", 200, "", "")
	expect("GET", "/projections/single/m/i-1", tenantA, "", 404, "no definition", "")

	// Unknown, malformed or doubled tenant ids store nothing.
	expect("POST", "/aggregates/order/o-9/events", tenantX, saveO1, 400, "unknown_tenant", "")
	expect("GET", "/feeds/_all", tenantX, "", 400, "unknown_tenant", "")
	expect("GET", "/projections/aggregated/n", tenantX, "", 400, "unknown_tenant", "")
	expect("POST", "/aggregates/order/o-9/events", "not-a-uuid", saveO1, 400, "malformed", "")
	req, _ := http.NewRequest("GET", base+"/aggregates/order/o-1", nil)
	req.Header.Set("Serialized-Access-Key", "ak_t")
	req.Header.Set("Serialized-Secret-Access-Key", "sk_t")
	req.Header.Set("Serialized-Tenant-Id", tenantA)
	req.Header.Set("Service-Tenant-Id", tenantB)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 400 {
		t.Errorf("both tenant headers: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	expect("GET", "/aggregates/order/o-9", "", "", 404, "", "")
	expect("GET", "/feeds/_all", "", "", 200, `"entries":[]`, "")
	if exists != nil && exists(tenantX) {
		t.Error("an unknown tenant's storage was created")
	}

	checkTenantReactions(t, base)

	// Deleting a tenant deletes its data and leaves the other's.
	if exists != nil && !exists(tenantA) {
		t.Error("tenant A's storage does not exist")
	}
	expect("DELETE", "/tenants/"+tenantA, tenantA, "", 400, "shared", "")
	expect("DELETE", "/tenants/"+tenantA, "", "", 200, "", "")
	expect("DELETE", "/tenants/"+tenantA, "", "", 404, "", "")
	expect("DELETE", "/tenants/"+tenantX, "", "", 404, "", "")
	expect("GET", "/aggregates/order/o-1", tenantA, "", 400, "unknown_tenant", "")
	expect("GET", "/feeds/_all", tenantA, "", 400, "unknown_tenant", "")
	expect("GET", "/projections/aggregated/n", tenantA, "", 400, "unknown_tenant", "")
	expect("POST", "/aggregates/order/o-1/events", tenantA, saveO2, 400, "unknown_tenant", "")
	expect("POST", "/tenants", "", `{"tenantId":"`+tenantA+`"}`, 409, "deleted", "")
	expect("GET", "/tenants", "", "", 200, `"reference":"Acme Inc","deleted":true`, "")
	expect("PUT", "/tenants/"+tenantA, "", `{"reference":"x"}`, 404, "", "")
	if exists != nil && exists(tenantA) {
		t.Error("tenant A's storage is still there")
	}
	expect("GET", "/aggregates/order/o-1", tenantB, "", 200, `"aggregateVersion":2`, "")
	count(tenantB, "2")
}

func TestTenantsMemory(t *testing.T) {
	base, _, stop := start(t, append([]string{"-addr", "127.0.0.1:0", "-storage", "memory", "-log-requests=false"}, outboundLoopback...), tenantEnv)
	checkTenants(t, base, nil)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestTenantsSQLite(t *testing.T) {
	dir := t.TempDir()
	args := append([]string{"-addr", "127.0.0.1:0", "-storage", "sqlite:" + filepath.Join(dir, "events.db"), "-log-requests=false"}, outboundLoopback...)
	base, _, stop := start(t, args, tenantEnv)
	exists := func(id string) bool {
		_, err := os.Stat(filepath.Join(dir, "events+t-"+id+".db"))
		return err == nil
	}
	checkTenants(t, base, exists)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "events+tenants.db")); err != nil {
		t.Errorf("registry file: %v", err)
	}
	// After a restart the registry, B's data and its projection are there.
	base, _, stop = start(t, args, tenantEnv)
	if code, body := tcall(t, "GET", base+"/tenants", "", "", false); code != 200 ||
		!strings.Contains(body, `"tenantId":"`+tenantA+`","tenantNumber":"1"`) || !strings.Contains(body, `"deleted":true`) ||
		!strings.Contains(body, `"tenantId":"`+tenantB+`","tenantNumber":"2"`) {
		t.Errorf("tenants after restart: %d %s", code, body)
	}
	if code, body := tcall(t, "GET", base+"/aggregates/order/o-1", tenantB, "", false); code != 200 || !strings.Contains(body, `"aggregateVersion":2`) {
		t.Errorf("B after restart: %d %s", code, body)
	}
	if code, body := tcall(t, "GET", base+"/aggregates/order/o-1", tenantA, "", false); code != 400 {
		t.Errorf("deleted A after restart: %d %s", code, body)
	}
	waitFor(t, "B's count after restart", func() string {
		if code, body := tcall(t, "GET", base+"/projections/aggregated/n", tenantB, "", false); code != 200 || !strings.Contains(body, `"count":"2"`) {
			return body
		}
		return ""
	})
	if exists(tenantA) {
		t.Error("deleted A's file came back")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestTenantsPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL")
	}
	ctx := context.Background()
	admin, url, schema := postgresAdmin(t, "es_tenants_")
	ts := tenantStorage{spec: url, schema: schema}
	t.Cleanup(func() {
		for _, s := range []string{schema, ts.registrySchema(), ts.tenantSchema(tenantA), ts.tenantSchema(tenantB), ts.tenantSchema(tenantX)} {
			_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
		}
	})
	// A tenant's storage is its rows in the project's tables; no tenant
	// has a schema of its own.
	exists := func(id string) bool {
		q := pgx.Identifier{schema}.Sanitize()
		var rows bool
		if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM "+q+".events_rows WHERE tenant = $1) OR "+
			"EXISTS (SELECT 1 FROM "+q+".definitions_rows WHERE tenant = $1)", id).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		var schemas int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
			ts.tenantSchema(id)).Scan(&schemas); err != nil || schemas != 0 {
			t.Errorf("tenant %s has a schema of its own (%d, %v)", id, schemas, err)
		}
		return rows
	}
	base, _, stop := start(t, append([]string{"-addr", "127.0.0.1:0", "-storage", url, "-postgres-schema", schema, "-log-requests=false"}, outboundLoopback...), tenantEnv)
	checkTenants(t, base, exists)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestTenantsPostgresUpgrade: a tenant that an earlier version kept in a
// schema of its own is moved into the project's tables when the server
// first opens it, with its events, and the schema is dropped.
func TestTenantsPostgresUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL")
	}
	ctx := context.Background()
	admin, url, schema := postgresAdmin(t, "es_tenants_up_")
	ts := tenantStorage{spec: url, schema: schema}
	t.Cleanup(func() {
		for _, s := range []string{schema, ts.registrySchema(), ts.tenantSchema(tenantB)} {
			_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
		}
	})
	args := []string{"-addr", "127.0.0.1:0", "-storage", url, "-postgres-schema", schema, "-log-requests=false"}
	base, _, stop := start(t, args, tenantEnv)
	if code, body := tcall(t, "POST", base+"/tenants", "", `{"tenantId":"`+tenantB+`"}`, false); code != 200 {
		t.Fatalf("add tenant: %d %s", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The tenant's data where versions before schema version 8 kept it.
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	legacy, err := postgres.Open(ctx, pool, &postgres.Options{Schema: ts.tenantSchema(tenantB)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := legacy.Append(ctx, storage.AppendRequest{AggregateType: "order", AggregateID: "o-1", Events: []storage.Event{
		{ID: "9d0f7780-8536-41ef-955c-f18a02a01bf8", Type: "Placed", Data: []byte(`{"n":1}`), RecordedAt: time.Now().UTC()}}}); err != nil {
		t.Fatal(err)
	}
	_ = legacy.Close()

	base, _, stop = start(t, args, tenantEnv)
	if code, body := tcall(t, "GET", base+"/aggregates/order/o-1", tenantB, "", false); code != 200 ||
		!strings.Contains(body, `"aggregateVersion":1`) || !strings.Contains(body, "9d0f7780-8536-41ef-955c-f18a02a01bf8") {
		t.Errorf("the upgraded tenant's aggregate: %d %s", code, body)
	}
	if code, body := tcall(t, "GET", base+"/aggregates/order/o-1", "", "", false); code != 404 {
		t.Errorf("the project's own data after the upgrade: %d %s, want 404", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
		ts.tenantSchema(tenantB)).Scan(&n); err != nil || n != 0 {
		t.Errorf("the tenant's old schema after the upgrade: %d, %v; want dropped", n, err)
	}
}

// TestTenantsTwoServerProcessesPostgres: two server processes on one
// PostgreSQL schema serve one tenant. Saves through either reach the
// tenant's projection and feed on both (appends of another process are
// announced to that tenant's projector, across processes), and the
// project's own data stays apart.
func TestTenantsTwoServerProcessesPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	ctx := context.Background()
	admin, url, schema := postgresAdmin(t, "es_tenants_two_")
	t.Cleanup(func() {
		for _, s := range []string{schema, schema + "+tenants"} {
			_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
		}
	})
	env := []string{"EVENTSTORE_ACCESS_KEY=ak_t", "EVENTSTORE_SECRET_ACCESS_KEY=sk_t"}
	args := append([]string{"-addr", "127.0.0.1:0", "-storage", url, "-postgres-schema", schema, "-log-requests=false"}, outboundLoopback...)
	a, b := startProcess(t, env, args...), startProcess(t, env, args...)
	if code, body := tcall(t, "POST", a.base+"/projections/definitions", "",
		`{"projectionName":"n","feedName":"order","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`,
		false); code != 200 {
		t.Fatalf("create definition: %d %s", code, body)
	}
	// A reaction to every Placed, of the project and of each tenant,
	// which both processes run.
	var rmu sync.Mutex
	delivered := map[string]map[string]int{} // tenantId ("" for the project) → reaction id → deliveries
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Metadata struct {
				TenantID string `json:"tenantId"`
			} `json:"metadata"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		rmu.Lock()
		defer rmu.Unlock()
		if delivered[body.Metadata.TenantID] == nil {
			delivered[body.Metadata.TenantID] = map[string]int{}
		}
		delivered[body.Metadata.TenantID][r.Header.Get(reactions.HeaderReactionID)]++
	}))
	defer receiver.Close()
	if code, body := tcall(t, "POST", a.base+"/reactions/definitions", "",
		`{"reactionName":"placed","feedName":"order","reactOnEventType":"Placed","action":{"actionType":"HTTP_POST","targetUri":"`+receiver.URL+`"}}`,
		false); code != 200 {
		t.Fatalf("create reaction definition: %d %s", code, body)
	}
	if code, body := tcall(t, "POST", a.base+"/tenants", "", `{"tenantId":"`+tenantA+`"}`, false); code != 200 {
		t.Fatalf("add tenant: %d %s", code, body)
	}
	// Both servers serve the tenant (b learns of it from the registry);
	// one save and a read of the count on each first, so that the
	// tenant's projector runs in both processes before the load.
	count := func(base, tenant, want string) {
		t.Helper()
		waitFor(t, base+" count of tenant "+tenant, func() string {
			if code, body := tcall(t, "GET", base+"/projections/aggregated/n", tenant, "", false); code != 200 || !strings.Contains(body, `"count":"`+want+`"`) {
				return fmt.Sprintf("%d %s", code, body)
			}
			return ""
		})
	}
	save := func(base, tenant, id string) {
		t.Helper()
		body := `{"events":[{"eventId":"` + uuid.NewString() + `","eventType":"Placed","data":{"n":1}}]}`
		if code, resp := tcall(t, "POST", base+"/aggregates/order/"+id+"/events", tenant, body, false); code != 200 {
			t.Fatalf("save %s as %q: %d %s", id, tenant, code, resp)
		}
	}
	save(a.base, tenantA, "o-first")
	count(a.base, tenantA, "1")
	count(b.base, tenantA, "1")
	for i := range 20 {
		srv := a.base
		if i%2 == 1 {
			srv = b.base
		}
		save(srv, tenantA, fmt.Sprint("o-", i))
	}
	for i := range 5 {
		save(b.base, "", fmt.Sprint("p-", i))
	}
	for _, base := range []string{a.base, b.base} {
		count(base, tenantA, "21")
		count(base, "", "5")
		if code, body := tcall(t, "GET", base+"/feeds/order?limit=1000", tenantA, "", false); code != 200 || strings.Count(body, `"eventType":"Placed"`) != 21 {
			t.Errorf("%s: the tenant's feed: %d, %d events; want 21", base, code, strings.Count(body, `"eventType":"Placed"`))
		}
	}

	// Every reaction delivered once, by one of the two processes.
	waitFor(t, "the reactions of 21 saves of tenant A and 5 of the project", func() string {
		rmu.Lock()
		defer rmu.Unlock()
		if len(delivered[tenantA]) != 21 || len(delivered[""]) != 5 {
			return fmt.Sprintf("tenant A %d, project %d", len(delivered[tenantA]), len(delivered[""]))
		}
		return ""
	})
	time.Sleep(500 * time.Millisecond) // a repeat would come meanwhile
	rmu.Lock()
	for tenant, ids := range delivered {
		for id, n := range ids {
			if n != 1 {
				t.Errorf("reaction %s of tenant %q delivered %d times", id, tenant, n)
			}
		}
	}
	rmu.Unlock()

	// A definition made through one process reaches the tenants the other
	// process has open and this one has not: tenant B is served by b only.
	if code, body := tcall(t, "POST", a.base+"/tenants", "", `{"tenantId":"`+tenantB+`"}`, false); code != 200 {
		t.Fatalf("add tenant: %d %s", code, body)
	}
	save(b.base, tenantB, "o-b1")
	count(b.base, tenantB, "1")
	if code, body := tcall(t, "POST", a.base+"/projections/definitions", "",
		`{"projectionName":"m","feedName":"order","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.placed"}]}]}`,
		false); code != 200 {
		t.Fatalf("create definition m: %d %s", code, body)
	}
	save(b.base, tenantB, "o-b2")
	waitFor(t, "b: definition m of tenant B", func() string {
		if code, body := tcall(t, "GET", b.base+"/projections/aggregated/m", tenantB, "", false); code != 200 || !strings.Contains(body, `"placed":"2"`) {
			return fmt.Sprintf("%d %s", code, body)
		}
		return ""
	})
	// And so does its deletion.
	if code, body := tcall(t, "DELETE", a.base+"/projections/definitions/m", "", "", false); code != 200 {
		t.Fatalf("delete definition m: %d %s", code, body)
	}
	waitFor(t, "b: definition m of tenant B deleted", func() string {
		if code, body := tcall(t, "GET", b.base+"/projections/aggregated/m", tenantB, "", false); code != 404 {
			return fmt.Sprintf("%d %s", code, body)
		}
		return ""
	})
}
