package backend

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// testNode is a node whose backends are never dialed (no health checks,
// no warm set): ReadPool only looks at weights, states and in-use counts.
func testNode(t *testing.T, masterReads bool, reps ...ReplicaAddr) *Node {
	t.Helper()
	n := NewNode("node1", "127.0.0.1:1", NodeOptions{Replicas: reps, MasterReads: masterReads})
	t.Cleanup(n.Close)
	return n
}

func TestReadPoolWeights(t *testing.T) {
	n := testNode(t, true, ReplicaAddr{"127.0.0.1:2", 1}, ReplicaAddr{"127.0.0.1:3", 3})
	reps := n.Replicas()
	counts := map[*Pool]int{}
	const draws = 40000
	for range draws {
		counts[n.ReadPool(nil)]++
	}
	if counts[n.Master] != 0 {
		t.Errorf("master got %d reads with replicas up", counts[n.Master])
	}
	// Idle replicas: P2C picks the first draw unless the second has fewer
	// in flight per weight, so the spread follows the weights: 1:3.
	share := float64(counts[reps[1].Pool]) / draws
	if math.Abs(share-0.75) > 0.03 {
		t.Errorf("weight-3 replica got %.3f of reads, want 0.75 +- 0.03 (%v)", share, counts)
	}
}

func TestReadPoolPrefersFewerInFlight(t *testing.T) {
	n := testNode(t, true, ReplicaAddr{"127.0.0.1:2", 1}, ReplicaAddr{"127.0.0.1:3", 1})
	reps := n.Replicas()
	reps[0].Pool.inUse.Store(10) // slow: statements pile up on it
	slow := 0
	for range 10000 {
		if n.ReadPool(nil) == reps[0].Pool {
			slow++
		}
	}
	// With two replicas both are always drawn: the busy one never wins.
	if slow != 0 {
		t.Errorf("busy replica picked %d times of 10000", slow)
	}
	// Weighted: 5 in flight on weight 10 beats 1 on weight 1.
	n2 := testNode(t, true, ReplicaAddr{"127.0.0.1:4", 10}, ReplicaAddr{"127.0.0.1:5", 1})
	r2 := n2.Replicas()
	r2[0].Pool.inUse.Store(5)
	r2[1].Pool.inUse.Store(1)
	for range 1000 {
		if p := n2.ReadPool(nil); p != r2[0].Pool {
			t.Fatalf("picked %s, want the weight-10 replica (0.5 per weight vs 1)", p.Addr())
		}
	}
}

func TestReadPoolSkipDownAndFallback(t *testing.T) {
	n := testNode(t, true, ReplicaAddr{"127.0.0.1:2", 1}, ReplicaAddr{"127.0.0.1:3", 1})
	reps := n.Replicas()
	for range 1000 {
		if p := n.ReadPool(reps[0].Pool); p != reps[1].Pool {
			t.Fatalf("skip: picked %s", p.Addr())
		}
	}
	reps[1].Pool.state.Store(int32(Down))
	if p := n.ReadPool(nil); p != reps[0].Pool {
		t.Fatalf("one replica down: picked %s", p.Addr())
	}
	reps[0].Pool.state.Store(int32(Lagging))
	if p := n.ReadPool(nil); p != n.Master {
		t.Fatalf("no replica readable: picked %v, want the master", p)
	}
	if p := n.ReadPool(n.Master); p != nil {
		t.Fatalf("master skipped too: picked %s", p.Addr())
	}
	reps[0].Pool.SetAdminDown(false)
	reps[0].Pool.state.Store(int32(Up))
	reps[0].Pool.SetAdminDown(true)
	if p := n.ReadPool(nil); p != n.Master {
		t.Fatalf("admin down: picked %s", p.Addr())
	}
	off := testNode(t, false, ReplicaAddr{"127.0.0.1:2", 1})
	off.Replicas()[0].Pool.state.Store(int32(Down))
	if p := off.ReadPool(nil); p != nil {
		t.Fatalf("master_reads off: picked %s", p.Addr())
	}
}

func TestAddRemoveReplica(t *testing.T) {
	n := testNode(t, true)
	if n.Splits() {
		t.Fatal("no replicas: Splits")
	}
	if !n.AddReplica(ReplicaAddr{"127.0.0.1:2", 2}) || n.AddReplica(ReplicaAddr{"127.0.0.1:2", 1}) {
		t.Fatal("AddReplica: want added once")
	}
	if !n.Splits() || len(n.Pools()) != 2 || n.Replicas()[0].Weight != 2 {
		t.Fatalf("after add: %d pools", len(n.Pools()))
	}
	p := n.Replicas()[0].Pool
	if !n.RemoveReplica("127.0.0.1:2") || n.RemoveReplica("127.0.0.1:2") {
		t.Fatal("RemoveReplica: want removed once")
	}
	if n.HasReplicas() || !p.closed.Load() {
		t.Fatal("removed replica still listed or its pool open")
	}
}

