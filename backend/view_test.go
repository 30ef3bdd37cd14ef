package backend

import (
	"testing"
	"time"
)

// A view reaches the base node's servers with its own credentials and
// pools, and follows the base node's health, read choice and counts.
func TestNodeView(t *testing.T) {
	n := testNode(t, true, ReplicaAddr{"127.0.0.1:2", 1}, ReplicaAddr{"127.0.0.1:3", 1})
	v := n.As("reader", "pw")
	defer v.Close()
	if v.Master == n.Master || v.Master.opts.User != "reader" || v.Master.Addr() != n.Master.Addr() || v.Base() != n {
		t.Fatalf("view master: %+v", v.Master.opts)
	}
	if !v.Splits() || !v.HasReplicas() {
		t.Fatal("the view does not see the base node's replicas")
	}
	reps := n.Replicas()
	reps[1].Pool.state.Store(int32(Down))
	for range 100 {
		p := v.ReadPool(nil)
		if p.standsFor != reps[0].Pool || p.opts.User != "reader" {
			t.Fatalf("read went to %s as %s, want the view's pool for %s", p.Addr(), p.opts.User, reps[0].Pool.Addr())
		}
	}
	first := v.ReadPool(nil)
	if again := v.ReadPool(nil); again != first {
		t.Fatal("a second read made another pool")
	}
	// A retry skips the view's pool as the base node's.
	if p := v.ReadPool(first); p != v.Master {
		t.Fatalf("retry: picked %s, want the master", p.Addr())
	}
	// One health state and one count per server.
	reps[0].Pool.state.Store(int32(Lagging))
	if first.Health() != Lagging {
		t.Fatalf("view pool health %v, want the base pool's", first.Health())
	}
	first.Observe(0, false)
	if reps[0].Pool.Statements().count.Load() != 1 {
		t.Fatal("a view's statement is not counted on the server's pool")
	}
	if got := len(v.Pools()); got != 2 {
		t.Fatalf("view pools: %d, want master + the one replica used", got)
	}
	v.Close()
	if p := v.own(reps[1].Pool); p != nil {
		t.Fatal("a closed view made a pool")
	}
}

// A view's pool for a replica the base node dropped closes by itself.
func TestNodeViewDroppedReplica(t *testing.T) {
	n := testNode(t, false, ReplicaAddr{"127.0.0.1:2", 1})
	v := n.As("reader", "pw")
	defer v.Close()
	p := v.ReadPool(nil)
	if p == nil || p.standsFor != n.Replicas()[0].Pool {
		t.Fatalf("read pool %v", p)
	}
	n.SetReplicas(nil)
	waitUntil(t, func() bool { return p.closed.Load() })
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for range 100 {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("timed out")
}
