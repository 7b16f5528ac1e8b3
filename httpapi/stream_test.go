package httpapi_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/eventkit-go/eventstore"
	"github.com/eventkit-go/eventstore/httpapi"
)

// saveLarge saves versions versions of one event of about size bytes of
// data to order/big.
func saveLarge(t testing.TB, st *eventstore.Store, versions, size int) {
	t.Helper()
	data := []byte(`{"s":"` + strings.Repeat("x", size) + `"}`)
	for range versions {
		_, err := st.Save(context.Background(), "order", "big",
			[]eventstore.NewEvent{{ID: uuid.NewString(), Type: "Filled", Data: data}}, nil)
		require.NoError(t, err)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestSlowClientsDoNotEachHoldTheAnswer: 20 clients that request a 40 MiB
// aggregate and do not read the answer hold at most a few MiB each (the
// response buffer and one part read from the store), not the whole answer.
// Before streaming, each held the JSON body and its copy of the events.
func TestSlowClientsDoNotEachHoldTheAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("40 MiB aggregate")
	}
	const clients, versions, size = 20, 40, 1 << 20
	e := newEnv(t, nil)
	saveLarge(t, e.st, versions, size)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)

	base := heapInUse()
	conns := make([]net.Conn, clients)
	for i := range conns {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		_, err = fmt.Fprintf(c, "GET /aggregates/order/big HTTP/1.1\r\nHost: x\r\n%s: %s\r\n%s: %s\r\n\r\n",
			httpapi.HeaderAccessKey, testAccess, httpapi.HeaderSecretAccessKey, testSecret)
		require.NoError(t, err)
		conns[i] = c
	}
	// Let every request reach the point where its writes block.
	time.Sleep(2 * time.Second)
	held := heapInUse() - min(base, heapInUse())
	perClient := float64(held) / clients / (1 << 20)
	t.Logf("%d clients not reading a %d MiB load: heap in use %.1f MiB more, %.2f MiB per client",
		clients, versions*size>>20, float64(held)/(1<<20), perClient)
	assert.Less(t, perClient, 8.0, "MiB held per client not reading")

	// Each still gets the whole answer once it reads.
	for _, c := range conns[:2] {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Minute))) // a loaded CI machine with -race
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		var body struct {
			AggregateVersion int64 `json:"aggregateVersion"`
			Events           []struct {
				Version int64 `json:"version"`
			} `json:"events"`
			HasMore bool `json:"hasMore"`
		}
		require.NoError(t, json.NewDecoder(res.Body).Decode(&body))
		assert.Equal(t, int64(versions), body.AggregateVersion)
		require.Len(t, body.Events, versions)
		assert.Equal(t, int64(versions), body.Events[versions-1].Version)
		assert.False(t, body.HasMore)
	}
}

// body reads a response body, gunzipped when it is compressed.
func body(t *testing.T, res *http.Response) []byte {
	t.Helper()
	var rd io.Reader = res.Body
	if res.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(res.Body)
		require.NoError(t, err)
		rd = zr
	}
	b, err := io.ReadAll(rd)
	require.NoError(t, err)
	return b
}

// TestStreamedAnswersEqualBuffered: an answer larger than the response
// buffer, read from the store in parts and streamed, has the same bytes as
// the one answered whole, with and without gzip; limit and hasMore hold
// across the parts.
func TestStreamedAnswersEqualBuffered(t *testing.T) {
	whole := newEnv(t, nil)
	streamed := newEnv(t, &httpapi.Options{MaxResponseBuffer: 3000})
	for _, e := range []*env{whole, streamed} {
		saveLarge(t, e.st, 12, 1000)
	}
	// The two stores stamp their own ids and times: compare shapes on
	// whole, and streamed against itself read whole with a big buffer.
	big := httpapi.New(streamed.st, streamed.p, &httpapi.Options{
		Keys: []httpapi.KeyPair{{AccessKey: testAccess, SecretAccessKey: testSecret}}})
	ref := &env{t: t, st: streamed.st, p: streamed.p, h: big}
	for _, path := range []string{
		"/aggregates/order/big", "/aggregates/order/big?limit=5", "/aggregates/order/big?since=3&limit=7",
		"/aggregates/order/big?since=12", "/feeds/order", "/feeds/_all?limit=5", "/feeds/order?since=4&limit=3",
	} {
		for _, enc := range []string{"", "gzip"} {
			want := ref.must(http.StatusOK, http.MethodGet, path, "", "Accept-Encoding", enc)
			got := streamed.must(http.StatusOK, http.MethodGet, path, "", "Accept-Encoding", enc)
			wb, gb := body(t, want), body(t, got)
			assert.Equal(t, string(wb), string(gb), "%s (Accept-Encoding %q)", path, enc)
			assert.NotEmpty(t, want.Header.Get("Content-Length"), "%s answered whole", path)
			if len(gb) > 3000 {
				assert.Empty(t, got.Header.Get("Content-Length"), "%s streamed", path)
			}
			assert.True(t, json.Valid(gb), path)
		}
	}
	res := streamed.must(http.StatusOK, http.MethodGet, "/aggregates/order/big?limit=5", "")
	var agg struct {
		Events  []json.RawMessage `json:"events"`
		HasMore bool              `json:"hasMore"`
	}
	require.NoError(t, json.Unmarshal(body(t, res), &agg))
	assert.Len(t, agg.Events, 5)
	assert.True(t, agg.HasMore)
	assert.Equal(t, 12, bytes.Count(body(t, streamed.must(http.StatusOK, http.MethodGet, "/aggregates/order/big", "")), []byte(`"eventId"`)))
	streamed.must(http.StatusNotFound, http.MethodGet, "/aggregates/order/none", "")
}
