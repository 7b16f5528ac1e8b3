package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eventkit-go/eventstore/internal/limits"
)

// lineWriter hands every line written to it to a channel.
type lineWriter struct {
	mu    sync.Mutex
	buf   strings.Builder
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	s := w.buf.String()
	for {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			break
		}
		select {
		case w.lines <- s[:i]:
		default:
		}
		s = s[i+1:]
	}
	w.buf.Reset()
	w.buf.WriteString(s)
	return len(p), nil
}

// start runs the server and returns its base URL, the lines of stdout
// before it, and a function that stops it and returns run's error.
func start(t *testing.T, args []string, env map[string]string) (string, []string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lineWriter{lines: make(chan string, 100)}
	var logs syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, func(k string) string { return env[k] }, out, &logs) }()
	var before []string
	deadline := time.After(30 * time.Second) // a loaded machine: opening PostgreSQL projects took 12 s at a load of 30
	for {
		select {
		case line := <-out.lines:
			if base, ok := strings.CutPrefix(line, "listening on "); ok {
				stop := func() error {
					cancel()
					select {
					case err := <-done:
						return err
					case <-time.After(15 * time.Second):
						t.Fatal("run did not return after cancel")
						return nil
					}
				}
				t.Cleanup(func() { cancel() })
				return base, before, stop
			}
			before = append(before, line)
		case err := <-done:
			cancel()
			t.Fatalf("run returned before listening: %v\nlogs:\n%s", err, logs.String())
		case <-deadline:
			cancel()
			t.Fatal("no 'listening on' line")
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func call(t *testing.T, method, url, access, secret, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Service-Access-Key", access)
	req.Header.Set("Service-Secret-Access-Key", secret)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestRunServesAndStops(t *testing.T) {
	env := map[string]string{"EVENTSTORE_ACCESS_KEY": "ak", "EVENTSTORE_SECRET_ACCESS_KEY": "sk"}
	base, before, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", "memory"}, env)
	if len(before) != 0 {
		t.Errorf("configured keys must not be printed; got %q", before)
	}
	if code, _ := call(t, "POST", base+"/projections/definitions", "ak", "sk",
		`{"projectionName":"n","feedName":"order","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`); code != 200 {
		t.Fatalf("create definition: %d", code)
	}
	if code, body := call(t, "POST", base+"/aggregates/order/o-1/events", "ak", "sk",
		`{"events":[{"eventId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","eventType":"Placed"}]}`); code != 200 || body != "" {
		t.Fatalf("save: %d %q", code, body)
	}
	if code, body := call(t, "GET", base+"/projections/aggregated/n", "ak", "sk", ""); code != 200 || !strings.Contains(body, `"data":{"count":"1"}`) {
		t.Fatalf("query: %d %s", code, body)
	}
	if code, _ := call(t, "GET", base+"/aggregates/order/o-1", "ak", "wrong", ""); code != 401 {
		t.Errorf("wrong secret: %d", code)
	}
	if err := stop(); err != nil {
		t.Fatalf("run after cancel: %v", err)
	}
	if _, err := http.Get(base + "/aggregates/order/o-1"); err == nil {
		t.Error("server still accepts connections after shutdown")
	}
}

func TestRunGeneratesKeys(t *testing.T) {
	base, before, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", "memory"}, nil)
	var access, secret string
	for _, l := range before {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "export EVENTSTORE_ACCESS_KEY="); ok {
			access = v
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "export EVENTSTORE_SECRET_ACCESS_KEY="); ok {
			secret = v
		}
	}
	if len(access) < 10 || len(secret) < 30 || !strings.Contains(strings.Join(before, "\n"), "curl ") {
		t.Fatalf("generated keys not printed usefully: %q", before)
	}
	if code, _ := call(t, "GET", base+"/aggregates/order/none", access, secret, ""); code != 404 {
		t.Errorf("generated keys: got %d, want 404 (authenticated, unknown aggregate)", code)
	}
	if code, _ := call(t, "GET", base+"/aggregates/order/none", "", "", ""); code != 401 {
		t.Errorf("no keys: got %d, want 401", code)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestRunSQLite(t *testing.T) {
	env := map[string]string{"EVENTSTORE_ACCESS_KEY": "ak", "EVENTSTORE_SECRET_ACCESS_KEY": "sk"}
	path := filepath.Join(t.TempDir(), "events.db")
	args := []string{"-addr", "127.0.0.1:0", "-storage", "sqlite:" + path}
	base, _, stop := start(t, args, env)
	if code, body := call(t, "POST", base+"/aggregates/order/o-1/events", "ak", "sk",
		`{"events":[{"eventId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","eventType":"Placed"}]}`); code != 200 {
		t.Fatalf("save: %d %s", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The event survives a restart.
	base, _, stop = start(t, args, env)
	if code, body := call(t, "GET", base+"/aggregates/order/o-1", "ak", "sk", ""); code != 200 || !strings.Contains(body, "7c9e6679") {
		t.Fatalf("load after restart: %d %s", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-storage", "mongo"}, nil, "unknown -storage"},
		{[]string{"-storage", "sqlite:"}, nil, "needs a path"},
		{[]string{"-storage", "sqlite://eventstore.db"}, nil, `without "//"`},
		{[]string{"extra"}, nil, "unexpected arguments"},
		{[]string{"-max-instance-bytes", "0"}, nil, "at least 1"},
		{[]string{"-max-definitions", "-5"}, nil, "at least 1"},
		{nil, map[string]string{"EVENTSTORE_ACCESS_KEY": "only-one"}, "set both"},
		{[]string{"-addr", "256.0.0.1:bad", "-storage", "memory"}, nil, ""},
	} {
		err := run(context.Background(), c.args, func(k string) string { return c.env[k] }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("run %q: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

func TestDefaultStorageIsSQLiteFile(t *testing.T) {
	c, err := parseConfig(nil, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.projector.MaxInstanceBytes != limits.DefaultMaxInstanceBytes || c.projector.MaxDefinitions != limits.DefaultMaxDefinitions {
		t.Errorf("projector limits %+v, want the library's defaults", c.projector)
	}
	if c.storage != "sqlite:eventstore.db" {
		t.Errorf("default -storage is %q, want the durable sqlite:eventstore.db", c.storage)
	}
}

// TestKeysFromEnvironment: keys are trimmed, and a key with whitespace or a
// control character inside is refused with a message naming the variable.
func TestKeysFromEnvironment(t *testing.T) {
	env := func(access, secret string) func(string) string {
		return func(k string) string {
			return map[string]string{"EVENTSTORE_ACCESS_KEY": access, "EVENTSTORE_SECRET_ACCESS_KEY": secret}[k]
		}
	}
	c, err := parseConfig(nil, env(" ak\n", "\tsk "), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.key.AccessKey != "ak" || c.key.SecretAccessKey != "sk" || c.generatedKey {
		t.Errorf("keys %+v, want ak/sk trimmed", c.key)
	}
	for _, bad := range []struct{ access, secret, name string }{
		{"a k", "sk", "EVENTSTORE_ACCESS_KEY"},
		{"ak", "s\x01k", "EVENTSTORE_SECRET_ACCESS_KEY"},
		{"ak", "s\u00a0k", "EVENTSTORE_SECRET_ACCESS_KEY"},
		{"a\xffk", "sk", "EVENTSTORE_ACCESS_KEY"},
	} {
		_, err := parseConfig(nil, env(bad.access, bad.secret), io.Discard)
		if err == nil || !strings.Contains(err.Error(), bad.name) || !strings.Contains(err.Error(), "whitespace or control characters") {
			t.Errorf("keys %q/%q: error %v, want one naming %s", bad.access, bad.secret, err, bad.name)
		}
	}
	if _, err := parseConfig(nil, env("  ", "sk"), io.Discard); err == nil {
		t.Error("a key of only whitespace is accepted")
	}
}
