package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// acquire is Lease.Acquire that must succeed.
func (en *env) acquire(n *backend.Node, p Purpose) *backend.Conn {
	en.t.Helper()
	bc, err := en.lease.Acquire(n, p)
	if err != nil {
		en.t.Fatalf("Acquire: %v", err)
	}
	return bc
}

func (en *env) exec(bc *backend.Conn, sql string) {
	en.t.Helper()
	if _, err := bc.Exec(sql); err != nil {
		en.t.Fatalf("%s: %v", sql, err)
	}
}

func wantCrossNode(t *testing.T, err error) {
	t.Helper()
	var ee *Error
	if !errors.As(err, &ee) || ee.Kind != KindCrossNode || !strings.Contains(ee.Msg, "needs node n2, but the open transaction is on node n1") &&
		!strings.Contains(ee.Msg, "would touch nodes n1 and n2") {
		t.Errorf("error %v, want a cross-node refusal", err)
	}
}

func TestLeaseTransaction(t *testing.T) {
	en := newEnv(t, deprecate, nil, nil)
	l, n1, n2 := en.lease, en.nodes["n1"], en.nodes["n2"]
	bc := en.acquire(n1, Write)
	en.exec(bc, "BEGIN")
	l.Release(bc)
	if l.Pinned() != bc || !l.InTx() || !l.Holding() || l.Status() != autocommit|wire.StatusInTrans {
		t.Fatalf("after BEGIN: pinned %v in tx %v status %#x", l.Pinned() == bc, l.InTx(), l.Status())
	}
	en.wantPool("n1", 1, 1, 0, 0)
	for _, n := range []*backend.Node{nil, n1} {
		if got := en.acquire(n, Write); got != bc {
			t.Errorf("Acquire(%v) inside the transaction: not the pinned connection", n)
		}
		l.Release(bc)
	}
	// Another node is refused, for reads and writes, through the engine too.
	for _, p := range []Purpose{Write, Read} {
		_, err := l.Acquire(n2, p)
		wantCrossNode(t, err)
	}
	_, pkts, err := en.forward(n2, "UPDATE t SET a = 1")
	wantCrossNode(t, err)
	_, fan, ferr := en.do(func() error {
		return en.e.Route(fanRouting("UPDATE $t SET a = 1", 0), nil, Run{Kind: router.KindUpdate, One: noOne(t)})
	})
	wantCrossNode(t, ferr)
	for _, p := range [][][]byte{pkts, fan} {
		if len(p) != 1 || p[0][0] != wire.ErrHeader {
			t.Errorf("client got %q, want one ERR", p)
		}
	}
	en.wantPool("n2", 0, 0, 0, 0)
	// Metadata (PREPARE) may go elsewhere and is never pinned.
	m := en.acquire(n2, Meta)
	l.Release(m)
	if l.Pinned() != bc {
		t.Error("a Meta acquire on another node moved the pin")
	}
	en.wantPool("n2", 1, 0, 1, 0)
	// COMMIT ends the transaction: the connection goes back to its pool.
	en.exec(en.acquire(nil, Write), "COMMIT")
	l.Release(bc)
	if l.Pinned() != nil || l.Holding() || l.Status() != autocommit {
		t.Errorf("after COMMIT: pinned %v status %#x", l.Pinned() != nil, l.Status())
	}
	en.wantPool("n1", 1, 0, 1, 0)
	if got := en.fakes[0].commands(bc.ThreadID()); !slices.Equal(got, []string{"BEGIN", "COMMIT"}) {
		t.Errorf("n1 received %q", got)
	}
}

