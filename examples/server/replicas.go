package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/storage/postgres"
)

// maxReplicas bounds -postgres-replica: each is a pool of connections.
const maxReplicas = 8

// replicaConfig is the part of the command line about PostgreSQL read
// replicas (postgres.Options.Replicas).
type replicaConfig struct {
	urls   []string
	maxLag time.Duration
}

func (c *replicaConfig) flags(fs *flag.FlagSet) {
	fs.Func("postgres-replica", "URL of a PostgreSQL hot standby that serves loads, feed reads and projection queries "+
		"(repeat it for several); writes, projectors and reactions stay on -storage, and a read that the standby "+
		"has not replayed this server's saves for goes to the primary (docs/high-availability.md#read-replicas)",
		func(v string) error {
			if !strings.HasPrefix(v, "postgres://") && !strings.HasPrefix(v, "postgresql://") {
				return errors.New(`want a "postgres://..." URL`)
			}
			if len(c.urls) == maxReplicas {
				return fmt.Errorf("at most %d replicas", maxReplicas)
			}
			c.urls = append(c.urls, v)
			return nil
		})
	fs.DurationVar(&c.maxLag, "postgres-replica-max-lag", postgres.DefaultReplicaMaxLag,
		"a -postgres-replica further behind the primary than this is skipped until it catches up")
}

// check refuses replicas without a PostgreSQL -storage.
func (c *replicaConfig) check(storageSpec string) error {
	if len(c.urls) == 0 {
		return nil
	}
	if !strings.HasPrefix(storageSpec, "postgres://") && !strings.HasPrefix(storageSpec, "postgresql://") {
		return errors.New("-postgres-replica needs a postgres:// -storage")
	}
	if c.maxLag <= 0 {
		return fmt.Errorf("-postgres-replica-max-lag must be positive, got %s", c.maxLag)
	}
	return nil
}

// apply sets the replicas on o and returns it; a nil c sets none.
func (c *replicaConfig) apply(o *postgres.Options) *postgres.Options {
	if c != nil {
		o.Replicas, o.ReplicaMaxLag = c.urls, c.maxLag
	}
	return o
}
