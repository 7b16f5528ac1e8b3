// Package e2e holds end-to-end tests of the standalone server
// (examples/server): it builds the real binary, runs it against real storage,
// kills it and restarts it.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	accessKey = "e2e-access"
	secretKey = "e2e-secret"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// TestMain runs the tests, then removes the server binary they built (39
// MB a run, left in the temporary directory before).
func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		_ = os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

// serverBinary builds examples/server once per test binary.
func serverBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		// The go test cache keys a result on the files a test opens; the
		// server is built in a subprocess, so read its sources here to make
		// a change to any of them invalidate a cached pass.
		if buildErr = readSources("../.."); buildErr != nil {
			return
		}
		dir, err := os.MkdirTemp("", "eventstore-e2e")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "server")
		out, err := exec.Command("go", "build", "-o", binary, "github.com/eventkit-go/eventstore/examples/server").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binary
}

// readSources reads every non-test Go file of the module, and go.mod and
// go.sum.
func readSources(root string) error {
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && (strings.HasPrefix(name, ".") && path != root || name == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") || name == "go.mod" || name == "go.sum") {
			_, err = os.ReadFile(path)
		}
		return err
	})
}

// server is a running examples/server process.
type server struct {
	t    *testing.T
	cmd  *exec.Cmd
	base string
	logs *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

var listening = regexp.MustCompile(`listening on (?:http://)?([0-9.]+:[0-9]+)`)

// startServer runs the server with -storage storageArg and the extra
// flags on a free port and waits until it listens.
func startServer(t *testing.T, storageArg string, extra ...string) *server {
	t.Helper()
	return startServerEnv(t, []string{"EVENTSTORE_ACCESS_KEY=" + accessKey, "EVENTSTORE_SECRET_ACCESS_KEY=" + secretKey}, storageArg, extra...)
}

// startServerEnv is startServer with env added to the process's
// environment instead of the test key pair.
func startServerEnv(t *testing.T, env []string, storageArg string, extra ...string) *server {
	t.Helper()
	cmd := exec.Command(serverBinary(t), append([]string{"-addr", "127.0.0.1:0", "-storage", storageArg}, extra...)...)
	cmd.Env = append(os.Environ(), env...)
	logs := &syncBuffer{}
	pr, pw := io.Pipe()
	cmd.Stdout = io.MultiWriter(logs, pw)
	cmd.Stderr = io.MultiWriter(logs, pw)
	require.NoError(t, cmd.Start())
	s := &server{t: t, cmd: cmd, logs: logs, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait(); pw.Close() }()
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case a := <-addr:
		s.base = "http://" + a
	case err := <-s.done:
		t.Fatalf("server exited before listening: %v\n%s", err, logs)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("server did not listen within 30s\n%s", logs)
	}
	t.Cleanup(func() { s.kill() })
	return s
}

// kill sends SIGKILL and waits for the process to end.
func (s *server) kill() {
	if s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.t.Errorf("server did not die after SIGKILL")
	}
}

var client = &http.Client{Timeout: 10 * time.Second}

// do sends a request with credentials and returns the status and body.
func (s *server) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Service-Access-Key", accessKey)
	req.Header.Set("Service-Secret-Access-Key", secretKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// mustDo is do that fails the test unless the status is want.
func (s *server) mustDo(method, path string, body any, want int) []byte {
	s.t.Helper()
	status, b, err := s.do(context.Background(), method, path, body)
	require.NoError(s.t, err, "%s %s", method, path)
	require.Equal(s.t, want, status, "%s %s: %s\nserver log:\n%s", method, path, b, tail(s.logs.String()))
	return b
}

func tail(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
