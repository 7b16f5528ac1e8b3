package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// patroniNode is one Patroni process of a test cluster and the
// PostgreSQL server it runs.
type patroniNode struct {
	name     string
	rest, pg int // ports of its REST API and of PostgreSQL
	data     string
	cmd      *exec.Cmd
	logFile  string
	exited   chan struct{}
}

// logs returns the tail of the node's Patroni log.
func (n *patroniNode) logs() string { return tailFile(n.logFile) }

// tailFile returns the tail of the file at path.
func tailFile(path string) string {
	b, _ := os.ReadFile(path)
	return tail(string(b))
}

// TestPatroniFailover lets Patroni (with etcd, Debian's patroni and
// etcd-server packages) do the failover: a two-node cluster in
// synchronous mode under load, the leader's Patroni and PostgreSQL killed
// (SIGKILL, immediate stop), and Patroni promotes the synchronous replica
// once the leader key expires (ttl 20 s). The checks are
// TestFailoverCleanCrash's.
func TestPatroniFailover(t *testing.T) {
	for _, bin := range []string{"patroni", "etcd"} {
		if _, err := exec.LookPath(bin); err != nil {
			unavailable(t, "%s is not installed (Debian's patroni and etcd-server packages; .ci/run installs them)", bin)
		}
	}
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	pgUser, err := user.Lookup("postgres")
	if len(bins) == 0 || err != nil || os.Geteuid() != 0 {
		unavailable(t, "a Patroni cluster needs root, the postgres user and Debian's postgresql package")
	}
	uid, _ := strconv.Atoi(pgUser.Uid)
	gid, _ := strconv.Atoi(pgUser.Gid)
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	binDir := filepath.Dir(bins[len(bins)-1])
	base, err := os.MkdirTemp("", "eventstore-patroni")
	require.NoError(t, err)
	require.NoError(t, os.Chown(base, uid, gid))

	// Each process logs to a file: PostgreSQL, started by Patroni,
	// inherits it, and a pipe would hold cmd.Wait until PostgreSQL exits.
	start := func(name string, args ...string) (*exec.Cmd, string, chan struct{}) {
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = cred
		cmd.Dir = base
		logFile := filepath.Join(base, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano()))
		f, err := os.Create(logFile)
		require.NoError(t, err)
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		return cmd, logFile, exited
	}
	client, peer := freePort(t), freePort(t)
	etcd, etcdLogs, etcdExited := start("etcd", "--name", "e2e", "--data-dir", filepath.Join(base, "etcd"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", client),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", client),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-cluster", fmt.Sprintf("e2e=http://127.0.0.1:%d", peer))
	var nodes []*patroniNode
	t.Cleanup(func() {
		for _, n := range nodes {
			if n.cmd != nil {
				_ = n.cmd.Process.Kill()
				<-n.exited
			}
			_ = exec.Command("runuser", "-u", "postgres", "--", filepath.Join(binDir, "pg_ctl"), "-D", n.data, "-m", "immediate", "-w", "stop").Run()
			if t.Failed() {
				t.Logf("patroni %s:\n%s", n.name, n.logs())
			}
		}
		_ = etcd.Process.Kill()
		<-etcdExited
		if t.Failed() {
			t.Logf("etcd:\n%s", tailFile(etcdLogs))
		}
		os.RemoveAll(base)
	})
	waitPort(t, client, etcdExited)

	for _, name := range []string{"n1", "n2"} {
		n := &patroniNode{name: name, rest: freePort(t), pg: freePort(t), data: filepath.Join(base, name)}
		conf := fmt.Sprintf(`scope: e2e
name: %[1]s
restapi:
  listen: 127.0.0.1:%[2]d
  connect_address: 127.0.0.1:%[2]d
etcd3:
  hosts: 127.0.0.1:%[3]d
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 1
    retry_timeout: 5
    synchronous_mode: true
    postgresql:
      use_pg_rewind: false
      parameters:
        wal_keep_size: 64MB
        fsync: "off"
  initdb:
  - auth: trust
postgresql:
  listen: 127.0.0.1:%[4]d
  connect_address: 127.0.0.1:%[4]d
  data_dir: %[5]s
  bin_dir: %[6]s
  pgpass: %[7]s
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: %[8]s
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
`, name, n.rest, client, n.pg, n.data, binDir, filepath.Join(base, name+".pgpass"), base)
		file := filepath.Join(base, name+".yml")
		require.NoError(t, os.WriteFile(file, []byte(conf), 0o644))
		n.cmd, n.logFile, n.exited = start("patroni", file)
		nodes = append(nodes, n)
		if name == "n1" {
			waitREST(t, n, "/primary", 5*time.Minute) // bootstrapped, leader (initdb took 2 min at a load of 55)
		}
	}
	waitREST(t, nodes[1], "/sync", 5*time.Minute) // the synchronous replica
	leader, replica := nodes[0], nodes[1]
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", leader.pg, replica.pg)

	crashUnderLoad(t, url, func() (crashed, promoted time.Time) {
		crashed = time.Now()
		_ = leader.cmd.Process.Kill()
		<-leader.exited
		leader.cmd = nil
		out, err := exec.Command("runuser", "-u", "postgres", "--", filepath.Join(binDir, "pg_ctl"), "-D", leader.data, "-m", "immediate", "-w", "stop").CombinedOutput()
		require.NoError(t, err, "%s", out)
		waitREST(t, replica, "/primary", 90*time.Second)
		promoted = time.Now()
		t.Logf("Patroni promoted %s %.2fs after the leader was killed", replica.name, promoted.Sub(crashed).Seconds())
		return crashed, promoted
	})
}

// waitPort waits until something listens on port, or exited is closed.
func waitPort(t *testing.T, port int, exited chan struct{}) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			t.Fatalf("the process to listen on %d exited", port)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %d after 60 s", port)
		}
	}
}

// waitREST waits until the node's REST API answers 200 on path (its role:
// /primary, /replica, /sync).
func waitREST(t *testing.T, n *patroniNode, path string, within time.Duration) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", n.rest, path))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-n.exited:
			t.Fatalf("patroni %s exited:\n%s", n.name, n.logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("patroni %s: GET %s not 200 within %v:\n%s", n.name, path, within, n.logs())
		}
	}
}
