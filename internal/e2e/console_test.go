package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// consoleDir holds the browser driver's pinned install: package.json and
// package-lock.json are in git, node_modules is not.
const consoleDir = "testdata/console"

// TestConsole drives the console in headless Chromium (Debian's chromium,
// through playwright-core installed by npm ci from the lock file) against
// the real server on SQLite, memory and PostgreSQL:
// testdata/console/console.mjs signs in, checks the overview's counts,
// reads an aggregate, sees a save in the live feed within a second,
// creates a projection and sees it catch up with a recorded error,
// executes a reaction, and checks that markup in events and definitions
// never runs; and, with a key file (testdata/console/projects.mjs), that it
// shows the project whose keys it was given. Screenshots go to $EVENTSTORE_CONSOLE_SHOTS, else to
// eventstore-console-shots in the temporary directory (outside the repo).
func TestConsole(t *testing.T) {
	lock, err := os.ReadFile(filepath.Join(consoleDir, "package-lock.json"))
	require.NoError(t, err)
	require.NotContains(t, string(lock), `"resolved"`, "the lock names versions and integrity hashes only, no download addresses")
	for _, f := range []string{"console.mjs", "projects.mjs", "package.json"} {
		_, err := os.ReadFile(filepath.Join(consoleDir, f))
		require.NoError(t, err)
	}
	// What the page is made of, so that a change to it reruns the test.
	for _, f := range []string{"index.html", "app.js", "api.js", "dom.js", "definitions.js", "style.css"} {
		_, err := os.ReadFile(filepath.Join("..", "..", "httpapi", "console", f))
		require.NoError(t, err)
	}
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("chromium is required in CI for the console test (apt-get install chromium): %v", err)
		}
		t.Skipf("no %s: apt-get install chromium to run the console test", chromium)
	}
	node := needTool(t, "node")
	npm := needTool(t, "npm")
	if !playwrightInstalled() {
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = consoleDir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm ci in %s:\n%s", consoleDir, out)
		require.True(t, playwrightInstalled(), "npm ci did not install playwright-core:\n%s", out)
	}
	shots := os.Getenv("EVENTSTORE_CONSOLE_SHOTS")
	if shots == "" {
		shots = filepath.Join(os.TempDir(), "eventstore-console-shots")
	}
	backends := []struct{ name, storage string }{
		{"sqlite", "sqlite:" + filepath.Join(t.TempDir(), "console.db")},
		{"memory", "memory"},
		{"postgres", ""},
	}
	t.Run("keyfile", func(t *testing.T) {
		keys := filepath.Join(t.TempDir(), "keys")
		require.NoError(t, os.WriteFile(keys, []byte("alpha ak-alpha sk-alpha\nbeta ak-beta sk-beta\n"), 0o600))
		s := startServerEnv(t, []string{"EVENTSTORE_ACCESS_KEY=", "EVENTSTORE_SECRET_ACCESS_KEY="},
			"sqlite:"+filepath.Join(t.TempDir(), "projects.db"), "-keys", keys, "-log-requests=false")
		cmd := exec.Command(node, "projects.mjs", s.base, "ak-alpha", "sk-alpha", "ak-beta", "sk-beta", shots)
		cmd.Dir = consoleDir
		cmd.Env = append(os.Environ(), "CHROMIUM="+chromium, "TMPDIR="+browserTemp(t))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s\nserver log:\n%s", out, tail(s.logs.String()))
		require.Contains(t, string(out), "all checks passed")
	})
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			storage := b.storage
			if b.name == "postgres" {
				storage = freshDatabase(t)
			}
			s := startServer(t, storage, "-outbound-allow", "127.0.0.1", "-log-requests=false")
			cmd := exec.Command(node, "console.mjs", s.base, accessKey, secretKey, shots, b.name)
			cmd.Dir = consoleDir
			cmd.Env = append(os.Environ(), "CHROMIUM="+chromium, "TMPDIR="+browserTemp(t))
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s\nserver log:\n%s", out, tail(s.logs.String()))
			require.Contains(t, string(out), "all checks passed")
			require.Contains(t, string(out), " 0 failed")
			t.Logf("%s\nscreenshots in %s", out, shots)
		})
	}
}

// playwrightInstalled reports whether node_modules holds the pinned
// playwright-core.
func playwrightInstalled() bool {
	b, err := os.ReadFile(filepath.Join(consoleDir, "node_modules", "playwright-core", "package.json"))
	if err != nil {
		return false
	}
	var pkg struct {
		Version string `json:"version"`
	}
	lock, err := os.ReadFile(filepath.Join(consoleDir, "package.json"))
	if err != nil || json.Unmarshal(b, &pkg) != nil {
		return false
	}
	return strings.Contains(string(lock), `"playwright-core": "`+pkg.Version+`"`)
}

// browserTemp returns a directory for the browser script's temporary
// files (TMPDIR: the browser profile it makes each run), removed when the
// test ends; a file the exiting browser still writes does not fail the
// test, as t.TempDir's check would.
func browserTemp(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "eventstore-console-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
