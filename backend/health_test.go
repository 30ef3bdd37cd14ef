package backend

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// A replica whose connection failed and that refuses a new one is taken
// out at once; the next passing check brings it back. Without health
// checks (nothing would bring it back), or for a master, it stays up.
func TestConnLostTakesOutDeadReplica(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connections are refused
	for _, c := range []struct {
		role    Role
		watched bool
		want    Health
	}{
		{RoleReplica, true, Down},
		{RoleReplica, false, Up},
		{RoleMaster, true, Up},
	} {
		p := NewPool("node1", addr, Options{Role: c.role, ConnectTimeout: time.Second})
		p.watched.Store(c.watched)
		p.connLost()
		deadline := time.Now().Add(2 * time.Second)
		for p.Health() != c.want || p.confirming.Load() {
			if time.Now().After(deadline) {
				t.Fatalf("%v (health checks %v): %v, want %v", c.role, c.watched, p.Health(), c.want)
			}
			time.Sleep(time.Millisecond)
		}
		if c.want == Down {
			if _, err := p.Get(t.Context(), DefaultFlavor); KindOf(err) != KindDown ||
				!strings.Contains(err.Error(), "slave is down (a connection failed and a new one could not log in: cannot connect: ") {
				t.Errorf("Get on the replica taken out: %v", err)
			}
			p.checked(0, nil, NodeOptions{})
			if p.Health() != Up {
				t.Errorf("a passing check left it %v", p.Health())
			}
		}
		p.Close()
	}
}

// Idle connections are marked to be pinged before use once another
// connection of the pool failed.
func TestConnLostMarksIdle(t *testing.T) {
	p := NewPool("node1", "127.0.0.1:1", Options{})
	defer p.Close()
	now := time.Now() // (not expired: the maintainer would close them)
	a, b := &Conn{pool: p, created: now, lastUsed: now}, &Conn{pool: p, created: now, lastUsed: now}
	// Under the pool's lock: its maintainer reads the idle list.
	p.mu.Lock()
	p.idle = append(p.idle, a, b)
	p.mu.Unlock()
	p.connLost()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !a.check || !b.check {
		t.Fatalf("idle connections not marked: %v %v", a.check, b.check)
	}
	p.idle = nil
}

func TestTimedOut(t *testing.T) {
	if timedOut(errors.New("EOF")) || !timedOut(&FrozenError{}) || !timedOut(&net.OpError{Op: "read", Err: timeoutErr{}}) {
		t.Error("timedOut")
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }
