package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// procStatus reads the resident memory (KiB) and open file descriptors
// of a process.
func procStatus(t *testing.T, pid int) (rssKiB, fds int) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rssKiB, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	require.NoError(t, err)
	return rssKiB, len(ents)
}

// request sends one keep-alive request on c and reads the answer.
func request(c net.Conn, path, secret string) (*http.Response, error) {
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: e2e\r\nService-Access-Key: %s\r\nService-Secret-Access-Key: %s\r\n\r\n",
		path, accessKey, secret); err != nil {
		return nil, err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res, nil
}

// closedByServer reports whether the server closes c within d.
func closedByServer(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF || err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestConnectionLimit (finding 7): with -max-conns 100, 400 clients that
// each make a request and then keep their connection idle hold at most
// 100 connections in the server: the others are answered 503 with
// Retry-After and closed. Idle connections are closed after -idle-timeout,
// a 401 closes its connection at once, and the server serves again once
// idle connections are gone.
func TestConnectionLimit(t *testing.T) {
	const limit, clients = 100, 400
	s := startServer(t, "memory", "-max-conns", strconv.Itoa(limit), "-idle-timeout", "3s", "-log-requests=false")
	pid := s.cmd.Process.Pid
	addr := strings.TrimPrefix(s.base, "http://")
	rss0, fds0 := procStatus(t, pid)

	var ok, busy int
	conns := make([]net.Conn, 0, clients)
	for range clients {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		res, err := request(c, "/aggregates/order/none", secretKey)
		switch {
		case err != nil:
			t.Fatalf("request: %v", err)
		case res.StatusCode == http.StatusServiceUnavailable:
			busy++
			assert.Equal(t, "5", res.Header.Get("Retry-After"))
			_ = c.Close()
		default:
			assert.Equal(t, http.StatusNotFound, res.StatusCode)
			ok++
			conns = append(conns, c) // kept open, idle
		}
	}
	rss1, fds1 := procStatus(t, pid)
	t.Logf("%d idle clients, -max-conns %d: %d served, %d answered 503; server RSS %d -> %d KiB, fds %d -> %d",
		clients, limit, ok, busy, rss0, rss1, fds0, fds1)
	assert.Equal(t, limit, ok, "connections served")
	assert.Equal(t, clients-limit, busy, "connections refused with 503")
	assert.LessOrEqual(t, fds1-fds0, limit+10, "file descriptors held")
	assert.Less(t, rss1-rss0, 64<<10, "KiB of memory held by idle connections")

	// Saturated: a new client is refused at once, not left waiting.
	extra, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	res, err := request(extra, "/aggregates/order/none", secretKey)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, res.StatusCode)
	_ = extra.Close()

	// The idle connections are closed after -idle-timeout.
	start := time.Now()
	for _, c := range conns {
		require.True(t, closedByServer(c, 10*time.Second), "an idle connection stays open")
	}
	t.Logf("idle connections closed %s after the last request", time.Since(start).Round(100*time.Millisecond))
	require.Eventually(t, func() bool {
		status, _, err := s.do(t.Context(), http.MethodGet, "/aggregates/order/none", nil)
		return err == nil && status == http.StatusNotFound
	}, 10*time.Second, 50*time.Millisecond, "the server serves again")

	// A 401 closes its connection.
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	res, err = request(c, "/aggregates/order/none", "wrong")
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode)
	assert.True(t, closedByServer(c, time.Second), "the connection stays open after a 401")
}
