package deadlock

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/engine"
	"go.uber.org/zap"
)

func tx(id uint32, began time.Time, since int64) *view {
	return &view{tx: &Tx{ID: id}, id: fmt.Sprintf("ks1/%d", id), began: began.UnixNano(), since: since}
}

// The cycle finder: a two-transaction cycle across nodes, a longer one
// through a thread of no keyshard transaction, and waits that are no
// cycle.
func TestFindCycle(t *testing.T) {
	now := time.Now()
	a, b, c := tx(1, now, 1), tx(2, now.Add(time.Millisecond), 2), tx(3, now.Add(2*time.Millisecond), 3)
	va, vb, vc := vertex{tx: a}, vertex{tx: b}, vertex{tx: c}
	plain := vertex{node: "node1", thread: 77}

	// a waits on node2 for b, b on node1 for a.
	g := map[vertex][]edge{va: {{to: vb, node: "node2"}}, vb: {{to: va, node: "node1"}}}
	cy := findCycle(g)
	if len(cy) != 2 {
		t.Fatalf("two-transaction cycle: %v", cy)
	}
	// A chain is no cycle.
	if cy := findCycle(map[vertex][]edge{va: {{to: vb, node: "node2"}}, vb: {{to: plain, node: "node1"}}}); cy != nil {
		t.Fatalf("a chain of waits taken for a cycle: %v", cy)
	}
	// a -> c on node2, c -> plain thread on node1, plain -> a on node1.
	g = map[vertex][]edge{va: {{to: vc, node: "node2"}}, vc: {{to: plain, node: "node1"}}, plain: {{to: va, node: "node1"}}}
	cy = findCycle(g)
	if len(cy) != 3 {
		t.Fatalf("three-vertex cycle: %v", cy)
	}
	for i, s := range cy {
		if next := cy[(i+1)%len(cy)]; s.to != next.from {
			t.Fatalf("steps out of order: %v", cy)
		}
	}

	// The victim is the youngest keyshard transaction; it is asked to
	// stop the statement that waits.
	var stopped []uint32
	for _, v := range []*view{a, b, c} {
		v.tx.Abort = func(since int64) bool {
			if since != v.since {
				t.Errorf("session %d stopped at %d, want its statement's %d", v.tx.ID, since, v.since)
			}
			stopped = append(stopped, v.tx.ID)
			return true
		}
	}
	d := New(nil, zap.NewNop(), "ks1", nil)
	if got := d.resolve(cy); got != vc || len(stopped) != 1 || stopped[0] != 3 {
		t.Fatalf("victim %v (stopped %v), want session 3, the youngest", got, stopped)
	}
	// A cycle on one server is the server's to break.
	stopped = nil
	one := []step{{from: va, to: vb, node: "node1"}, {from: vb, to: va, node: "node1"}}
	d.resolve(one)
	if len(stopped) != 0 || d.Stats().Cycles != 1 || d.Stats().Victims != 1 {
		t.Fatalf("a one-node cycle: stopped %v, stats %+v", stopped, d.Stats())
	}
}

type noNodes struct{}

func (noNodes) Nodes() map[string]*backend.Node { return nil }

// Transactions join and leave; no check runs while no statement waits
// past the threshold, or with fewer than two transactions.
func TestWaiting(t *testing.T) {
	d := New(noNodes{}, zap.NewNop(), "ks1", nil)
	running := int64(0)
	t1 := &Tx{ID: 1, Running: func() int64 { return running }}
	t2 := &Tx{ID: 2, Running: func() int64 { return 0 }}
	d.Update(t1, []engine.Held{{Node: "node1", Thread: 10}, {Node: "node2", Thread: 20}})
	if d.waiting() != nil {
		t.Fatal("one transaction: nothing to check")
	}
	d.Update(t2, []engine.Held{{Node: "node2", Thread: 21}, {Node: "node1", Thread: 11}})
	if d.waiting() != nil {
		t.Fatal("no statement running: nothing to check")
	}
	running = time.Now().UnixNano()
	if d.waiting() != nil {
		t.Fatal("a statement just started: nothing to check yet")
	}
	running = time.Now().Add(-2 * Threshold).UnixNano()
	vs := d.waiting()
	if len(vs) != 2 {
		t.Fatalf("a statement past the threshold: %d transactions to check, want 2", len(vs))
	}
	// With no lock waits (no nodes to ask), a check finds nothing.
	d.check(context.Background(), vs)
	if st := d.Stats(); st.Checks != 1 || st.Cycles != 0 {
		t.Fatalf("stats %+v", st)
	}
	d.Update(t2, nil)
	if d.waiting() != nil {
		t.Fatal("t2 left: one transaction, nothing to check")
	}
}

// fakePeers is one instance's view of a shared store.
type fakePeers struct {
	name    string
	mu      *sync.Mutex
	entries map[string][]byte
}

func (f fakePeers) Share(_ context.Context, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if data == nil {
		delete(f.entries, f.name)
	} else {
		f.entries[f.name] = data
	}
	return nil
}

func (f fakePeers) Others(context.Context) ([][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]byte
	for n, e := range f.entries {
		if n != f.name {
			out = append(out, e)
		}
	}
	return out, nil
}

// Two instances, one transaction each, in one cycle: each sees the
// other's transaction through the peers; both choose the same victim,
// and only its own instance stops it.
func TestPeersShareOneVictim(t *testing.T) {
	var mu sync.Mutex
	store := map[string][]byte{}
	old := time.Now().Add(-time.Second).UnixNano()
	var stoppedA, stoppedB int
	dA := New(noNodes{}, zap.NewNop(), "ks-a", fakePeers{"ks-a", &mu, store})
	dB := New(noNodes{}, zap.NewNop(), "ks-b", fakePeers{"ks-b", &mu, store})
	ta := &Tx{ID: 1, Running: func() int64 { return old }, Abort: func(int64) bool { stoppedA++; return true }}
	tb := &Tx{ID: 1, Running: func() int64 { return old }, Abort: func(int64) bool { stoppedB++; return true }}
	dA.Update(ta, []engine.Held{{Node: "node1", Thread: 10}, {Node: "node2", Thread: 20}})
	time.Sleep(time.Millisecond) // tb spans nodes later: the younger
	dB.Update(tb, []engine.Held{{Node: "node2", Thread: 21}, {Node: "node1", Thread: 11}})

	dB.share(context.Background(), dB.waiting())
	va := dA.share(context.Background(), dA.waiting())
	vb := dB.share(context.Background(), dB.waiting())
	if len(va) != 2 || len(vb) != 2 {
		t.Fatalf("views: A sees %d, B sees %d; want both transactions", len(va), len(vb))
	}
	cycleOf := func(vs []view) []step {
		var a, b *view
		for i := range vs {
			if vs[i].id == "ks-a/1" {
				a = &vs[i]
			} else {
				b = &vs[i]
			}
		}
		return []step{{from: vertex{tx: a}, to: vertex{tx: b}, node: "node2"}, {from: vertex{tx: b}, to: vertex{tx: a}, node: "node1"}}
	}
	dA.resolve(cycleOf(va))
	dB.resolve(cycleOf(vb))
	if stoppedA != 0 || stoppedB != 1 {
		t.Fatalf("stopped: A's %d, B's %d; want B's, the younger, once", stoppedA, stoppedB)
	}
	// Nothing waits any more: the entries go.
	ta.Running, tb.Running = func() int64 { return 0 }, func() int64 { return 0 }
	dA.share(context.Background(), dA.waiting())
	dB.share(context.Background(), dB.waiting())
	if len(store) != 0 {
		t.Fatalf("entries left: %v", store)
	}
}
