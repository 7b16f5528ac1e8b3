package storagetest_test

import (
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/storagetest"
)

// brokenEnv names the storage variant TestHelperBroken runs the suite on.
const brokenEnv = "STORAGETEST_VARIANT"

// TestHelperBroken is not a test by itself: TestSuiteCatchesBrokenStorages
// runs it in a subprocess with brokenEnv naming a variant, because Run
// reports failures on the *testing.T it is given.
func TestHelperBroken(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		return // not started by TestSuiteCatchesBrokenStorages
	}
	v, ok := variants()[name]
	if !ok {
		t.Fatalf("unknown variant %q", name)
	}
	storagetest.Run(t, func(testing.TB) storage.Storage { return v.open() })
}

var failLine = regexp.MustCompile(`--- FAIL: TestHelperBroken/(\S+)`)

// TestSuiteCatchesBrokenStorages runs the suite on each deliberately broken
// storage and checks that it fails, in the subtests that check the broken
// rule; and that it passes on the healthy memory backend.
func TestSuiteCatchesBrokenStorages(t *testing.T) {
	names := make([]string, 0, len(variants()))
	for name := range variants() {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		v := variants()[name]
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperBroken$", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), brokenEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var failed []string
			for _, m := range failLine.FindAllStringSubmatch(string(out), -1) {
				failed = append(failed, m[1])
			}
			if len(v.wantFail) == 0 {
				if err != nil || len(failed) > 0 {
					t.Fatalf("the suite must pass on the healthy memory backend; it exited with %v, failing %q:\n%s", err, failed, out)
				}
				if !strings.Contains(string(out), "PASS") {
					t.Fatalf("the healthy run did not report PASS:\n%s", out)
				}
				return
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() == 0 {
				t.Fatalf("the suite must fail on storage %q; the subprocess exited with %v:\n%s", name, err, out)
			}
			for _, want := range v.wantFail {
				if !slices.Contains(failed, want) {
					t.Errorf("on storage %q the subtest %s must fail; failing subtests: %q", name, want, failed)
				}
			}
			if t.Failed() {
				t.Logf("subprocess output:\n%s", out)
			} else {
				t.Logf("failing subtests: %q", failed)
			}
		})
	}
}
