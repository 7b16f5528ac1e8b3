package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/internal/hooks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eventkit-go/eventstore/httpapi"
)

// TestObserverSeesEveryRequest: one RequestInfo per request, with the
// route pattern (never the path), status, bytes and the request id
// header; a 401 closes the connection.
func TestObserverSeesEveryRequest(t *testing.T) {
	var mu sync.Mutex
	var seen []httpapi.RequestInfo
	e := newEnv(t, &httpapi.Options{Observer: func(ri httpapi.RequestInfo) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, ri)
	}})
	saveLarge(t, e.st, 1, 10)
	e.must(http.StatusOK, http.MethodGet, "/aggregates/order/big", "")
	res := e.must(http.StatusUnauthorized, http.MethodGet, "/aggregates/order/big", "", httpapi.HeaderSecretAccessKey, "wrong")
	assert.Equal(t, "close", res.Header.Get("Connection"), "a 401 closes the connection")
	e.must(http.StatusNotFound, http.MethodGet, "/nowhere", "")
	e.must(http.StatusOK, http.MethodGet, "/healthz", "", httpapi.HeaderAccessKey, "")

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 4)
	assert.Equal(t, "/aggregates/{type}/{id}", seen[0].Route)
	assert.Equal(t, http.StatusOK, seen[0].Status)
	assert.Greater(t, seen[0].Bytes, int64(100))
	assert.Equal(t, http.MethodGet, seen[0].Method)
	assert.Positive(t, seen[0].Duration)
	assert.Equal(t, "/aggregates/{type}/{id}", seen[1].Route, "a 401 names the route it was refused on")
	assert.Equal(t, http.StatusUnauthorized, seen[1].Status)
	assert.Equal(t, "/", seen[2].Route)
	assert.Equal(t, http.StatusNotFound, seen[2].Status)
	assert.Equal(t, "/healthz", seen[3].Route)
	assert.Equal(t, int64(16), seen[3].Bytes)
}

// TestHealthEndpoints: /healthz and /readyz need no credentials and say
// nothing but ok or not ready; /readyz needs the projector running.
func TestHealthEndpoints(t *testing.T) {
	e := newEnv(t, nil)
	for _, path := range []string{"/healthz", "/readyz"} {
		res := e.do(http.MethodGet, path, "", httpapi.HeaderAccessKey, "", httpapi.HeaderSecretAccessKey, "")
		b, _ := io.ReadAll(res.Body)
		if path == "/healthz" {
			assert.Equal(t, http.StatusOK, res.StatusCode)
			assert.JSONEq(t, `{"status":"ok"}`, string(b))
			continue
		}
		assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "projector not running")
		var body map[string]any
		require.NoError(t, json.Unmarshal(b, &body))
		assert.Equal(t, "unavailable", body["code"])
		assert.Equal(t, "not ready", body["message"])
		assert.NotEmpty(t, body["requestId"], "the error shape carries the request id")
		assert.Equal(t, "1", res.Header.Get("Retry-After"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { return hooks.ProjectorRunning(e.p) }, 5*time.Second, 10*time.Millisecond)
	res := e.do(http.MethodGet, "/readyz", "", httpapi.HeaderAccessKey, "", httpapi.HeaderSecretAccessKey, "")
	assert.Equal(t, http.StatusOK, res.StatusCode)

	require.NoError(t, e.st.Close())
	res = e.do(http.MethodGet, "/readyz", "")
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode, "storage closed")
	e.must(http.StatusMethodNotAllowed, http.MethodPost, "/healthz", "{}")
}