func TestCheckedStates(t *testing.T) {
	p := NewPool("node1", "127.0.0.1:1", Options{Role: RoleReplica})
	defer p.Close()
	p.reached.Store(true) // it answered once: a failed check may be a busy server
	o := NodeOptions{MaxLag: 5 * time.Second}
	boom := &Error{Kind: KindConnect, Node: "node1", Addr: "127.0.0.1:1", Msg: "cannot connect", Err: errors.New("refused")}
	p.checked(0, boom, o)
	if p.Health() != Up {
		t.Fatal("down after one failed check")
	}
	p.checked(0, boom, o)
	if p.Health() != Down {
		t.Fatal("not down after two failed checks")
	}
	if _, err := p.Get(t.Context(), DefaultFlavor); KindOf(err) != KindDown {
		t.Fatalf("Get on a down pool: %v", err)
	} else if want := "node node1 slave (127.0.0.1:1): slave is down (health checks failing for"; !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), "cannot connect: refused)") {
		t.Fatalf("down error %q", err)
	}
	p.checked(3, nil, o)
	if p.Health() != Up || p.Lag() != 3 || p.LastCheckError() != "" {
		t.Fatalf("after a pass: %v lag %d err %q", p.Health(), p.Lag(), p.LastCheckError())
	}
	p.checked(6, nil, o)
	if p.Health() != Lagging {
		t.Fatal("lag 6 > 5 not lagging")
	}
	p.checked(-1, nil, o)
	if p.Health() != Lagging {
		t.Fatal("unknown lag with max_replication_lag set: not lagging")
	}
	p.checked(-1, nil, NodeOptions{})
	if p.Health() != Up {
		t.Fatal("unknown lag without max_replication_lag: not up")
	}
	// down_after_noalive: failures shorter than it keep the backend up.
	q := NewPool("node1", "127.0.0.1:1", Options{})
	defer q.Close()
	q.reached.Store(true)
	for range 3 {
		q.checked(0, boom, NodeOptions{DownAfter: time.Hour})
	}
	if q.Health() != Up {
		t.Fatal("down before down_after_noalive")
	}
	// ... but not for a server that refuses keyshard's login, nor for one
	// never reached since the pool started.
	refused := &Error{Kind: KindAuth, Node: "node1", Addr: "127.0.0.1:1", Msg: "refused keyshard's login as 'ks'", Err: errors.New("Access denied")}
	q.checked(0, refused, NodeOptions{DownAfter: time.Hour})
	if q.Health() != Down || !strings.Contains(q.LastCheckError(), "refused keyshard's login as 'ks': Access denied") {
		t.Fatalf("a refused login: %v %q, want down at once", q.Health(), q.LastCheckError())
	}
	never := NewPool("node1", "127.0.0.1:1", Options{})
	defer never.Close()
	never.checked(0, boom, NodeOptions{DownAfter: time.Hour})
	if never.Health() != Down {
		t.Fatal("a server never reached: up after a failed check, want down at once")
	}
}

func TestSlaveLag(t *testing.T) {
	v := func(s string) *string { return &s }
	cols := []string{"Slave_IO_State", "Seconds_Behind_Master"}
	for _, c := range []struct {
		rows [][]*string
		want int64
	}{
		{nil, -1},
		{[][]*string{{v("x"), v("12")}}, 12},
		{[][]*string{{v("x"), nil}}, -1},
	} {
		if got := slaveLag(&Result{Columns: cols, Rows: c.rows}); got != c.want {
			t.Errorf("slaveLag(%v) = %d, want %d", c.rows, got, c.want)
		}
	}
}

func TestLatency(t *testing.T) {
	var l Latency
	l.Observe(50*time.Microsecond, false)
	l.Observe(3*time.Millisecond, true)
	l.Observe(time.Minute, false)
	s := l.Snapshot()
	if s.Count != 3 || s.Errors != 1 || s.Sum != time.Minute+3050*time.Microsecond {
		t.Fatalf("snapshot %+v", s)
	}
	// .0001 holds the 50 µs one; .005 adds the 3 ms one; the minute is
	// above every bound.
	if s.Cumulative[0] != 1 || s.Cumulative[5] != 2 || s.Cumulative[len(LatencyBounds)-1] != 2 {
		t.Fatalf("buckets %v", s.Cumulative)
	}
}

func TestSetReplicas(t *testing.T) {
	n := NewNode("n", "127.0.0.1:1", NodeOptions{Pool: Options{MaxConns: 1}, Replicas: []ReplicaAddr{{"127.0.0.1:2", 1}, {"127.0.0.1:3", 1}}})
	defer n.Close()
	keep := n.Replicas()[1].Pool
	gone := n.Replicas()[0].Pool
	n.SetReplicas([]ReplicaAddr{{"127.0.0.1:3", 5}, {"127.0.0.1:4", 0}})
	reps := n.Replicas()
	if len(reps) != 2 || reps[0].Pool != keep || reps[0].Weight != 5 || reps[1].Pool.Addr() != "127.0.0.1:4" || reps[1].Weight != 1 {
		t.Fatalf("replicas after SetReplicas: %+v", reps)
	}
	if !gone.closed.Load() || keep.closed.Load() {
		t.Errorf("removed pool closed %v, kept pool closed %v", gone.closed.Load(), keep.closed.Load())
	}
	n.SetReplicas(nil)
	if n.HasReplicas() {
		t.Error("SetReplicas(nil) left replicas")
	}
}
