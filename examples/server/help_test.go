package main

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain runs main itself when asked to by a test that needs the real
// process: its output and exit code.
func TestMain(m *testing.M) {
	if os.Getenv("EVENTSTORE_SERVER_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMainProcess runs main in a child process with args and returns its
// combined output and exit code.
func runMainProcess(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "EVENTSTORE_SERVER_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return string(out), 0
}

func TestHelpExitsZero(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		out, code := runMainProcess(t, arg)
		if code != 0 {
			t.Errorf("server %s exits %d, want 0; output:\n%s", arg, code, out)
		}
		if !strings.Contains(out, "Usage of server") || !strings.Contains(out, "-storage") || strings.Contains(out, "help requested") {
			t.Errorf("server %s must print the usage and nothing else; output:\n%s", arg, out)
		}
	}
	out, code := runMainProcess(t, "-no-such-flag")
	if code == 0 || !strings.Contains(out, "no-such-flag") {
		t.Errorf("an unknown flag must fail, naming it: exit %d, output:\n%s", code, out)
	}
}
