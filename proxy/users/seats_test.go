package users

import (
	"context"
	"errors"
	"testing"

	"github.com/keyshard/keyshard/backend"
)

// An account's sessions share one seat per password; a new password makes
// a new seat and the old one closes with its last session; a seat of an
// account gone from the server closes once unused; the views over nodes a
// reload replaced are handed back to be drained. No server is needed: a
// pool without a warm set dials nothing until used.
func TestSeats(t *testing.T) {
	base := backend.NewNode("node1", "127.0.0.1:1", backend.NodeOptions{})
	defer base.Close()
	nodes := map[string]*backend.Node{"node1": base}
	var s Seats
	a1 := s.Take("alice", []byte("key-one"))
	a2 := s.Take("alice", []byte("key-one"))
	if a1 != a2 || s.Open() != 1 {
		t.Fatalf("same key: %p %p, %d open", a1, a2, s.Open())
	}
	v := a1.Nodes(nodes)["node1"]
	if v == nil || v.User() != "alice" || v.Base() != base || a2.Nodes(nodes)["node1"] != v {
		t.Fatalf("view %+v", v)
	}
	b := s.Take("alice", []byte("key-two")) // the password changed
	if b == a1 || s.Open() != 2 {
		t.Fatalf("new key: same seat or %d open", s.Open())
	}
	a1.Release()
	if s.Open() != 2 || closed(v) {
		t.Fatal("closed with a session left")
	}
	a2.Release()
	if s.Open() != 1 || !closed(v) {
		t.Fatalf("old seat: %d open, view closed %v", s.Open(), closed(v))
	}
	b.Nodes(nodes)
	s.Keep(func(user string) bool { return user != "alice" }) // dropped on the server
	if s.Open() != 1 {
		t.Fatal("a held seat closed")
	}
	gone := s.Drop([]*backend.Node{base})
	if len(gone) != 1 || gone[0].User() != "alice" {
		t.Fatalf("Drop: %v", gone)
	}
	gone[0].Close()
	b.Release()
	if s.Open() != 0 {
		t.Fatalf("%d open after the last release of a dropped account", s.Open())
	}
	var nilSeat *Seat
	nilSeat.Release()
	c := s.Take("carol", nil)
	c.Nodes(nodes)
	s.Close()
	if s.Open() != 0 {
		t.Fatal("open after Close")
	}
}

// closed reports whether view's master pool is closed.
func closed(view *backend.Node) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := view.Master.Get(ctx, backend.DefaultFlavor)
	var be *backend.Error
	return errors.As(err, &be) && be.Kind == backend.KindClosed
}
