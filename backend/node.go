package backend

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Node is one ks.yaml node: a master and its weighted read replicas, each
// with its own pool and health checker.
type Node struct {
	Name   string
	Master *Pool

	replicas atomic.Pointer[[]*Replica] // replaced whole, never modified
	opts     NodeOptions

	mu       sync.Mutex // guards checkers (add/remove replicas), views' changes
	checkers map[*Pool]chan struct{}
	wg       sync.WaitGroup
	closed   bool

	// A view (As) of base: its own pools for base's servers, by the base
	// pool each stands for (replaced whole, never modified).
	base  *Node
	views atomic.Pointer[map[*Pool]*Pool]
}

// Replica is one read replica of a node.
type Replica struct {
	Pool   *Pool
	Weight int // >= 1
}

// ReplicaAddr is a replica to create: address and balancing weight.
type ReplicaAddr struct {
	Addr   string
	Weight int
}

// NodeOptions configure a node: its pools, replicas and health checks.
type NodeOptions struct {
	Pool     Options // for every pool of the node (Role is set per pool)
	Replicas []ReplicaAddr

	// HealthInterval is how often each backend is checked (0: no checks,
	// every backend stays up). HealthTimeout bounds one check.
	HealthInterval, HealthTimeout time.Duration
	// DownAfter is how long checks must fail before the backend is marked
	// down (kingshard's down_after_noalive); it takes two failed checks in
	// a row at least.
	DownAfter time.Duration
	// MaxLag skips replicas whose replication lag exceeds it (0: off).
	MaxLag time.Duration
	// MasterReads lets the master serve reads when no replica can.
	MasterReads bool
	// NoSplit keeps the node's reads on its master (kingshard's old node
	// key rw_split: false).
	NoSplit bool
}

// NewNode creates a node, its pools and their health checkers.
func NewNode(name, master string, opts NodeOptions) *Node {
	n := &Node{Name: name, opts: opts, checkers: map[*Pool]chan struct{}{}}
	mo := opts.Pool
	mo.Role = RoleMaster
	n.Master = NewPool(name, master, mo)
	reps := make([]*Replica, 0, len(opts.Replicas))
	for _, r := range opts.Replicas {
		reps = append(reps, n.newReplica(r))
	}
	n.replicas.Store(&reps)
	n.startChecker(n.Master)
	for _, r := range reps {
		n.startChecker(r.Pool)
	}
	return n
}

func (n *Node) newReplica(r ReplicaAddr) *Replica {
	o := n.opts.Pool
	o.Role = RoleReplica
	w := r.Weight
	if w < 1 {
		w = 1
	}
	return &Replica{Pool: NewPool(n.Name, r.Addr, o), Weight: w}
}

// Replicas returns the node's replicas (do not modify the slice).
func (n *Node) Replicas() []*Replica { return *n.replicas.Load() }

// Splits reports whether reads may go to the node's replicas.
func (n *Node) Splits() bool { return !n.opts.NoSplit && n.HasReplicas() }

// HasReplicas reports whether the node has any replica configured.
func (n *Node) HasReplicas() bool { return len(*n.Base().replicas.Load()) > 0 }

// Pools returns the master pool followed by the replicas' pools.
func (n *Node) Pools() []*Pool {
	if n.base != nil {
		return n.viewPools()
	}
	reps := n.Replicas()
	out := make([]*Pool, 0, 1+len(reps))
	out = append(out, n.Master)
	for _, r := range reps {
		out = append(out, r.Pool)
	}
	return out
}

// ReadPool picks the pool for a read. Among the replicas that are up and
// not lagging, two are drawn at random in proportion to their weights and
// the one with fewer statements in flight per unit of weight wins (power
// of two choices): a replica that slows down holds its statements longer
// and so draws less traffic, without any one replica taking the whole
// load. skip (a retry's first choice) is never picked. With no replica
// left, the master when MasterReads allows it and it is not skip; else nil.
func (n *Node) ReadPool(skip *Pool) *Pool {
	if n.base != nil {
		return n.viewRead(skip)
	}
	reps := *n.replicas.Load()
	total := 0
	for _, r := range reps {
		if r.Pool != skip && r.Pool.Readable() {
			total += r.Weight
		}
	}
	if total == 0 {
		if n.opts.MasterReads && n.Master != skip {
			return n.Master
		}
		return nil
	}
	a := pickWeighted(reps, skip, nil, rand.IntN(total))
	if wa := weightOf(reps, a); total > wa {
		b := pickWeighted(reps, skip, a, rand.IntN(total-wa))
		// Fewer statements in flight per unit of weight wins:
		// a.inUse/wa > b.inUse/wb, without division. On a tie (both idle)
		// the first, weighted draw stands, so idle replicas share reads
		// by weight.
		if a.inUse.Load()*int64(weightOf(reps, b)) > b.inUse.Load()*int64(wa) {
			return b
		}
	}
	return a
}

