package typed_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/eventkit-go/eventstore/storage/postgres"
	"github.com/eventkit-go/eventstore/typed"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	childSchemaEnv = "TYPED_TEST_CHILD_SCHEMA"
	childWriterEnv = "TYPED_TEST_CHILD_WRITER"
	processUpdates = 40
)

// TestUpdateAcrossProcesses: Updates of one aggregate from three OS
// processes on one PostgreSQL schema, started together, conflict and
// retry; every deposit is saved once and the versions have no gaps.
func TestUpdateAcrossProcesses(t *testing.T) {
	if schema := os.Getenv(childSchemaEnv); schema != "" {
		updateAsChild(t, schema)
		return
	}
	stores, schema := openPostgresSchema(t, 1)
	const children = 2
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Scanner
	}
	var procs []child
	for w := 1; w <= children; w++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestUpdateAcrossProcesses$", "-test.count=1")
		cmd.Env = append(os.Environ(), childSchemaEnv+"="+schema, childWriterEnv+"="+strconv.Itoa(w))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		procs = append(procs, child{cmd, stdin, bufio.NewScanner(stdout)})
	}
	for _, p := range procs {
		require.Equal(t, "ready", waitLine(t, p.out, "ready"), "the child opened the store")
	}
	// Go: every process updates at once.
	var parentCalls atomic.Int64
	reg := accountRegistry(t)
	repo := typed.NewRepository(typed.NewStore(stores[0], reg), "account", (*account).Apply, &typed.RepositoryOptions{Retries: 1000})
	for _, p := range procs {
		_, err := io.WriteString(p.stdin, "go\n")
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for range processUpdates {
			_, err := repo.Update(context.Background(), "shared", func(a *account) ([]any, error) {
				parentCalls.Add(1)
				return deposit(0)(a)
			})
			if err != nil {
				t.Error(err)
				return
			}
		}
	})
	calls := int64(0)
	for _, p := range procs {
		line := waitLine(t, p.out, "calls ")
		n, err := strconv.ParseInt(strings.TrimPrefix(line, "calls "), 10, 64)
		require.NoError(t, err, line)
		calls += n
		require.NoError(t, p.cmd.Wait(), "the child passed")
	}
	wg.Wait()
	calls += parentCalls.Load()

	a, err := repo.Load(context.Background(), "shared")
	require.NoError(t, err)
	assert.Equal(t, (children+1)*processUpdates, a.State.Deposits)
	assert.Equal(t, int64((children+1)*processUpdates), a.Version)
	for w := 0; w <= children; w++ {
		assert.Equal(t, processUpdates, a.State.Writers[w], "writer %d", w)
	}
	var version int64
	for ev, err := range typed.NewStore(stores[0], reg).Load(context.Background(), "account", "shared") {
		require.NoError(t, err)
		version++
		require.Equal(t, version, ev.Version, "versions without gaps")
	}
	assert.Greater(t, calls, int64((children+1)*processUpdates), "some updates conflicted and decided again")
	t.Logf("%d decisions for %d updates", calls, (children+1)*processUpdates)
}

// updateAsChild is a child process of TestUpdateAcrossProcesses: it opens
// the schema, says ready, waits for go, updates, and prints its count of
// decisions.
func updateAsChild(t *testing.T, schema string) {
	writer, err := strconv.Atoi(os.Getenv(childWriterEnv))
	require.NoError(t, err)
	s, err := postgres.OpenURL(context.Background(), postgresURL(), &postgres.Options{Schema: schema})
	require.NoError(t, err)
	st := mustStore(t, s)
	repo := typed.NewRepository(typed.NewStore(st, accountRegistry(t)), "account", (*account).Apply, &typed.RepositoryOptions{Retries: 1000})
	fmt.Println("ready")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "go\n", line)
	var calls int64
	for range processUpdates {
		_, err := repo.Update(context.Background(), "shared", func(a *account) ([]any, error) {
			calls++
			return deposit(writer)(a)
		})
		require.NoError(t, err)
	}
	fmt.Println("calls", calls)
}

// waitLine returns the first line of out that starts with prefix.
func waitLine(t *testing.T, out *bufio.Scanner, prefix string) string {
	t.Helper()
	for out.Scan() {
		if strings.HasPrefix(out.Text(), prefix) {
			return out.Text()
		}
	}
	t.Fatalf("the child ended without a line %q: %v", prefix, out.Err())
	return ""
}
