package xa

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/keyshard/keyshard/backend"
	"go.uber.org/zap"
)

// Liveness of keyshard instances, kept on the backends themselves.
//
// Each keyshard process holds, for its whole life, the named lock
// keyshard-xa-<instance> (GET_LOCK; <instance> is the random id in every
// XID it makes) on a connection of its own to every node's master: not a
// pooled one, re-opened and the lock taken again when it drops (the
// server restarted, the connection was killed) or the node's master
// moves, closed when the coordinator stops. A process that dies, SIGKILL
// included, loses its connections and the servers free its locks at once
// (a host that vanishes without closing its sockets: once the server
// drops the connection, by TCP keepalive or wait_timeout).
//
// Recovery asks the decision node of a prepared branch that has no
// decision (the node in its XID) whether its instance's lock is held
// (IS_USED_LOCK). Free: the instance is gone, no commit decision can come
// from it any more, and the branch is rolled back at once instead of
// holding its row locks for xa_prepared_timeout. Held, or the question
// cannot be asked (the node is down), or the branch is this process's:
// the timeout rule as before.
//
// This only changes when an undecided branch is rolled back, not whether
// that is safe, which the decision table already ensures: recovery first
// records the rollback (an INSERT of the transaction's row, autocommit),
// and the branches are rolled back only once that row says 'R'. A
// coordinator records its commit decision in the same row: for a
// transaction, inside its first node's local transaction (DecisionSQL),
// for a write statement by an INSERT of its own (Decide). Whichever
// INSERT comes first wins: the other fails with a duplicate key (waiting,
// if the first is not committed yet, for it to commit or roll back), and
// its author follows the row (decide reads it back). So a live instance
// wrongly seen dead (its lock connection to that node dropped for a
// moment, a node restarted and the lock not taken again yet) loses
// nothing but the transaction it was committing: its commit decision
// fails with a duplicate, and it rolls back every branch and answers an
// error (Decide: "rolled back by recovery"; a transaction: COMMIT failed,
// rolled back on every node); a commit decision recorded before recovery
// looked is found by recovery, which commits.

// lockName is the liveness lock of instance.
func lockName(instance string) string { return "keyshard-xa-" + instance }

// lockCheckEvery is how often the liveness locks are checked (and taken
// again where lost).
const lockCheckEvery = time.Second

// Instance is this process's id in the XIDs it makes, and in the name of
// its liveness lock.
func (x *Coordinator) Instance() string { return x.instance }

// xidInstance is the instance that made xid ("" if not keyshard's).
func xidInstance(xid string) string {
	if _, _, ok := parseXID(xid); !ok {
		return ""
	}
	return strings.SplitN(xid, "-", 3)[1]
}

// lockConn is this instance's liveness lock on one node's master: the
// connection holding it (nil while not held).
type lockConn struct {
	addr   string
	bc     *backend.Conn
	failed bool // the last attempt to take it failed (logged once)
}