func TestLeaseStickAndEnd(t *testing.T) {
	for _, c := range []struct {
		name               string
		resetFails         bool
		open, idle, closed int64
	}{
		{"reset", false, 1, 1, 0},
		{"reset refused", true, 0, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			en := newEnv(t, deprecate, func(fc *fakeConn, cmd byte, arg string) bool {
				if cmd == mysql.COM_RESET_CONNECTION && c.resetFails {
					fc.fail(mysql.ER_UNKNOWN_COM_ERROR, "Unknown command")
					return true
				}
				return false
			}, nil)
			l := en.lease
			bc := en.acquire(nil, Write)
			l.Stick("user variables")
			l.Stick("GET_LOCK")
			l.Release(bc)
			if l.Pinned() != bc || l.Sticky() != "user variables" || l.InTx() {
				t.Fatalf("after Stick: pinned %v sticky %q in tx %v", l.Pinned() == bc, l.Sticky(), l.InTx())
			}
			// Not a transaction: another node may serve a statement, whose
			// connection goes back to its pool while the pin stays.
			o := en.acquire(en.nodes["n2"], Write)
			l.Release(o)
			if l.Pinned() != bc {
				t.Error("a statement on another node moved the pin")
			}
			en.wantPool("n2", 1, 0, 1, 0)
			l.End()
			if l.Pinned() != nil || l.Sticky() != "" {
				t.Errorf("after End: pinned %v sticky %q", l.Pinned() != nil, l.Sticky())
			}
			reset := fmt.Sprintf("cmd %d", mysql.COM_RESET_CONNECTION)
			if got := en.fakes[0].commands(bc.ThreadID()); !slices.Equal(got, []string{reset}) {
				t.Errorf("n1 received %q, want one COM_RESET_CONNECTION", got)
			}
			en.wantPool("n1", c.open, 0, c.idle, c.closed)
		})
	}
}

func TestLeaseDeferredBegin(t *testing.T) {
	en := newEnv(t, deprecate, nil, nil)
	l := en.lease
	l.Defer("START TRANSACTION")
	if !l.Deferred() || !l.Holding() || l.Status() != autocommit|wire.StatusInTrans {
		t.Fatalf("deferred %v holding %v status %#x", l.Deferred(), l.Holding(), l.Status())
	}
	// Metadata does not open the transaction.
	m := en.acquire(en.nodes["n1"], Meta)
	l.Release(m)
	if !l.Deferred() || l.Pinned() != nil || len(en.fakes[0].commands(0)) != 0 {
		t.Errorf("Meta acquire: deferred %v pinned %v, n1 received %q", l.Deferred(), l.Pinned() != nil, en.fakes[0].commands(0))
	}
	// The first statement opens it on its own node and connection.
	const upd = "UPDATE t SET a = 1"
	_, pkts, err := en.forward(en.nodes["n2"], upd)
	if err != nil || len(pkts) != 1 || pkts[0][0] != wire.OKHeader {
		t.Fatalf("UPDATE: %v, client got %q", err, pkts)
	}
	bc := en.tr.lastWaited()
	if got := en.fakes[1].commands(bc.ThreadID()); !slices.Equal(got, []string{"START TRANSACTION", upd}) {
		t.Errorf("n2 received %q", got)
	}
	if l.Deferred() || l.Pinned() != bc || !l.InTx() {
		t.Errorf("after the first statement: deferred %v pinned %v in tx %v", l.Deferred(), l.Pinned() == bc, l.InTx())
	}
	_, err = l.Acquire(en.nodes["n1"], Write)
	var ee *Error
	if !errors.As(err, &ee) || ee.Kind != KindCrossNode {
		t.Errorf("n1 inside the n2 transaction: %v", err)
	}
	en.wantPool("n1", 1, 0, 1, 0)
	en.wantPool("n2", 1, 1, 0, 0)
}

func TestLeaseMetaNeverPins(t *testing.T) {
	en := newEnv(t, deprecate, nil)
	l, n1 := en.lease, en.nodes["n1"]
	l.Stick("temporary table")
	m := en.acquire(n1, Meta)
	l.Release(m)
	if l.Pinned() != nil {
		t.Fatal("a Meta acquire of a sticky session was pinned")
	}
	en.wantPool("n1", 1, 0, 1, 0)
	bc := en.acquire(n1, Write)
	l.Release(bc)
	if l.Pinned() != bc {
		t.Fatal("a Write acquire of a sticky session was not pinned")
	}
	// Metadata on the pinned node uses the pinned connection and leaves it pinned.
	if m := en.acquire(n1, Meta|Read); m != bc {
		t.Error("Meta on the pinned node: not the pinned connection")
	} else {
		l.Release(m)
	}
	if l.Pinned() != bc {
		t.Error("releasing a Meta acquire of the pinned connection unpinned it")
	}
	en.wantPool("n1", 1, 1, 0, 0)
}

