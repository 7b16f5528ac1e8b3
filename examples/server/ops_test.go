package main

import (
	"bufio"
	"context"
	"github.com/jackc/pgx/v5"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testKeys = map[string]string{"EVENTSTORE_ACCESS_KEY": "ak", "EVENTSTORE_SECRET_ACCESS_KEY": "sk"}

// scrape reads /metrics at url with the given secret.
func scrape(t *testing.T, url, secret string) (int, string) {
	t.Helper()
	return call(t, "GET", url, "ak", secret, "")
}

// TestMetricsScrape: after saves, a conflict, a projection and a few
// requests, /metrics (with the key pair) holds every expected series;
// without it, 401.
func TestMetricsScrape(t *testing.T) {
	base, _, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", "memory", "-log-requests=false"}, testKeys)
	defer func() { require.NoError(t, stop()) }()
	code, _ := call(t, "POST", base+"/projections/definitions", "ak", "sk",
		`{"projectionName":"n","feedName":"order","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"add","targetSelector":"$.projection.sum","eventSelector":"$.event.n"}]}]}`)
	require.Equal(t, 200, code)
	code, _ = call(t, "POST", base+"/aggregates/order/o-1/events", "ak", "sk",
		`{"events":[{"eventId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","eventType":"Placed","data":{"n":"x"}},{"eventId":"7c9e6679-7425-40de-944b-e07fc1f90ae8","eventType":"Placed","data":{"n":2}}]}`)
	require.Equal(t, 200, code)
	code, _ = call(t, "POST", base+"/aggregates/order/o-1/events", "ak", "sk",
		`{"expectedVersion":0,"events":[{"eventId":"7c9e6679-7425-40de-944b-e07fc1f90ae9","eventType":"Placed"}]}`)
	require.Equal(t, 409, code)
	code, _ = call(t, "GET", base+"/projections/aggregated/n", "ak", "sk", "")
	require.Equal(t, 200, code)
	code, _ = call(t, "GET", base+"/aggregates/order/o-1", "ak", "wrong", "")
	require.Equal(t, 401, code)

	code, _ = scrape(t, base+"/metrics", "wrong")
	assert.Equal(t, 401, code, "metrics on the API address need the key pair")
	code, body := scrape(t, base+"/metrics", "sk")
	require.Equal(t, 200, code)
	for _, want := range []string{
		`eventstore_http_requests_total{method="POST",route="/aggregates/{type}/{id}/events",status="200",tenant=""} 1`,
		`eventstore_http_requests_total{method="POST",route="/aggregates/{type}/{id}/events",status="409",tenant=""} 1`,
		`eventstore_http_requests_total{method="GET",route="/aggregates/{type}/{id}",status="401",tenant=""} 1`,
		`eventstore_http_request_duration_seconds_bucket{method="GET",route="/projections/aggregated/{name}",status="200",tenant="",le="+Inf"} 1`,
		"eventstore_events_saved_total 2",
		"eventstore_batches_saved_total 1",
		"eventstore_conflicts_total 1",
		`eventstore_projection_events_applied_total{projection="n"} 1`,
		`eventstore_projection_events_failed_total{projection="n"} 1`,
		`eventstore_projection_lag{projection="n",tenant=""} 0`,
		"eventstore_http_open_connections ",
		"eventstore_http_rejected_connections_total 0",
		`eventstore_storage_errors_total{op="Append"} 0`,
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		assert.Contains(t, body, want)
	}
	assert.NotContains(t, body, "o-1", "no aggregate id in a label")
}

// TestMetricsOnOwnAddress: with -metrics-addr, /metrics is served there
// without credentials, and the API address has no /metrics.
func TestMetricsOnOwnAddress(t *testing.T) {
	base, before, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", "memory", "-metrics-addr", "127.0.0.1:0"}, testKeys)
	defer func() { require.NoError(t, stop()) }()
	var murl string
	for _, l := range before {
		if v, ok := strings.CutPrefix(l, "metrics on "); ok {
			murl = v
		}
	}
	require.NotEmpty(t, murl, "metrics address printed: %q", before)
	res, err := http.Get(murl)
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, 200, res.StatusCode)
	assert.Contains(t, string(b), "eventstore_events_saved_total 0")
	code, _ := scrape(t, base+"/metrics", "sk")
	assert.Equal(t, 404, code)
}