// pickWeighted returns the readable replica pool (other than skip and
// not) at weighted offset x.
func pickWeighted(reps []*Replica, skip, not *Pool, x int) *Pool {
	var last *Pool
	for _, r := range reps {
		if r.Pool == skip || r.Pool == not || !r.Pool.Readable() {
			continue
		}
		last = r.Pool
		if x < r.Weight {
			return r.Pool
		}
		x -= r.Weight
	}
	// A state changed between counting and picking: take the last one.
	return last
}

func weightOf(reps []*Replica, p *Pool) int {
	for _, r := range reps {
		if r.Pool == p {
			return r.Weight
		}
	}
	return 1
}

// AddReplica adds a replica to the node (a no-op returning false if the
// address is already one). Sessions pick it up at their next read.
func (n *Node) AddReplica(r ReplicaAddr) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	old := *n.replicas.Load()
	for _, x := range old {
		if x.Pool.Addr() == r.Addr {
			return false
		}
	}
	rep := n.newReplica(r)
	reps := append(append(make([]*Replica, 0, len(old)+1), old...), rep)
	n.replicas.Store(&reps)
	n.startCheckerLocked(rep.Pool)
	return true
}

// RemoveReplica removes the replica at addr; its statements in flight
// finish, then its pool closes. It reports whether addr was a replica.
func (n *Node) RemoveReplica(addr string) bool {
	n.mu.Lock()
	old := *n.replicas.Load()
	var gone *Pool
	reps := make([]*Replica, 0, len(old))
	for _, x := range old {
		if x.Pool.Addr() == addr {
			gone = x.Pool
			continue
		}
		reps = append(reps, x)
	}
	if gone == nil {
		n.mu.Unlock()
		return false
	}
	n.replicas.Store(&reps)
	if stop, ok := n.checkers[gone]; ok {
		close(stop)
		delete(n.checkers, gone)
	}
	n.mu.Unlock()
	gone.Close()
	return true
}

// SetReplicas makes want the node's replica list: replicas not in it are
// removed (their statements in flight finish, then their pools close), new
// ones added, weights updated. Kept replicas keep their pools and state.
func (n *Node) SetReplicas(want []ReplicaAddr) {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	old := *n.replicas.Load()
	reps := make([]*Replica, 0, len(want))
	keep := map[*Pool]bool{}
	for _, w := range want {
		i := slices.IndexFunc(old, func(r *Replica) bool { return r.Pool.Addr() == w.Addr })
		if i < 0 {
			rep := n.newReplica(w)
			reps = append(reps, rep)
			n.startCheckerLocked(rep.Pool)
			continue
		}
		keep[old[i].Pool] = true
		reps = append(reps, &Replica{Pool: old[i].Pool, Weight: max(w.Weight, 1)})
	}
	var gone []*Pool
	for _, r := range old {
		if !keep[r.Pool] {
			gone = append(gone, r.Pool)
			if stop, ok := n.checkers[r.Pool]; ok {
				close(stop)
				delete(n.checkers, r.Pool)
			}
		}
	}
	n.replicas.Store(&reps)
	n.mu.Unlock()
	for _, p := range gone {
		p.Close()
	}
}

// KeepAdminDown takes down each backend of n that an admin command took
// down in prev (same address and role): a node rebuilt by a reload keeps
// its operator's decisions.
func (n *Node) KeepAdminDown(prev *Node) {
	for _, p := range prev.Pools() {
		if !p.AdminDown() {
			continue
		}
		for _, q := range n.Pools() {
			if q.Addr() == p.Addr() && q.Role() == p.Role() {
				q.SetAdminDown(true)
			}
		}
	}
}

// Options returns the options the node was built with (Replicas as at
// creation).
func (n *Node) Options() NodeOptions { return n.opts }

// Close stops the health checkers and closes every pool.
func (n *Node) Close() {
	n.mu.Lock()
	n.closed = true
	for p, stop := range n.checkers {
		close(stop)
		delete(n.checkers, p)
	}
	n.mu.Unlock()
	n.wg.Wait()
	for _, p := range n.Pools() {
		p.Close()
	}
}

func (n *Node) startChecker(p *Pool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.startCheckerLocked(p)
}

func (n *Node) startCheckerLocked(p *Pool) {
	if n.opts.HealthInterval <= 0 {
		return
	}
	stop := make(chan struct{})
	n.checkers[p] = stop
	p.watched.Store(true)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		runChecker(p, n.opts, stop)
	}()
}