func TestLeaseLostInTx(t *testing.T) {
	const upd = "UPDATE t SET a = 2"
	en := newEnv(t, deprecate, closeOn(upd))
	if _, _, err := en.forward(nil, "BEGIN"); err != nil || !en.lease.InTx() {
		t.Fatalf("BEGIN: %v, in tx %v", err, en.lease.InTx())
	}
	_, pkts, err := en.forward(nil, upd)
	if err != ErrClose {
		t.Errorf("error %v, want ErrClose", err)
	}
	if len(pkts) != 1 || pkts[0][0] != wire.ErrHeader || !strings.Contains(string(pkts[0]), "connection lost during query") ||
		!strings.HasSuffix(wire.ParseErr(pkts[0]).Message, "the session held an open transaction (rolled back) on that connection, so it ends here") {
		t.Errorf("client got %q, want one error: the lost connection and the lost transaction", pkts)
	}
	if en.lease.Pinned() != nil || en.lease.Holding() {
		t.Error("the lost connection stayed pinned")
	}
	en.wantPool("n1", 0, 0, 0, 1)
}

// A connection lost on another node (a PREPARE's, a hinted statement's)
// leaves the pinned connection and what pins it: its LOCK TABLES and
// sticky state must not be forgotten, or the next release would hand it,
// locks held, to the pool.
func TestLeaseLostElsewhereKeepsPin(t *testing.T) {
	en := newEnv(t, deprecate, nil, nil)
	l, n1, n2 := en.lease, en.nodes["n1"], en.nodes["n2"]
	l.SetLockTables(true)
	l.Stick("user variables")
	pinned := en.acquire(n1, Write)
	l.Release(pinned)
	if l.Pinned() != pinned {
		t.Fatal("not pinned")
	}
	other := en.acquire(n2, Meta)
	if held := l.Lost(other); held != "" {
		t.Errorf("a connection lost on another node reported %q lost with it", held)
	}
	if l.Pinned() != pinned || l.Sticky() != "user variables" || !l.InTx() {
		t.Fatalf("after a loss on n2: pinned %v (want the n1 connection), sticky %q, InTx %v", l.Pinned(), l.Sticky(), l.InTx())
	}
	bc := en.acquire(nil, Write)
	l.Release(bc)
	if bc != pinned || l.Pinned() != pinned {
		t.Error("the next statement did not run on, and keep, the pinned connection")
	}
	en.wantPool("n2", 0, 0, 0, 1)
}

// A pool full of idle connections of one flavor makes room for dials of
// another by closing idle ones, counted with the dials in flight: slow
// concurrent dials never take the open count past max_conns_limit.
func TestPoolBoundAcrossFlavors(t *testing.T) {
	en := newEnv(t, deprecate, nil)
	pool := en.nodes["n1"].Master // MaxConns 4
	a := backend.Flavor{Caps: mysql.CLIENT_DEPRECATE_EOF}
	b := backend.Flavor{Caps: mysql.CLIENT_FOUND_ROWS}
	var held []*backend.Conn
	for range 3 {
		bc, err := pool.Get(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, bc)
	}
	for _, bc := range held {
		pool.Put(bc)
	}
	if st := pool.Stats(); st.Open != 3 || st.Idle != 3 {
		t.Fatalf("setup: open %d idle %d", st.Open, st.Idle)
	}
	en.fakes[0].mu.Lock()
	en.fakes[0].delay = 100 * time.Millisecond
	en.fakes[0].mu.Unlock()
	got := make(chan *backend.Conn, 3)
	for range 3 {
		go func() {
			bc, err := pool.Get(t.Context(), b)
			if err != nil {
				t.Error(err)
			}
			got <- bc
		}()
	}
	for range 3 {
		if bc := <-got; bc != nil {
			defer pool.Put(bc)
		}
	}
	if st := pool.Stats(); st.Open > 4 {
		t.Errorf("open connections %d after 3 concurrent dials of another flavor, above max_conns_limit 4", st.Open)
	}
}

