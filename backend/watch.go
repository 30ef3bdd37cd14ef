package backend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Frozen backends. A statement may run for hours without a byte coming
// back, so no read timeout can tell a slow query from a dead server. What
// can: while a connection waits for an answer, every Options.Silence
// without a byte, the server is asked whether it lives, by logging in on a
// new connection within ConnectTimeout. A busy server passes and the wait
// goes on; a frozen one (SIGSTOP, a hung disk, a host gone without a TCP
// reset) fails, and so does the read: the statement gets an error naming
// the node, the connection is discarded, and the health check takes the
// node down. One check per pool at a time; its result serves the others
// waiting on that pool for a while.

// watchConn is a backend's net.Conn with that check on its reads.
type watchConn struct {
	net.Conn
	pool     *Pool
	explicit time.Time // a deadline the caller set (zero: none)
	// got: bytes read since the wait was last armed. Atomic: on a
	// pipelined connection one session's write arms the wait while
	// another's read counts.
	got atomic.Int64
}

// Write sends a command: its answer is watched from now.
func (w *watchConn) Write(b []byte) (int, error) {
	w.arm()
	return w.Conn.Write(b)
}

// arm starts a new silence interval.
func (w *watchConn) arm() {
	w.got.Store(0)
	d := time.Now().Add(w.pool.opts.Silence)
	if !w.explicit.IsZero() && w.explicit.Before(d) {
		d = w.explicit
	}
	_ = w.Conn.SetReadDeadline(d)
}

func (w *watchConn) Read(b []byte) (int, error) {
	for {
		n, err := w.Conn.Read(b)
		w.got.Add(int64(n))
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !ne.Timeout() || !w.explicit.IsZero() && !time.Now().Before(w.explicit) {
			return n, err // not our deadline: the caller's, or no timeout
		}
		if w.got.Load() == 0 {
			if perr := w.pool.alive(); perr != nil {
				return n, &FrozenError{Node: w.pool.node, Addr: w.pool.addr, Silence: w.pool.opts.Silence, Err: perr}
			}
		}
		w.arm()
		if n > 0 {
			return n, nil
		}
	}
}

func (w *watchConn) SetDeadline(t time.Time) error {
	w.explicit = t
	if t.IsZero() {
		w.arm()
		return w.Conn.SetWriteDeadline(t)
	}
	return w.Conn.SetDeadline(t)
}

func (w *watchConn) SetReadDeadline(t time.Time) error {
	w.explicit = t
	if t.IsZero() {
		w.arm()
		return nil
	}
	return w.Conn.SetReadDeadline(t)
}

// FrozenError is a read that failed because the server sent nothing for
// Silence and did not let a new connection log in.
type FrozenError struct {
	Node, Addr string
	Silence    time.Duration
	Err        error
}

func (e *FrozenError) Error() string {
	return fmt.Sprintf("node %s (%s) sent nothing for %s and a new connection to it failed (%v): the server is frozen or unreachable",
		e.Node, e.Addr, e.Silence, e.Err)
}

func (e *FrozenError) Unwrap() error { return e.Err }

// Timeout makes a FrozenError a timeout, as the read it ends.
func (e *FrozenError) Timeout() bool { return true }

// IsFrozen reports whether err ended a read on a frozen server: trying
// the same node again is no use.
func IsFrozen(err error) bool {
	var fe *FrozenError
	return errors.As(err, &fe)
}

// liveness is a pool's shared check that its server lives.
type liveness struct {
	mu             sync.Mutex
	aliveAt, badAt time.Time
	bad            error
}

// alive logs in on a new connection and closes it; a success serves the
// callers of the next Silence/2, a failure those of the next
// ConnectTimeout.
func (p *Pool) alive() error {
	l := &p.live
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	switch {
	case now.Sub(l.aliveAt) < p.opts.Silence/2:
		return nil
	case now.Sub(l.badAt) < p.opts.ConnectTimeout:
		return l.bad
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.ConnectTimeout)
	defer cancel()
	c, err := dial(ctx, p, DefaultFlavor)
	if err != nil {
		l.badAt, l.bad = time.Now(), err
		return err
	}
	c.close()
	l.aliveAt = time.Now()
	return nil
}
