//go:build !linux

package postgres

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not known.
func setUserTimeout(_, _ string, _ syscall.RawConn) error { return nil }
