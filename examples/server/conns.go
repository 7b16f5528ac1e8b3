package main

import (
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxRejecting bounds the connections being answered 503 at once; past
// it, connections over the limit are closed without an answer.
const maxRejecting = 256

// busyBody is the body of the answer to a connection over the limit.
const busyBody = `{"code":"unavailable","message":"too many connections, retry in 5 seconds"}` + "\n"

// busyResponse is the whole answer to a connection over the limit.
var busyResponse = "HTTP/1.1 503 Service Unavailable\r\n" +
	"Content-Type: application/json\r\n" +
	"Retry-After: 5\r\n" +
	"Connection: close\r\n" +
	"Content-Length: " + strconv.Itoa(len(busyBody)) + "\r\n" +
	"\r\n" + busyBody

// limitListener accepts at most max connections at once. A connection
// beyond that is answered 503 with Retry-After and closed, so that the
// server never holds more than max connections (and their memory and file
// descriptors), and a client learns why it is refused.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	rejecting chan struct{}
	open      atomic.Int64
	rejected  atomic.Int64
}

func newLimitListener(l net.Listener, max int) *limitListener {
	return &limitListener{Listener: l, slots: make(chan struct{}, max), rejecting: make(chan struct{}, maxRejecting)}
}

// Accept returns the next connection within the limit.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			l.open.Add(1)
			return &limitConn{Conn: c, l: l}, nil
		default:
			l.rejected.Add(1)
			l.reject(c)
		}
	}
}

// reject answers c 503 and closes it, without blocking Accept.
func (l *limitListener) reject(c net.Conn) {
	select {
	case l.rejecting <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-l.rejecting }()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_, err := io.WriteString(c, busyResponse)
		if tc, ok := c.(*net.TCPConn); ok && err == nil {
			// Read what the client sent before closing, so that the
			// kernel does not reset the connection before it reads the
			// answer.
			_ = tc.CloseWrite()
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
		}
		_ = c.Close()
	}()
}

// limitConn gives its slot back when closed.
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		<-c.l.slots
	})
	return err
}
