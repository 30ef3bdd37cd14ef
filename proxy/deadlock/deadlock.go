// Package deadlock finds the deadlocks no single server can see: a cycle
// of lock waits between transactions over several nodes, each server
// seeing only a wait. One server would find the cycle at once and roll one
// transaction back with 1213; spread over servers, the cycle would last
// until innodb_lock_wait_timeout (50 s by default).
//
// The detector knows every keyshard transaction that spans nodes: its
// backend connections (node and server thread id) and whether a statement
// of it runs, and since when. While such a statement has run longer than
// the threshold, it reads the lock waits of the nodes those transactions
// reach (information_schema.INNODB_LOCK_WAITS with INNODB_TRX: the waiting
// and the blocking server thread), maps each thread to its keyshard
// transaction (a thread of no keyshard transaction over several nodes
// stands for itself), and looks for cycles in the wait-for graph. In each
// cycle it stops the waiting statement of the youngest transaction (the
// one that spanned nodes last), which answers its client 1213 "Deadlock
// found when trying to get lock; try restarting transaction" and rolls
// the transaction back on every node, as one server would. Waits that
// are not cycles are left alone. Its cost, with no statement waiting, is
// a look at the registered transactions every threshold/2; while one
// waits, a query to each node involved every 110-140 ms (see recheck).
//
// Several keyshard instances sharing their config in etcd see each other's
// transactions through Peers: while one of its statements waits, each
// instance publishes its transactions over several nodes (id, when it
// spanned nodes, its connections) and reads the others', so a cycle
// through transactions of two instances is seen by both. The victim is
// chosen by the same rule everywhere (the youngest, then the greatest
// id), and only the instance that runs it stops it.
//
// It never imports proxy: what it needs of the server is Env (and Peers),
// and each transaction says how to stop its statement (Tx.Abort).
package deadlock

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/engine"
	"go.uber.org/zap"
)

// Threshold is how long a statement of a transaction over several nodes
// runs before the detector looks for a cycle it may be in.
const Threshold = 50 * time.Millisecond

// recheck is the least time between two reads of the lock waits. InnoDB
// answers information_schema's INNODB_* tables from a cache it refreshes
// only when nobody read it for 100 ms: readers more frequent than that
// (this detector, another instance's, a monitoring tool) would read the
// same stale answer for ever. A little jitter keeps two instances from
// reading in step.
const recheck = 110 * time.Millisecond

// Env is what the detector reads of the running configuration.
type Env interface {
	Nodes() map[string]*backend.Node
}

// Peers shares the waiting transactions of the keyshard instances on one
// etcd (proxy/cluster's store implements it).
type Peers interface {
	// Share replaces this instance's entry (nil: none).
	Share(ctx context.Context, data []byte) error
	// Others returns the other instances' entries.
	Others(ctx context.Context) ([][]byte, error)
}

// peerStale is how old another instance's entry may be and still count:
// an instance that stopped publishing has no statement waiting any more.
const peerStale = 2 * time.Second

// entry is what an instance publishes.
type entry struct {
	At  int64     `json:"at"` // unix nanos
	Txs []txEntry `json:"txs"`
}

type txEntry struct {
	ID    string        `json:"id"`
	Began int64         `json:"began"`
	Since int64         `json:"since"`
	Held  []engine.Held `json:"held"`
}

// Tx is one session's transaction over several nodes, as the detector
// sees it. Running and Abort are called from the detector's goroutine.
type Tx struct {
	ID uint32 // the session's connection id, for the log
	// Running is when the session's current statement started (unix
	// nanos), 0 when none runs.
	Running func() int64
	// Abort stops the statement that started at since, as a deadlock
	// victim; false when that statement is over already.
	Abort func(since int64) bool

	// Under Detector.mu:
	held  []engine.Held
	began time.Time // when it spanned nodes: the youngest is the victim
}

// Stats are the detector's counters.
type Stats struct {
	Checks  int64         // wait-for graphs read
	Cycles  int64         // deadlocks found
	Victims int64         // statements stopped as victims
	Latency time.Duration // summed over victims: from the wait's start to the victim's stop
}

// Detector finds cycles of lock waits across nodes.
type Detector struct {
	env   Env
	log   *zap.Logger
	name  string // this instance's, in the ids of its transactions
	peers Peers  // nil: this instance alone
	// shared: this instance's entry is published (and must go once
	// nothing waits).
	shared bool

	mu  sync.Mutex
	txs map[*Tx]struct{}

	next time.Time // no read of the lock waits before then (recheck); Run's

	checks, cycles, victims, latency atomic.Int64
}

// New makes the detector of env's nodes for the instance called name,
// with its peers (nil: alone); Run runs it.
func New(env Env, log *zap.Logger, name string, peers Peers) *Detector {
	return &Detector{env: env, log: log, name: name, peers: peers, txs: map[*Tx]struct{}{}}
}