// TestHealthWithoutCredentials: /healthz and /readyz answer without keys.
func TestHealthWithoutCredentials(t *testing.T) {
	base, _, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", "memory"}, testKeys)
	defer func() { require.NoError(t, stop()) }()
	for _, p := range []string{"/healthz", "/readyz"} {
		require.Eventually(t, func() bool {
			res, err := http.Get(base + p)
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == 200
		}, 5*time.Second, 20*time.Millisecond, p)
	}
}

// TestLimitListener: connections over the limit are answered 503 with
// Retry-After and closed; a slot freed is reused.
func TestLimitListener(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := newLimitListener(raw, 2)
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	dial()
	dial()
	s1, s2 := <-accepted, <-accepted
	_ = s2
	over := dial()
	_, _ = io.WriteString(over, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, over.SetReadDeadline(time.Now().Add(5*time.Second)))
	res, err := http.ReadResponse(bufio.NewReader(over), nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	assert.Equal(t, "5", res.Header.Get("Retry-After"))
	b, _ := io.ReadAll(res.Body)
	assert.JSONEq(t, busyBody, string(b))
	assert.EqualValues(t, 2, ln.open.Load())
	assert.EqualValues(t, 1, ln.rejected.Load())

	require.NoError(t, s1.Close())
	_ = s1.Close() // a second close frees no second slot
	dial()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a freed slot is not reused")
	}
	assert.EqualValues(t, 2, ln.open.Load())
}

func TestPostgresSchema(t *testing.T) {
	for _, c := range []struct{ spec, flag, want, err string }{
		{"postgres://u@h/db", "", "", ""},
		{"postgres://u@h/db", "shop", "shop", ""},
		{"postgres://u@h/db?search_path=tenant_a,public", "", "tenant_a", ""},
		{"postgresql://u@h/db?search_path=%22b%22", "", "b", ""},
		{"postgres://u@h/db?search_path=x", "flagged", "flagged", ""},
		{"memory", "", "", ""},
		{"memory", "shop", "", "needs a postgres"},
	} {
		got, err := postgresSchema(c.spec, c.flag)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.spec)
			continue
		}
		assert.NoError(t, err, c.spec)
		assert.Equal(t, c.want, got, c.spec)
	}
}