// holdLocks keeps this instance's liveness lock on every node's master
// until the coordinator stops, then closes the connections (freeing the
// locks) and closes done.
func (x *Coordinator) holdLocks(done chan<- struct{}) {
	defer close(done)
	held := map[string]*lockConn{}
	defer func() {
		for _, lc := range held {
			if lc.bc != nil {
				lc.bc.Close()
			}
		}
	}()
	t := time.NewTicker(lockCheckEvery)
	defer t.Stop()
	for {
		x.checkLocks(held)
		select {
		case <-x.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkLocks makes sure held has the lock on every node's master, the
// nodes at once (one that does not answer holds up no other): a
// connection that no longer answers is closed and the lock taken again on
// a new one; a node gone from the configuration, or whose master moved,
// has its old one closed.
func (x *Coordinator) checkLocks(held map[string]*lockConn) {
	nodes := x.env.Nodes()
	for name, lc := range held {
		if n := nodes[name]; n == nil || n.Master.Addr() != lc.addr {
			if lc.bc != nil {
				lc.bc.Close()
			}
			delete(held, name)
		}
	}
	var wg sync.WaitGroup
	for name, n := range nodes {
		lc := held[name]
		if lc == nil {
			lc = &lockConn{addr: n.Master.Addr()}
			held[name] = lc
		}
		wg.Go(func() { x.checkLock(name, n.Master, lc) }) // each touches its own lc only
	}
	wg.Wait()
}

// checkLock makes sure lc holds the lock on p (node name's master).
func (x *Coordinator) checkLock(name string, p *backend.Pool, lc *lockConn) {
	if lc.bc != nil {
		err := ping(lc.bc)
		if err == nil {
			return
		}
		x.log.Warn("the XA liveness lock's connection was lost; taking the lock again", zap.String("node", name), zap.Error(err))
		lc.bc.Close()
		lc.bc = nil
	}
	if x.ctx.Err() != nil {
		return
	}
	bc, err := x.takeLock(p)
	if err != nil {
		if !lc.failed && x.ctx.Err() == nil {
			x.log.Warn("cannot take the XA liveness lock (retrying every second; until then another instance's recovery may "+
				"take this one for dead and roll back its transactions there before their commit decision)", zap.String("node", name), zap.Error(err))
		}
		lc.failed = true
		return
	}
	if lc.failed {
		x.log.Info("XA liveness lock taken", zap.String("node", name))
	}
	lc.bc, lc.failed = bc, false
}

// ping checks that bc still answers (its session, and the lock with it,
// lives).
func ping(bc *backend.Conn) error {
	if err := bc.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	if err := bc.Ping(); err != nil {
		return err
	}
	return bc.SetDeadline(time.Time{})
}

// takeLock opens a connection of its own to p's server and takes this
// instance's liveness lock on it.
func (x *Coordinator) takeLock(p *backend.Pool) (*backend.Conn, error) {
	ctx, cancel := context.WithTimeout(x.ctx, 10*time.Second)
	defer cancel()
	bc, err := p.Dial(ctx)
	if err != nil {
		return nil, err
	}
	dl, _ := ctx.Deadline()
	_ = bc.SetDeadline(dl)
	r, err := bc.Exec("SELECT GET_LOCK(" + backend.Quote(lockName(x.instance)) + ", 0)")
	if err == nil && (len(r.Rows) != 1 || len(r.Rows[0]) != 1 || r.Rows[0][0] == nil || *r.Rows[0][0] != "1") {
		// Another connection holds it: only another process with the
		// same random instance id could.
		err = fmt.Errorf("GET_LOCK(%s): held by another connection", lockName(x.instance))
	}
	if err == nil {
		err = bc.SetDeadline(time.Time{})
	}
	if err != nil {
		bc.Close()
		return nil, err
	}
	return bc, nil
}

// liveness is what recovery knows of an instance.
type liveness int8

const (
	unknown liveness = iota // its decision node cannot tell (down)
	alive
	dead
)

// liveness tells whether the instance that made xid lives: this one does;
// another by its lock on xid's decision node. known caches the answers of
// one recovery pass, by decision node and instance.
func (x *Coordinator) liveness(xid string, known map[string]liveness) liveness {
	inst := xidInstance(xid)
	if inst == x.instance {
		return alive
	}
	_, node, _ := parseXID(xid)
	key := node + "\x00" + inst
	if l, ok := known[key]; ok {
		return l
	}
	l := unknown
	if p, _, err := x.logPool(node); err == nil {
		r, err := p.Query(x.ctx, "SELECT IS_USED_LOCK("+backend.Quote(lockName(inst))+")")
		switch {
		case err != nil:
			x.log.Debug("cannot ask whether an XA instance lives", zap.String("node", node), zap.String("instance", inst), zap.Error(err))
		case len(r.Rows) == 1 && len(r.Rows[0]) == 1 && r.Rows[0][0] == nil:
			l = dead
		case len(r.Rows) == 1:
			l = alive
		}
	}
	known[key] = l
	return l
}
