//go:build !unix

package upgrade

// Running reports whether p, recorded on this host, is still running.
// Without a way to ask the system, a record of this host counts as
// running until its process deletes it.
func (p Process) Running() bool {
	return p.Host == self.Host
}
