package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	defCount = `{"projectionName":"n","feedName":"order","aggregated":true,"handlers":[{"eventType":"Placed","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`
	defOther = `{"projectionName":"m","feedName":"invoice","handlers":[{"eventType":"Sent","functions":[{"function":"inc","targetSelector":"$.projection.count"}]}]}`
	saveO1   = `{"events":[{"eventId":"7c9e6679-7425-40de-944b-e07fc1f90ae7","eventType":"Placed"}]}`
)

// writeKeys writes a key file and returns its path.
func writeKeys(t *testing.T, path, content string) string {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "keys")
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitFor calls check until it returns "" or 10 s pass.
func waitFor(t *testing.T, what string, check func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkIsolation saves with project a's keys and checks that project b's
// keys see none of it, and the other way round.
func checkIsolation(t *testing.T, base string) {
	t.Helper()
	expect := func(method, path, access, secret, body string, code int, has, hasNot string) string {
		t.Helper()
		got, resp := call(t, method, base+path, access, secret, body)
		if got != code || (has != "" && !strings.Contains(resp, has)) || (hasNot != "" && strings.Contains(resp, hasNot)) {
			t.Errorf("%s %s with %s: %d %s; want %d with %q without %q", method, path, access, got, resp, code, has, hasNot)
		}
		return resp
	}
	expect("POST", "/projections/definitions", "ak_a", "sk_a", defCount, 200, "", "")
	expect("POST", "/projections/definitions", "ak_b", "sk_b", defOther, 200, "", "")
	expect("POST", "/aggregates/order/o-1/events", "ak_a", "sk_a", saveO1, 200, "", "")

	// b sees nothing of a.
	expect("GET", "/aggregates/order/o-1", "ak_b", "sk_b", "", 404, "", "")
	expect("HEAD", "/aggregates/order/o-1", "ak_b", "sk_b", "", 404, "", "")
	expect("GET", "/aggregates/order", "ak_b", "sk_b", "", 404, "", "")
	expect("GET", "/feeds/order", "ak_b", "sk_b", "", 404, "", "")
	expect("GET", "/feeds/_all", "ak_b", "sk_b", "", 200, `"entries":[]`, "o-1")
	expect("GET", "/feeds", "ak_b", "sk_b", "", 200, "", "order")
	expect("GET", "/projections/definitions", "ak_b", "sk_b", "", 200, `"m"`, `"n"`)
	expect("GET", "/projections/definitions/n", "ak_b", "sk_b", "", 404, "", "")
	expect("GET", "/projections/aggregated/n", "ak_b", "sk_b", "", 404, "", "")
	expect("GET", "/projections", "ak_b", "sk_b", "", 200, "", `"n"`)

	// a sees its own, and not b's definition.
	expect("GET", "/aggregates/order/o-1", "ak_a", "sk_a", "", 200, "7c9e6679", "")
	expect("GET", "/feeds/_all", "ak_a", "sk_a", "", 200, "o-1", "")
	expect("GET", "/projections/definitions", "ak_a", "sk_a", "", 200, `"n"`, `"m"`)
	expect("GET", "/projections/single/m", "ak_a", "sk_a", "", 404, "", "")
	waitFor(t, "a's projection", func() string {
		if code, body := call(t, "GET", base+"/projections/aggregated/n", "ak_a", "sk_a", ""); code != 200 || !strings.Contains(body, `"count":"1"`) {
			return body
		}
		return ""
	})

	// The same aggregate and event id in b is b's own first event.
	expect("POST", "/aggregates/order/o-1/events", "ak_b", "sk_b", `{"expectedVersion":0,`+saveO1[1:], 200, "", "")
	expect("GET", "/aggregates/order/o-1", "ak_a", "sk_a", "", 200, `"aggregateVersion":1`, "")
	expect("POST", "/aggregates/order/o-1/events", "ak_a", "sk_a", `{"expectedVersion":1,"events":[{"eventId":"8c9e6679-7425-40de-944b-e07fc1f90ae7","eventType":"Placed"}]}`, 200, "", "")
	expect("GET", "/aggregates/order/o-1", "ak_b", "sk_b", "", 200, `"aggregateVersion":1`, "8c9e6679")
	expect("DELETE", "/projections/definitions/n", "ak_b", "sk_b", "", 404, "", "")
	expect("GET", "/projections/definitions/n", "ak_a", "sk_a", "", 200, "", "")

	// Mixed keys are nobody's.
	expect("GET", "/aggregates/order/o-1", "ak_a", "sk_b", "", 401, "", "")
	expect("GET", "/aggregates/order/o-1", "ak_b", "sk_a", "", 401, "", "")
	expect("GET", "/aggregates/order/o-1", "", "", "", 401, "", "")
}

const twoProjects = "# two projects\na\tak_a sk_a\nb ak_b sk_b # second\n"

func TestProjectsIsolatedMemory(t *testing.T) {
	keys := writeKeys(t, "", twoProjects)
	base, before, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", "memory", "-keys", keys, "-log-requests=false"}, nil)
	if len(before) != 0 {
		t.Errorf("nothing is printed before listening with -keys; got %q", before)
	}
	checkIsolation(t, base)
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := call(t, "GET", base+p, "", "", ""); code != 200 {
			t.Errorf("%s: %d %s", p, code, body)
		}
	}
	code, body := call(t, "GET", base+"/metrics", "ak_b", "sk_b", "")
	// The figure may be 1 while a's last event is applied: not checked.
	if code != 200 || !strings.Contains(body, `eventstore_projection_lag{project="a",projection="n",tenant=""} `) ||
		!strings.Contains(body, `eventstore_projection_lag{project="b",projection="m",tenant=""} `) {
		t.Errorf("metrics with b's keys: %d %s", code, body)
	}
	if code, _ := call(t, "GET", base+"/metrics", "ak_a", "sk_b", ""); code != 401 {
		t.Errorf("metrics with mixed keys: %d", code)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestProjectsIsolatedSQLite(t *testing.T) {
	dir := t.TempDir()
	keys := writeKeys(t, "", twoProjects)
	args := []string{"-addr", "127.0.0.1:0", "-storage", "sqlite:" + filepath.Join(dir, "events.db"), "-keys", keys, "-log-requests=false"}
	base, _, stop := start(t, args, nil)
	checkIsolation(t, base)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"events.a.db", "events.b.db"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("project file: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "events.db")); err == nil {
		t.Error("with -keys, the -storage file itself is not used")
	}
	// After a restart each project has its own data still.
	base, _, stop = start(t, args, nil)
	if code, body := call(t, "GET", base+"/aggregates/order/o-1", "ak_a", "sk_a", ""); code != 200 || !strings.Contains(body, `"aggregateVersion":2`) {
		t.Errorf("a after restart: %d %s", code, body)
	}
	if code, body := call(t, "GET", base+"/aggregates/order/o-1", "ak_b", "sk_b", ""); code != 200 || !strings.Contains(body, `"aggregateVersion":1`) {
		t.Errorf("b after restart: %d %s", code, body)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestProjectsIsolatedPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL")
	}
	ctx := context.Background()
	admin, url, schema := postgresAdmin(t, "es_projects_")
	t.Cleanup(func() {
		for _, s := range []string{schema, schema + "_a", schema + "_b", schema + "+tenants", schema + "_a+tenants", schema + "_b+tenants"} {
			_, _ = admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
		}
	})
	keys := writeKeys(t, "", twoProjects)
	base, _, stop := start(t, []string{"-addr", "127.0.0.1:0", "-storage", url, "-postgres-schema", schema, "-keys", keys, "-log-requests=false"}, nil)
	checkIsolation(t, base)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name IN ($1, $2, $3)", schema, schema+"_a", schema+"_b").Scan(&n); err != nil || n != 2 {
		t.Errorf("want the schemas %s_a and %s_b only: %d, %v", schema, schema, n, err)
	}
}

// newTestRouter serves the projects of the key file at path on spec, as
// run does, and returns the router and its base URL.
func newTestRouter(t *testing.T, spec, path string) (*projectRouter, string, *syncBuffer) {
	t.Helper()
	cfg, err := parseConfig([]string{"-storage", spec, "-keys", path, "-log-requests=false"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	rt, err := newProjectRouter(context.Background(), &cfg, slog.New(slog.NewTextHandler(&logs, nil)), newPromMetrics(true), cfg.projects, true)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rt)
	t.Cleanup(func() {
		srv.Close()
		rt.close()
	})
	return rt, srv.URL, &logs
}

func TestProjectsReload(t *testing.T) {
	for _, spec := range []string{"memory", "sqlite"} {
		t.Run(spec, func(t *testing.T) {
			dir := t.TempDir()
			if spec == "sqlite" {
				spec = "sqlite:" + filepath.Join(dir, "es.db")
			}
			path := writeKeys(t, filepath.Join(dir, "keys"), twoProjects)
			rt, base, _ := newTestRouter(t, spec, path)
			if code, _ := call(t, "POST", base+"/aggregates/order/o-1/events", "ak_a", "sk_a", saveO1); code != 200 {
				t.Fatalf("save: %d", code)
			}
			// A long poll of b is in flight while b is removed.
			polled := make(chan int, 1)
			go func() {
				code, _ := call(t, "GET", base+"/feeds/_all?waitTime=1000", "ak_b", "sk_b", "")
				polled <- code
			}()
			time.Sleep(200 * time.Millisecond)
			var b *project
			for _, p := range rt.projects() {
				if p.name == "b" {
					b = p
				}
			}

			// Rotate a's keys, remove b, add c.
			writeKeys(t, path, "a ak_a2 sk_a2\n\nc ak_c sk_c\n")
			if err := rt.reload(context.Background(), path); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				access, secret string
				want           int
			}{
				{"ak_a", "sk_a", 401},   // a's old keys
				{"ak_a2", "sk_a2", 200}, // a's new keys, a's data
				{"ak_b", "sk_b", 401},   // b revoked
				{"ak_c", "sk_c", 404},   // c new, empty
				{"ak_a2", "sk_a", 401},
			} {
				if code, body := call(t, "GET", base+"/aggregates/order/o-1", c.access, c.secret, ""); code != c.want {
					t.Errorf("%s/%s after reload: %d %s, want %d", c.access, c.secret, code, body, c.want)
				}
			}
			if code := <-polled; code != 200 {
				t.Errorf("b's long poll in flight at the reload: %d, want 200", code)
			}
			rt.closing.Wait()
			for _, p := range rt.projects() {
				if p.name == "b" {
					t.Error("b is still a project")
				}
			}
			b.inflight.RLock()
			if !b.closed {
				t.Error("b's store is not closed after its requests in flight")
			}
			b.inflight.RUnlock()
			if strings.HasPrefix(spec, "sqlite:") {
				if _, err := os.Stat(filepath.Join(dir, "es.c.db")); err != nil {
					t.Errorf("c's file: %v", err)
				}
			}

			// A bad file leaves the keys as they were.
			for _, bad := range []struct{ content, want string }{
				{"a ak_a3 sk_a3\nc ak_a3 sk_c\n", ":2: the access key of project c is already used on line 1"},
				{"a ak_a3 sk_a3\n# c\nc ak_c\n", ":3: 2 fields"},
				{"a ak_a3 sk_a3\na ak_x sk_x\n", ":2: project a is already named on line 1"},
				{"a/b ak_a3 sk_a3\n", ":1: bad project name"},
				{"# none\n", ":1: the key file names no project"},
			} {
				writeKeys(t, path, bad.content)
				err := rt.reload(context.Background(), path)
				if err == nil || !strings.Contains(err.Error(), path+bad.want) {
					t.Errorf("reload of %q: %v, want %q", bad.content, err, bad.want)
				}
				if code, _ := call(t, "GET", base+"/aggregates/order/o-1", "ak_a2", "sk_a2", ""); code != 200 {
					t.Errorf("a's keys after a bad reload: %d", code)
				}
				if code, _ := call(t, "GET", base+"/aggregates/order/o-1", "ak_a3", "sk_a3", ""); code != 401 {
					t.Errorf("keys of a refused file: %d", code)
				}
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := rt.reload(context.Background(), path); err == nil {
				t.Error("reload of a missing file succeeded")
			}
			if code, _ := call(t, "GET", base+"/aggregates/order/o-1", "ak_c", "sk_c", ""); code != 404 {
				t.Errorf("c's keys after a failed reload: %d", code)
			}
		})
	}
}

// TestProjectsSIGHUP sends a real SIGHUP to a server process.
func TestProjectsSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	path := writeKeys(t, "", "a ak_a sk_a\n")
	p := startProcess(t, nil, "-addr", "127.0.0.1:0", "-storage", "memory", "-keys", path, "-log-requests=false")
	if code, _ := call(t, "POST", p.base+"/aggregates/order/o-1/events", "ak_a", "sk_a", saveO1); code != 200 {
		t.Fatalf("save: %d", code)
	}
	writeKeys(t, path, "a ak_new sk_new\nb ak_b sk_b\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload", func() string {
		if code, _ := call(t, "GET", p.base+"/aggregates/order/o-1", "ak_new", "sk_new", ""); code != 200 {
			return "a's new keys do not work"
		}
		return ""
	})
	if code, _ := call(t, "GET", p.base+"/aggregates/order/o-1", "ak_a", "sk_a", ""); code != 401 {
		t.Errorf("a's old keys: %d", code)
	}
	if code, _ := call(t, "GET", p.base+"/aggregates/order/o-1", "ak_b", "sk_b", ""); code != 404 {
		t.Errorf("b's keys: %d", code)
	}
	// A bad file is logged and changes nothing; the server keeps serving.
	writeKeys(t, path, "a ak_x\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if code, _ := call(t, "GET", p.base+"/aggregates/order/o-1", "ak_new", "sk_new", ""); code != 200 {
		t.Errorf("a's keys after a bad reload: %d", code)
	}
	if p.cmd.ProcessState != nil {
		t.Fatal("the server exited")
	}
}