// TestMetricsProjectsAndTenants: with a key file, the request series and
// eventstore_projection_lag carry the project's name (never a key) and the
// tenant id of a request served with a tenant's data; a refused tenant id
// labels nothing, and a deleted tenant's request series go.
func TestMetricsProjectsAndTenants(t *testing.T) {
	keys := writeKeys(t, "", twoProjects)
	base, _, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", "memory", "-keys", keys, "-log-requests=false"}, nil)
	a, b := isoSpaces[1], isoSpaces[3] // a's tenant T1, b's default space
	for _, c := range []struct {
		sp                 isoSpace
		method, path, body string
		want               int
	}{
		{isoSpaces[0], "POST", "/projections/definitions", isoDefN, 200},
		{isoSpaces[0], "POST", "/tenants", `{"tenantId":"` + isoT1 + `"}`, 200},
		{a, "POST", "/aggregates/order/o-1/events", `{"events":[` + isoEvent(a, 1) + `]}`, 200},
		{b, "POST", "/aggregates/order/o-1/events", `{"events":[` + isoEvent(b, 1) + `]}`, 200},
		{isoSpace{keys: isoKeysA, tenant: isoT9}, "GET", "/aggregates/order/o-1", "", 400},
		{isoSpace{keys: isoKeysMixed}, "GET", "/aggregates/order/o-1", "", 401},
	} {
		if code, body := isoCall(t, base, c.sp.keys, c.sp.header(), c.method, c.path, c.body); code != c.want {
			t.Fatalf("%s %s as %s: %d %s, want %d", c.method, c.path, c.sp.keys.name, code, body, c.want)
		}
	}
	code, body := isoCall(t, base, isoKeysB, nil, "GET", "/metrics", "")
	if code != 200 {
		t.Fatalf("metrics: %d %s", code, body)
	}
	for _, want := range []string{
		`eventstore_http_requests_total{method="POST",project="a",route="/aggregates/{type}/{id}/events",status="200",tenant="` + isoT1 + `"} 1`,
		`eventstore_http_request_duration_seconds_count{method="POST",project="a",route="/aggregates/{type}/{id}/events",status="200",tenant="` + isoT1 + `"} 1`,
		`eventstore_http_requests_total{method="POST",project="b",route="/aggregates/{type}/{id}/events",status="200",tenant=""} 1`,
		`eventstore_http_requests_total{method="POST",project="a",route="/tenants",status="200",tenant=""} 1`,
		`eventstore_http_requests_total{method="GET",project="a",route="/aggregates/{type}/{id}",status="400",tenant=""} 1`,
		`eventstore_http_requests_total{method="GET",project="",route="/aggregates/{type}/{id}",status="401",tenant=""} 1`,
		`eventstore_projection_lag{project="a",projection="n",tenant=""} `,
		`eventstore_projection_lag{project="a",projection="n",tenant="` + isoT1 + `"} `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, never := range []string{"ak_a", "sk_a", "ak_b", "sk_b", isoT9} {
		if strings.Contains(body, never) {
			t.Errorf("metrics hold %q", never)
		}
	}

	if code, body := isoCall(t, base, isoKeysA, nil, "DELETE", "/tenants/"+isoT1, ""); code != 200 {
		t.Fatalf("delete T1: %d %s", code, body)
	}
	_, body = isoCall(t, base, isoKeysB, nil, "GET", "/metrics", "")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "eventstore_http_") && strings.Contains(line, isoT1) {
			t.Errorf("a deleted tenant's series: %s", line)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsFeedLagOnPostgres: on PostgreSQL, /metrics has the feed lag,
// 0 when no append is in flight; on memory it has none. The test leaves no
// schema behind, the registry of tenants the server creates
// (SCHEMA+tenants) included (it used to stay after every run).
func TestMetricsFeedLagOnPostgres(t *testing.T) {
	var url, schema string
	t.Run("postgres", func(t *testing.T) {
		_, url, schema = postgresAdmin(t, "es_feedlag_")
		base, _, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", url, "-postgres-schema", schema, "-log-requests=false"}, testKeys)
		defer func() { require.NoError(t, stop()) }()
		code, _ := call(t, "POST", base+"/aggregates/order/o-1/events", "ak", "sk",
			`{"events":[{"eventId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","eventType":"Placed","data":{"n":1}}]}`)
		require.Equal(t, 200, code)
		code, body := scrape(t, base+"/metrics", "sk")
		require.Equal(t, 200, code)
		assert.Contains(t, body, "\neventstore_feed_lag 0\n")
	})
	if schema != "" {
		conn, err := pgx.Connect(context.Background(), url)
		require.NoError(t, err)
		defer conn.Close(context.Background())
		var left []string
		rows, err := conn.Query(context.Background(), `SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)`, schema)
		require.NoError(t, err)
		left, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		assert.Empty(t, left, "schemas the test left behind")
	}

	mbase, _, mstop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", "memory", "-log-requests=false"}, testKeys)
	defer func() { require.NoError(t, mstop()) }()
	_, body := scrape(t, mbase+"/metrics", "sk")
	assert.NotContains(t, body, "eventstore_feed_lag ")
}
