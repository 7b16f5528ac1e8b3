// Package upgrade holds what the storage backends share to run schema
// migrations beside live processes (docs/upgrades.md): the kinds of
// migration, the record of a process and the message of a refusal.
package upgrade

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/eventkit-go/eventstore/storage"
)

// Kind says whether processes of the schema version before a migration
// can keep running beside it.
type Kind int

const (
	// Expand is a migration that processes of the version before work
	// beside: it adds (a table, a nullable column, an index) or drops
	// what they do not need for correct results. It runs whatever is live.
	Expand Kind = iota + 1
	// Contract is a migration that processes of an older version cannot
	// work beside: their statements would fail or store wrong data. It
	// refuses to run while a live process of an older version is recorded.
	Contract
)

// String returns "expand" or "contract".
func (k Kind) String() string {
	switch k {
	case Expand:
		return "expand"
	case Contract:
		return "contract"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Process is the record of a process that has a store open: where it
// runs, the schema version it runs against and when it last said so.
type Process struct {
	Host     string
	PID      int
	Started  time.Time
	Version  int
	LastSeen time.Time
}

// self is this process's host, pid and start (the time the package was
// initialised, which is before any store is opened); it never changes.
var self = Process{Host: hostname(), PID: os.Getpid(), Started: time.Now().UTC()}

// Self returns the record of this process at version.
func Self(version int) Process {
	p := self
	p.Version = version
	return p
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown"
	}
	return h
}

// Refuse returns the error of migration version, of kind Contract, which
// cannot run while the processes live (at most a few are named; total is
// how many there are); expiry says when a process that stopped without
// closing its store stops counting. It wraps storage.ErrSchemaVersion.
func Refuse(version int, live []Process, total int, expiry string) error {
	var b strings.Builder
	for i, p := range live {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "host %s pid %d (schema version %d, started %s, last seen %s)",
			p.Host, p.PID, p.Version, p.Started.UTC().Format(time.RFC3339), p.LastSeen.UTC().Format(time.RFC3339))
	}
	if total > len(live) {
		fmt.Fprintf(&b, "; and %d more", total-len(live))
	}
	return fmt.Errorf("schema migration %d cannot run beside processes of an older schema version, and %d %s live: %s; "+
		"stop or upgrade %s first (one that stopped without closing its store counts as live %s), "+
		"then run the migration again: %w",
		version, total, plural(total, "is", "are"), b.String(), plural(total, "it", "them"), expiry, storage.ErrSchemaVersion)
}

// Older returns the error of a store at version, older than this
// program's latest, opened without migrating. It wraps
// storage.ErrSchemaVersion.
func Older(version, latest int) error {
	if version == 0 {
		return fmt.Errorf("the store has no schema yet (this program's is version %d), and migrations are turned off: "+
			"run the migrations first (the server's -migrate-only): %w", latest, storage.ErrSchemaVersion)
	}
	return fmt.Errorf("the schema is at version %d, older than this program's %d, and migrations are turned off: "+
		"run the migrations first (the server's -migrate-only): %w", version, latest, storage.ErrSchemaVersion)
}

// Newer returns the error of a store at version, newer than this
// program's latest. It wraps storage.ErrSchemaVersion.
func Newer(version, latest int) error {
	return fmt.Errorf("the schema is at version %d, newer than this program knows (%d): upgrade this program: %w",
		version, latest, storage.ErrSchemaVersion)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