// Update records t's backend connections (held, copied), from the
// session's goroutine: none means its transaction no longer spans nodes.
func (d *Detector) Update(t *Tx, held []engine.Held) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(held) == 0 {
		delete(d.txs, t)
		t.held = t.held[:0]
		return
	}
	if _, ok := d.txs[t]; !ok {
		d.txs[t] = struct{}{}
		t.began = time.Now()
	}
	t.held = append(t.held[:0], held...)
}

// Stats returns the counters.
func (d *Detector) Stats() Stats {
	return Stats{Checks: d.checks.Load(), Cycles: d.cycles.Load(), Victims: d.victims.Load(), Latency: time.Duration(d.latency.Load())}
}

// Run looks for deadlocks until ctx ends.
func (d *Detector) Run(ctx context.Context) {
	t := time.NewTicker(Threshold / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		txs := d.waiting()
		if d.peers != nil {
			txs = d.share(ctx, txs)
		}
		if txs != nil && !time.Now().Before(d.next) {
			d.check(ctx, txs)
			d.next = time.Now().Add(recheck + time.Duration(rand.Int64N(int64(recheck/4))))
		}
	}
}

// view is a transaction as one check saw it.
type view struct {
	tx    *Tx // nil: another instance's
	id    string
	held  []engine.Held
	began int64 // unix nanos
	since int64 // its running statement's start (0: none)
}

// waiting returns the registered transactions when a statement of one of
// them has run past the threshold (nil otherwise).
func (d *Detector) waiting() []view {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.txs) == 0 || len(d.txs) < 2 && d.peers == nil {
		return nil // a cycle across nodes takes two transactions over several nodes at least
	}
	late := time.Now().Add(-Threshold).UnixNano()
	overdue := false
	for t := range d.txs {
		if since := t.Running(); since != 0 && since < late {
			overdue = true
			break
		}
	}
	if !overdue {
		return nil // the common case, looked at every Threshold/2: nothing to copy
	}
	out := make([]view, 0, len(d.txs))
	for t := range d.txs {
		out = append(out, view{tx: t, id: d.name + "/" + strconv.FormatUint(uint64(t.ID), 10), held: slices.Clone(t.held),
			began: t.began.UnixNano(), since: t.Running()})
	}
	return out
}

// vertex is a transaction of the wait-for graph: a keyshard one (tx), or a
// server thread no keyshard transaction over several nodes owns.
type vertex struct {
	tx     *view
	node   string
	thread uint32
}

func (v vertex) String() string {
	if v.tx != nil {
		return "transaction " + v.tx.id
	}
	return fmt.Sprintf("thread %d on node %s", v.thread, v.node)
}

// edge is a wait: from waits for to, on node.
type edge struct {
	to   vertex
	node string
}

// lockWaitsSQL lists a server's lock waits: the waiting and the blocking
// server thread.
const lockWaitsSQL = `SELECT r.trx_mysql_thread_id, b.trx_mysql_thread_id FROM information_schema.INNODB_LOCK_WAITS w
 JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id
 JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id`

