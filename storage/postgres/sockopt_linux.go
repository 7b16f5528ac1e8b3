package postgres

import (
	"syscall"
)

// tcpUserTimeout is Linux's TCP_USER_TIMEOUT socket option (linux/tcp.h),
// which package syscall does not name.
const tcpUserTimeout = 0x12

// setUserTimeout sets TCP_USER_TIMEOUT (TCPUserTimeout) on a socket being
// dialled: data not acknowledged for that long ends the connection.
func setUserTimeout(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(TCPUserTimeout.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}
