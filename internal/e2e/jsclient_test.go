package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJavaScriptClient drives the server with a real JavaScript client
// (Node's fetch, testdata/client.mjs) through the five endpoints.
func TestJavaScriptClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is required in CI for the JavaScript client test")
		}
		t.Skip("node not found: install Node.js 18 or later to run the JavaScript client test")
	}
	s := startServer(t, "sqlite:"+filepath.Join(t.TempDir(), "js.db"))
	out, err := exec.Command(node, "testdata/client.mjs", s.base, accessKey, secretKey).CombinedOutput()
	require.NoError(t, err, "%s\nserver log:\n%s", out, tail(s.logs.String()))
	require.Contains(t, string(out), "all checks passed")
}
