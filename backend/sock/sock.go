// Package sock reads and writes sockets with raw system calls, outside the
// Go scheduler's syscall hand-off.
//
// A net.Conn's Read and Write enter the runtime's syscall state. Each entry
// wakes the runtime's monitor thread (sysmon) when it is parked because the
// process was idle, and a woken sysmon polls every 20 µs for at least a
// millisecond. A proxy on a busy machine goes idle between statements
// thousands of times a second, so sysmon never backs off: on the bench VM
// it took 19 % of keyshard's CPU and a context switch per poll, on the two
// cores that MariaDB and the clients also need (bench/RESULTS.md).
//
// Reads and writes of a non-blocking socket never block: they return
// EAGAIN instead, and the connection waits for readiness in the network
// poller as net.Conn does, with its deadlines. So they need no hand-off, and
// sock issues them with syscall.RawSyscall through the socket's RawConn.
package sock

import (
	"io"
	"net"
	"os"
	"syscall"
)

// maxRW caps one system call, as internal/poll does.
const maxRW = 1 << 30

// Conn is a net.Conn whose Read and Write are raw system calls.
type Conn struct {
	net.Conn
	rc syscall.RawConn
}

// Wrap returns c reading and writing with raw system calls, or c itself
// when it has no file descriptor to use (a pipe in a test, a TLS conn).
func Wrap(c net.Conn) net.Conn {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return c
	}
	switch c.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return c
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return c
	}
	return &Conn{Conn: c, rc: rc}
}

// Unwrap returns the connection Wrap was given.
func (c *Conn) Unwrap() net.Conn { return c.Conn }

// Read reads like net.Conn.Read.
func (c *Conn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	if len(b) > maxRW {
		b = b[:maxRW]
	}
	var n int
	var errno syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			n, errno = sysRead(fd, b)
			switch errno {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false
			}
			return true
		}
	})
	switch {
	case err != nil:
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of b, like net.Conn.Write.
func (c *Conn) Write(b []byte) (int, error) {
	var done int
	var errno syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for done < len(b) {
			chunk := b[done:]
			if len(chunk) > maxRW {
				chunk = chunk[:maxRW]
			}
			n, e := sysWrite(fd, chunk)
			switch e {
			case 0:
				done += n
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return done, c.opError("write", err)
	case errno != 0:
		return done, c.opError("write", os.NewSyscallError("write", errno))
	}
	return done, nil
}

// CloseWrite shuts the writing side, when the connection has one.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// opError makes err read as net.Conn's own errors do ("read tcp A->B:
// i/o timeout"): RawConn's come as a *net.OpError of op "raw-read" or
// "raw-write", which gets op instead; an errno gets wrapped.
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		e := *oe
		e.Op = op
		return &e
	}
	e := &net.OpError{Op: op, Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	if e.Source != nil {
		e.Net = e.Source.Network()
	}
	return e
}