// A lost connection that held session state other than a transaction
// (user variables here) ends the client's connection too, with one error:
// the session must not go on without that state.
func TestLeaseLostStickyState(t *testing.T) {
	const q = "SELECT @v"
	en := newEnv(t, deprecate, closeOn(q))
	en.lease.Stick("user variables")
	if _, _, err := en.forward(nil, "SET @v = 1"); err != nil || en.lease.Pinned() == nil {
		t.Fatalf("SET @v: %v, pinned %v", err, en.lease.Pinned())
	}
	_, pkts, err := en.forward(nil, q)
	if err != ErrClose {
		t.Errorf("error %v, want ErrClose", err)
	}
	if len(pkts) != 1 || !strings.HasSuffix(wire.ParseErr(pkts[0]).Message, "the session held user variables on that connection, so it ends here") {
		t.Errorf("client got %q, want one error naming the lost user variables", pkts)
	}
	if en.lease.Pinned() != nil || en.lease.Sticky() != "" {
		t.Error("the lost connection stayed pinned")
	}
}

// The connection a deferred BEGIN was just opened on is not pinned yet
// while the transaction's first statement runs: if it dies there, the
// transaction is lost all the same, and the session must end rather than
// go on in autocommit.
func TestLeaseLostDeferredBegin(t *testing.T) {
	const upd = "UPDATE t SET a = 3"
	en := newEnv(t, deprecate, closeOn(upd))
	en.lease.Defer("START TRANSACTION")
	_, pkts, err := en.forward(nil, upd)
	if err != ErrClose {
		t.Errorf("error %v, want ErrClose", err)
	}
	if len(pkts) != 1 || !strings.Contains(wire.ParseErr(pkts[0]).Message, "held an open transaction") {
		t.Errorf("client got %q, want one error naming the lost transaction", pkts)
	}
	if en.lease.Holding() || en.lease.Pinned() != nil {
		t.Error("the session still holds a transaction")
	}
}

// closeOn is a fake backend that drops the connection when it receives
// the query sql (answering everything else as usual).
func closeOn(sql string) handler {
	return func(fc *fakeConn, cmd byte, arg string) bool {
		if cmd == mysql.COM_QUERY && arg == sql {
			fc.nc.Close()
			return true
		}
		return false
	}
}

// Autocommit is the session's, replicated like its variables: SET
// autocommit = 0 does not pin, the next connection (any node) is synced
// to it, the transaction that a statement then opens pins and ties the
// session, and after COMMIT the connection goes back to the pool.
func TestLeaseAutocommitOff(t *testing.T) {
	en := newEnv(t, deprecate, nil, nil)
	l, n1, n2 := en.lease, en.nodes["n1"], en.nodes["n2"]
	bc := en.acquire(n1, Write)
	en.exec(bc, "SET AUTOCOMMIT = 0")
	l.Release(bc)
	if l.Pinned() != nil || l.Vars.Autocommit || !l.Holding() || l.InTx() || l.Status() != 0 {
		t.Fatalf("after SET autocommit=0: pinned %v autocommit %v holding %v in tx %v status %#x",
			l.Pinned() != nil, l.Vars.Autocommit, l.Holding(), l.InTx(), l.Status())
	}
	en.wantPool("n1", 1, 0, 1, 0)
	// A fan-out over two nodes would open two transactions: refused,
	// saying why, with nothing sent.
	_, pkts, err := en.do(func() error {
		return en.e.Route(fanRouting("UPDATE $t SET a = 1", 0), nil, Run{Kind: router.KindUpdate, One: noOne(t)})
	})
	var ee *Error
	if !errors.As(err, &ee) || ee.Kind != KindCrossNode || !strings.Contains(ee.Msg, "with autocommit off") ||
		len(pkts) != 1 || pkts[0][0] != wire.ErrHeader {
		t.Fatalf("fan-out with autocommit off: %v, client got %q", err, pkts)
	}
	// A statement on n2 gets a connection synced to autocommit off; it
	// opens a transaction there, which pins.
	o := en.acquire(n2, Write)
	en.exec(o, "UPDATE t SET a = 1")
	l.Release(o)
	if l.Pinned() != o || !l.InTx() || l.Status() != wire.StatusInTrans {
		t.Fatalf("after UPDATE: pinned %v in tx %v status %#x", l.Pinned() == o, l.InTx(), l.Status())
	}
	if got := en.fakes[1].commands(o.ThreadID()); !slices.Equal(got, []string{"SET autocommit = 0", "UPDATE t SET a = 1"}) {
		t.Errorf("n2 received %q", got)
	}
	if _, err = l.Acquire(n1, Write); !errors.As(err, &ee) || !strings.Contains(ee.Msg, "needs node n1, but the open transaction is on node n2") {
		t.Errorf("n1 inside the transaction: %v", err)
	}
	en.exec(en.acquire(nil, Write), "COMMIT")
	l.Release(o)
	if l.Pinned() != nil || l.Vars.Autocommit || l.Status() != 0 {
		t.Errorf("after COMMIT: pinned %v autocommit %v status %#x", l.Pinned() != nil, l.Vars.Autocommit, l.Status())
	}
	en.wantPool("n2", 1, 0, 1, 0)
	// SET autocommit = 1 anywhere turns it back on for the next connection.
	bc = en.acquire(n1, Write)
	en.exec(bc, "SET AUTOCOMMIT = 1")
	l.Release(bc)
	if !l.Vars.Autocommit || l.Holding() || l.Status() != autocommit {
		t.Errorf("after SET autocommit=1: autocommit %v holding %v status %#x", l.Vars.Autocommit, l.Holding(), l.Status())
	}
	o = en.acquire(n2, Write)
	l.Release(o)
	if got := en.fakes[1].commands(o.ThreadID()); got[len(got)-1] != "SET autocommit = 1" {
		t.Errorf("n2 received %q, want autocommit synced back on", got)
	}
}

