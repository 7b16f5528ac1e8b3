package main

import (
	"io"
	"strings"
	"testing"

	"github.com/eventkit-go/eventstore/storage/postgres"
)

func TestReplicaFlags(t *testing.T) {
	getenv := func(string) string { return "" }
	pg := "postgres://u@db1/events"
	c, err := parseConfig([]string{"-storage", pg, "-postgres-replica", "postgres://u@db2/events",
		"-postgres-replica", "postgresql://u@db3/events", "-postgres-replica-max-lag", "2s"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := c.replicas.apply(&postgres.Options{Schema: "s"})
	if len(o.Replicas) != 2 || o.Replicas[1] != "postgresql://u@db3/events" || o.ReplicaMaxLag.String() != "2s" || o.Schema != "s" {
		t.Errorf("options %+v", o)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-storage", "sqlite:x.db", "-postgres-replica", "postgres://u@db2/events"}, "needs a postgres:// -storage"},
		{[]string{"-storage", pg, "-postgres-replica", "db2"}, `want a "postgres://..." URL`},
		{[]string{"-storage", pg, "-postgres-replica", "postgres://u@db2/e", "-postgres-replica-max-lag", "0s"}, "must be positive"},
	} {
		if _, err := parseConfig(tc.args, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
	out, _ := runMainProcess(t, "-h")
	for _, f := range []string{"-postgres-replica ", "-postgres-replica-max-lag"} {
		if !strings.Contains(out, f) {
			t.Errorf("-h does not list %s", f)
		}
	}
}
