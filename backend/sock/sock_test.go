package sock

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pair returns a wrapped client connection and the server's side of it.
func pair(t *testing.T, network, addr string) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		acc <- c
	}()
	c, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := <-acc
	if srv == nil {
		t.FailNow()
	}
	w := Wrap(c)
	if _, ok := w.(*Conn); !ok {
		t.Fatalf("Wrap(%T) = %T, want *sock.Conn", c, w)
	}
	t.Cleanup(func() { w.Close(); srv.Close() })
	return w, srv
}

func TestWrapKeepsConnsWithoutDescriptor(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if w := Wrap(a); w != a {
		t.Fatalf("Wrap(net.Pipe) = %T, want the pipe itself", w)
	}
}

// A large write to a peer that reads slowly goes through EAGAIN and the
// poller's wait for writability many times; every byte arrives in order.
func TestRoundTripLarge(t *testing.T) {
	for _, nw := range []struct{ network, addr string }{
		{"tcp", "127.0.0.1:0"},
		{"unix", filepath.Join(t.TempDir(), "s")},
	} {
		t.Run(nw.network, func(t *testing.T) {
			c, srv := pair(t, nw.network, nw.addr)
			data := bytes.Repeat([]byte("0123456789abcdef"), 1<<19) // 8 MiB
			var got bytes.Buffer
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 1000)
				for got.Len() < len(data) {
					n, err := srv.Read(buf)
					got.Write(buf[:n])
					if err != nil {
						t.Error(err)
						srv.Close() // unblocks the writer
						return
					}
					if got.Len() < 1<<16 {
						time.Sleep(time.Millisecond) // slow at first: the writer fills the buffers
					}
				}
			}()
			n, err := c.Write(data)
			if err != nil || n != len(data) {
				t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(data))
			}
			wg.Wait()
			if !bytes.Equal(got.Bytes(), data) {
				t.Fatalf("received %d bytes, not the %d sent in order", got.Len(), len(data))
			}
			// And back: the wrapped side reads what the peer sends.
			if _, err := srv.Write([]byte("pong")); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 16)
			n, err = io.ReadAtLeast(c, buf, 4)
			if err != nil || string(buf[:n]) != "pong" {
				t.Fatalf("Read = %q, %v", buf[:n], err)
			}
		})
	}
}

func TestReadDeadline(t *testing.T) {
	c, srv := pair(t, "tcp", "127.0.0.1:0")
	if err := c.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n, err := c.Read(make([]byte, 8))
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past the deadline = %d, %v; want a timeout", n, err)
	}
	want := fmt.Sprintf("read tcp %s->%s: i/o timeout", c.LocalAddr(), c.RemoteAddr())
	if err.Error() != want {
		t.Fatalf("error %q, want %q as net.Conn's", err, want)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Fatalf("Read returned after %v, before its deadline", time.Since(start))
	}
	// The deadline cleared, the connection still works.
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	if n, err := io.ReadAtLeast(c, b, 4); err != nil || string(b[:n]) != "late" {
		t.Fatalf("Read after the deadline cleared = %q, %v", b[:n], err)
	}
}

// A write that fills the socket's buffers and then passes its deadline
// reports what it wrote and a timeout, as net.Conn's does.
func TestWriteDeadlinePartial(t *testing.T) {
	c, _ := pair(t, "tcp", "127.0.0.1:0") // the peer never reads
	if err := c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := c.Write(make([]byte, 64<<20))
	if n <= 0 || n >= 64<<20 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past its deadline = %d, %v; want part of it and a timeout", n, err)
	}
	if want := fmt.Sprintf("write tcp %s->%s: i/o timeout", c.LocalAddr(), c.RemoteAddr()); err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	c, _ := pair(t, "tcp", "127.0.0.1:0")
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read on a closed conn = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still blocked 5 s after Close")
	}
	_, err := c.Write([]byte("x"))
	if !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write on a closed conn = %v, want net.ErrClosed", err)
	}
	if want := fmt.Sprintf("write tcp %s->%s: use of closed network connection", c.LocalAddr(), c.RemoteAddr()); err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

func TestEOFAndCloseWrite(t *testing.T) {
	c, srv := pair(t, "tcp", "127.0.0.1:0")
	// Our CloseWrite reaches the peer as EOF after the data.
	if _, err := c.Write([]byte("last")); err != nil {
		t.Fatal(err)
	}
	if err := c.(*Conn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(srv)
	if err != nil || string(b) != "last" {
		t.Fatalf("peer read %q, %v; want \"last\" then EOF", b, err)
	}
	// The peer's close reaches us as io.EOF itself, as from net.Conn.
	srv.Close()
	if n, err := c.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("Read after the peer closed = %d, %v; want 0, io.EOF", n, err)
	}
}

// Writing to a connection the peer reset fails with an error (EPIPE or
// ECONNRESET), without a signal killing the process.
func TestWriteToResetPeer(t *testing.T) {
	c, srv := pair(t, "tcp", "127.0.0.1:0")
	srv.(*net.TCPConn).SetLinger(0)
	srv.Close()
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, err = c.Write(make([]byte, 4096))
		time.Sleep(time.Millisecond)
	}
	var se *os.SyscallError
	if !errors.As(err, &se) || !strings.HasPrefix(err.Error(), "write tcp ") {
		t.Fatalf("Write to a reset peer = %v, want a write syscall error", err)
	}
}

func TestZeroLength(t *testing.T) {
	c, _ := pair(t, "tcp", "127.0.0.1:0")
	if n, err := c.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read(nil) = %d, %v", n, err)
	}
	if n, err := c.Write(nil); n != 0 || err != nil {
		t.Fatalf("Write(nil) = %d, %v", n, err)
	}
}
