package storagetest_test

import (
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/eventkit-go/eventstore/storage"
	"github.com/eventkit-go/eventstore/storage/memory"
	"github.com/eventkit-go/eventstore/storage/storagetest"
)

// keptOpen is a storage whose Close does nothing, so that one storage can
// stand for several spaces.
type keptOpen struct{ storage.Storage }

func (keptOpen) Close() error { return nil }

// spacesVariants are the ways of opening spaces TestHelperSpaces runs
// RunSpaces on: the healthy one (a memory storage per name) and broken
// ones, each of which must fail it.
var spacesVariants = map[string]func(testing.TB) storagetest.Spaces{
	"healthy": func(testing.TB) storagetest.Spaces {
		return storagetest.Spaces{Open: func(testing.TB, string) storage.Storage { return memory.New() }}
	},
	// shared ignores the name: every space is one storage, as a backend
	// that forgot to put the name into its file path or schema would be.
	"shared": func(tb testing.TB) storagetest.Spaces {
		one := memory.New()
		tb.Cleanup(func() { _ = one.Close() })
		return storagetest.Spaces{Open: func(testing.TB, string) storage.Storage { return keptOpen{one} }}
	},
	// dropKeepsData names its spaces apart but its Drop removes nothing,
	// so a dropped name opened again finds its old data.
	"dropKeepsData": func(tb testing.TB) storagetest.Spaces {
		var mu sync.Mutex
		byName := map[string]storage.Storage{}
		return storagetest.Spaces{Open: func(_ testing.TB, name string) storage.Storage {
			mu.Lock()
			defer mu.Unlock()
			if byName[name] == nil {
				byName[name] = memory.New()
			}
			return keptOpen{byName[name]}
		}, Drop: func(testing.TB, string) {}}
	},
}

const spacesEnv = "STORAGETEST_SPACES_VARIANT"

// TestHelperSpaces is run by TestSpacesCatchesSharedSpaces in a subprocess.
func TestHelperSpaces(t *testing.T) {
	name := os.Getenv(spacesEnv)
	if name == "" {
		return
	}
	storagetest.RunSpaces(t, spacesVariants[name])
}

// TestSpacesCatchesSharedSpaces checks that RunSpaces passes on separate
// spaces and fails on spaces that share their data or survive a drop.
func TestSpacesCatchesSharedSpaces(t *testing.T) {
	want := map[string][]string{
		"healthy":       nil,
		"shared":        {"SpacesSameIDsStaySeparate", "SpacesProjectionsStaySeparate", "SpacesDeletionsStaySeparate", "SpacesDropLeavesOthers"},
		"dropKeepsData": {"SpacesDropLeavesOthers"},
	}
	for name, wantFail := range want {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSpaces$", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), spacesEnv+"="+name)
			out, err := cmd.CombinedOutput()
			if len(wantFail) == 0 {
				if err != nil {
					t.Fatalf("RunSpaces must pass on separate spaces; it exited with %v:\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("RunSpaces must fail on variant %s; it passed:\n%s", name, out)
			}
			for _, sub := range wantFail {
				if !strings.Contains(string(out), "--- FAIL: TestHelperSpaces/"+sub) {
					t.Errorf("variant %s: subtest %s must fail:\n%s", name, sub, out)
				}
			}
		})
	}
}