// With autocommit off, a statement that fails may still have opened a
// transaction (an ERR carries no status): its connection stays pinned
// until an OK says there is none, never going back to the pool holding
// the session's locks.
func TestLeaseAutocommitOffError(t *testing.T) {
	en := newEnv(t, deprecate, func(fc *fakeConn, cmd byte, arg string) bool {
		if cmd == mysql.COM_QUERY && arg == "INSERT dup" {
			fc.inTx = true // InnoDB opened a transaction for the failed statement
			fc.fail(mysql.ER_DUP_ENTRY, "Duplicate entry")
			return true
		}
		return false
	}, nil)
	l, n1 := en.lease, en.nodes["n1"]
	bc := en.acquire(n1, Write)
	en.exec(bc, "SET AUTOCOMMIT = 0")
	l.Release(bc)
	bc = en.acquire(n1, Write)
	if _, err := bc.Exec("INSERT dup"); err == nil {
		t.Fatal("INSERT dup: want an error")
	}
	l.Release(bc)
	if l.Pinned() != bc || !l.InTx() {
		t.Fatalf("after a failed statement with autocommit off: pinned %v in tx %v", l.Pinned() == bc, l.InTx())
	}
	en.wantPool("n1", 1, 1, 0, 0)
	en.exec(en.acquire(nil, Write), "ROLLBACK")
	l.Release(bc)
	if l.Pinned() != nil || l.InTx() {
		t.Errorf("after ROLLBACK: pinned %v in tx %v", l.Pinned() != nil, l.InTx())
	}
	en.wantPool("n1", 1, 0, 1, 0)
}

// fakeAtomic is an Atomic that records what the lease asks of it.
type fakeAtomic struct{ log []string }

func (a *fakeAtomic) TxXID(node string) string {
	a.log = append(a.log, "xid "+node)
	return "ks-x-1-2-" + node
}
func (a *fakeAtomic) DecisionSQL(xid string) string { return "INSERT decision " + xid }
func (a *fakeAtomic) Prepare(_ context.Context, node string) error {
	a.log = append(a.log, "prepare "+node)
	return nil
}
func (a *fakeAtomic) Abort(context.Context, string) (bool, error) { return false, nil }
func (a *fakeAtomic) Done(xid string)                             { a.log = append(a.log, "done "+xid) }
func (a *fakeAtomic) Outcome(committed bool, nodes int) {
	a.log = append(a.log, fmt.Sprintf("outcome %v %d", committed, nodes))
}

