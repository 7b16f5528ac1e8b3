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

// jsClientDir holds the official client's pinned install: package.json and
// package-lock.json (versions and integrity hashes only) are in git,
// node_modules is not.
const jsClientDir = "testdata/jsclient"

// TestOfficialJavaScriptClient installs @serialized/serialized-client
// 4.12.0 with npm into testdata/jsclient (npm ci, from the lock file) and
// drives every method of its aggregates, projections and feeds clients
// that the server implements against the real server binary
// (testdata/jsclient/official.mjs, which asserts each result and documents
// the client's own bugs with their workarounds).
func TestOfficialJavaScriptClient(t *testing.T) {
	lock, err := os.ReadFile(filepath.Join(jsClientDir, "package-lock.json"))
	require.NoError(t, err)
	require.NotContains(t, string(lock), `"resolved"`, "the lock names versions and integrity hashes only, no download addresses")
	// Read what node runs, so that a change to it invalidates a cached pass.
	for _, f := range []string{"official.mjs", "package.json"} {
		_, err := os.ReadFile(filepath.Join(jsClientDir, f))
		require.NoError(t, err)
	}
	node := needTool(t, "node")
	npm := needTool(t, "npm")
	if !clientInstalled() {
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
		cmd.Dir = jsClientDir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "npm ci in %s:\n%s", jsClientDir, out)
		require.True(t, clientInstalled(), "npm ci did not install @serialized/serialized-client 4.12.0:\n%s", out)
	}
	s := startServer(t, "sqlite:"+filepath.Join(t.TempDir(), "official.db"))
	cmd := exec.Command(node, "official.mjs", s.base, accessKey, secretKey)
	cmd.Dir = jsClientDir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s\nserver log:\n%s", out, tail(s.logs.String()))
	require.Contains(t, string(out), "all checks passed")
	require.Contains(t, string(out), " 0 failed")
	t.Logf("%s", out)
}

// needTool returns the path of a program the test needs; without it the
// test fails in CI (CI set) and is skipped elsewhere.
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required in CI for the official JavaScript client test (apt-get install nodejs npm)", name)
		}
		t.Skipf("%s not found: install Node.js 18 or later and npm to run the official JavaScript client test", name)
	}
	return p
}

// clientInstalled reports whether node_modules holds the pinned client.
func clientInstalled() bool {
	b, err := os.ReadFile(filepath.Join(jsClientDir, "node_modules", "@serialized", "serialized-client", "package.json"))
	if err != nil {
		return false
	}
	var pkg struct {
		Version string `json:"version"`
	}
	return json.Unmarshal(b, &pkg) == nil && strings.TrimSpace(pkg.Version) == "4.12.0"
}