// check reads the lock waits of the nodes txs reach and stops a victim in
// each cycle.
func (d *Detector) check(ctx context.Context, txs []view) {
	d.checks.Add(1)
	owner := map[engine.Held]*view{}
	var nodes []string
	for i := range txs {
		for _, h := range txs[i].held {
			owner[h] = &txs[i]
			if !slices.Contains(nodes, h.Node) {
				nodes = append(nodes, h.Node)
			}
		}
	}
	vertexOf := func(node string, thread uint32) vertex {
		if v := owner[engine.Held{Node: node, Thread: thread}]; v != nil {
			return vertex{tx: v}
		}
		return vertex{node: node, thread: thread}
	}
	graph := map[vertex][]edge{}
	all := d.env.Nodes()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, name := range nodes {
		n := all[name]
		if n == nil {
			continue
		}
		wg.Go(func() {
			qctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			res, err := n.Master.Query(qctx, lockWaitsSQL)
			if err != nil {
				d.log.Debug("deadlock: reading the lock waits failed", zap.String("node", name), zap.Error(err))
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, r := range res.Rows {
				if len(r) < 2 || r[0] == nil || r[1] == nil {
					continue
				}
				w, err1 := strconv.ParseUint(*r[0], 10, 32)
				b, err2 := strconv.ParseUint(*r[1], 10, 32)
				if err1 != nil || err2 != nil {
					continue
				}
				from, to := vertexOf(name, uint32(w)), vertexOf(name, uint32(b))
				if from != to {
					graph[from] = append(graph[from], edge{to: to, node: name})
				}
			}
		})
	}
	wg.Wait()
	for {
		cycle := findCycle(graph)
		if cycle == nil {
			return
		}
		victim := d.resolve(cycle)
		// The victim's waits end with its statement: look for other
		// cycles without it.
		delete(graph, victim)
		for v, es := range graph {
			graph[v] = slices.DeleteFunc(es, func(e edge) bool { return e.to == victim })
		}
	}
}

// resolve stops the youngest keyshard transaction of cycle (its vertices
// in wait order, each waiting for the next on the node of its edge) and
// returns its vertex.
func (d *Detector) resolve(cycle []step) vertex {
	var victim *view
	var parts []string
	nodes := map[string]bool{}
	var newest int64
	for _, s := range cycle {
		parts = append(parts, s.from.String()+" waits on node "+s.node+" for "+s.to.String())
		nodes[s.node] = true
		if v := s.from.tx; v != nil {
			if victim == nil || v.began > victim.began || v.began == victim.began && v.id > victim.id {
				victim = v
			}
			newest = max(newest, v.since)
		}
	}
	if victim == nil || len(nodes) < 2 {
		// On one server: the server finds it itself. Without a keyshard
		// transaction: nothing of keyshard's to stop.
		return cycle[0].from
	}
	if victim.tx == nil {
		// Another instance's: it sees the same cycle and stops it.
		d.log.Debug("deadlock across nodes; the victim is another instance's", zap.String("cycle", strings.Join(parts, "; ")),
			zap.String("victim", victim.id))
		return vertex{tx: victim}
	}
	d.cycles.Add(1)
	stopped := victim.tx.Abort(victim.since)
	if stopped {
		d.victims.Add(1)
		if newest > 0 {
			d.latency.Add(time.Now().UnixNano() - newest)
		}
	}
	d.log.Info("deadlock across nodes", zap.String("cycle", strings.Join(parts, "; ")),
		zap.String("victim", victim.id), zap.Bool("stopped", stopped))
	return vertex{tx: victim}
}

// step is one wait of a cycle.
type step struct {
	from, to vertex
	node     string
}

// findCycle returns one cycle of graph (nil: none), in wait order.
func findCycle(graph map[vertex][]edge) []step {
	const (
		white = iota
		grey
		black
	)
	color := map[vertex]int{}
	var path []step
	var found []step
	var visit func(v vertex) bool
	visit = func(v vertex) bool {
		color[v] = grey
		for _, e := range graph[v] {
			switch color[e.to] {
			case grey:
				// The cycle is the path from e.to's step on, closed by e.
				start := len(path)
				for i := range path {
					if path[i].from == e.to {
						start = i
						break
					}
				}
				found = append(slices.Clone(path[start:]), step{from: v, to: e.to, node: e.node})
				return true
			case white:
				path = append(path, step{from: v, to: e.to, node: e.node})
				if visit(e.to) {
					return true
				}
				path = path[:len(path)-1]
			}
		}
		color[v] = black
		return false
	}
	// Visit in a fixed order, so that a test sees one answer.
	starts := make([]vertex, 0, len(graph))
	for v := range graph {
		starts = append(starts, v)
	}
	slices.SortFunc(starts, func(a, b vertex) int { return strings.Compare(a.String(), b.String()) })
	for _, v := range starts {
		if color[v] == white && visit(v) {
			return found
		}
	}
	return nil
}

// share publishes this instance's transactions while one of its
// statements waits (local: what waiting found; nil when none waits) and
// returns them with the other instances' fresh ones (nil: nothing to
// check).
func (d *Detector) share(ctx context.Context, local []view) []view {
	if local == nil {
		if d.shared {
			if err := d.peers.Share(ctx, nil); err == nil {
				d.shared = false
			}
		}
		return nil
	}
	e := entry{At: time.Now().UnixNano()}
	for _, v := range local {
		e.Txs = append(e.Txs, txEntry{ID: v.id, Began: v.began, Since: v.since, Held: v.held})
	}
	b, _ := json.Marshal(e)
	if err := d.peers.Share(ctx, b); err != nil {
		d.log.Debug("deadlock: publishing the waiting transactions failed", zap.Error(err))
	} else {
		d.shared = true
	}
	others, err := d.peers.Others(ctx)
	if err != nil {
		d.log.Debug("deadlock: reading the other instances' transactions failed", zap.Error(err))
		return local
	}
	stale := time.Now().Add(-peerStale).UnixNano()
	for _, raw := range others {
		var o entry
		if json.Unmarshal(raw, &o) != nil || o.At < stale {
			continue
		}
		for _, t := range o.Txs {
			local = append(local, view{id: t.ID, held: t.Held, began: t.Began, since: t.Since})
		}
	}
	return local
}