// A transaction that reaches a second node (transaction_mode xa): the
// first node's local transaction is pinned, the second gets an XA branch
// that stays with the session; COMMIT prepares the branch, records the
// decision inside the first node's transaction and commits it, then the
// branch; ROLLBACK rolls back both. Every connection goes back to its pool.
func TestLeaseBranches(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			en := newEnv(t, deprecate, nil, nil)
			xa := &fakeAtomic{}
			l, n1, n2 := en.lease, en.nodes["n1"], en.nodes["n2"]
			l.XA = xa
			first := en.acquire(n1, Write)
			en.exec(first, "BEGIN")
			en.exec(first, "UPDATE t1")
			l.Release(first)
			br := en.acquire(n2, Write)
			if br == first || l.Branches() != 1 || !l.Spans() {
				t.Fatalf("second node: branches %d, spans %v", l.Branches(), l.Spans())
			}
			en.exec(br, "UPDATE t2")
			l.Release(br)
			if got := en.acquire(n2, Write); got != br {
				t.Fatal("the branch is not reused for its node")
			}
			l.Release(br)
			en.wantPool("n2", 1, 1, 0, 0)
			handled, err := l.EndTx(commit)
			if !handled || err != nil {
				t.Fatalf("EndTx: %v %v", handled, err)
			}
			xid := "'ks-x-1-2-n1','n2'"
			want1 := []string{"BEGIN", "UPDATE t1", "INSERT decision ks-x-1-2-n1", "COMMIT"}
			want2 := []string{"XA START " + xid, "UPDATE t2", "XA END " + xid, "XA PREPARE " + xid, "XA COMMIT " + xid}
			wantXA := []string{"prepare n1", "xid n1", "outcome true 2", "done ks-x-1-2-n1"}
			if !commit {
				want1 = []string{"BEGIN", "UPDATE t1", "ROLLBACK"}
				want2 = []string{"XA START " + xid, "UPDATE t2", "XA END " + xid, "XA ROLLBACK " + xid}
				wantXA = []string{"prepare n1", "xid n1", "outcome false 2"}
			}
			if got := en.fakes[0].commands(first.ThreadID()); !slices.Equal(got, want1) {
				t.Errorf("n1 received %q, want %q", got, want1)
			}
			if got := en.fakes[1].commands(br.ThreadID()); !slices.Equal(got, want2) {
				t.Errorf("n2 received %q, want %q", got, want2)
			}
			if !slices.Equal(xa.log, wantXA) {
				t.Errorf("coordinator: %q, want %q", xa.log, wantXA)
			}
			if l.Pinned() != nil || l.Branches() != 0 || l.InTx() {
				t.Errorf("after EndTx: pinned %v branches %d", l.Pinned() != nil, l.Branches())
			}
			en.wantPool("n1", 1, 0, 1, 0)
			en.wantPool("n2", 1, 0, 1, 0)
		})
	}
}

// A branch whose connection is lost loses the transaction: Lost says so
// (the session ends), and End rolls the first node back; no connection is
// put back twice.
func TestLeaseBranchLost(t *testing.T) {
	en := newEnv(t, deprecate, nil, closeOn("UPDATE lost")) // n2 drops the connection
	l, n1, n2 := en.lease, en.nodes["n1"], en.nodes["n2"]
	l.XA = &fakeAtomic{}
	first := en.acquire(n1, Write)
	en.exec(first, "BEGIN")
	l.Release(first)
	br := en.acquire(n2, Write)
	if _, err := br.Exec("UPDATE lost"); err == nil {
		t.Fatal("want the connection lost")
	}
	if held := l.Lost(br); held != heldTx || l.Branches() != 0 {
		t.Fatalf("Lost(branch) = %q, branches %d; want the transaction lost", held, l.Branches())
	}
	l.End()
	if got := en.fakes[0].commands(first.ThreadID()); got[len(got)-1] != fmt.Sprintf("cmd %d", mysql.COM_RESET_CONNECTION) {
		t.Errorf("n1 received %q, want the reset that rolls it back", got)
	}
	en.wantPool("n1", 1, 0, 1, 0)
	en.wantPool("n2", 0, 0, 0, 1)
}
