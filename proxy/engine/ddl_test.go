package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// ddlFanOut runs a DDL over t_0000 on n1 and t_0001 on n2 and returns the
// OK the client got.
func (en *env) ddlFanOut() wire.OK {
	en.t.Helper()
	_, pkts, err := en.do(func() error {
		return en.e.Route(fanRouting("CREATE TABLE $t (a INT)", 0), nil, Run{Kind: router.KindDDL, One: noOne(en.t)})
	})
	if err != nil || len(pkts) != 1 || pkts[0][0] != wire.OKHeader {
		en.t.Fatalf("DDL fan-out: %v, client got %q", err, pkts)
	}
	ok, err := wire.ParseOK(pkts[0])
	if err != nil {
		en.t.Fatal(err)
	}
	return ok
}

// wantDDLOutsideTx fails unless node i+1 received the DDL after its first
// skip commands, or if it received one that opens a transaction, an XA
// branch or a savepoint around it.
func (en *env) wantDDLOutsideTx(i int, skip int) {
	en.t.Helper()
	got := en.fakes[i].commands(0)[skip:]
	for _, q := range got {
		if q == "BEGIN" || strings.HasPrefix(q, "XA ") || q == "SAVEPOINT ks_stmt" {
			en.t.Errorf("n%d received %q around the DDL: %q", i+1, q, got)
		}
	}
	if !slices.Contains(got, "CREATE TABLE t_000"+string(rune('0'+i))+" (a INT)") {
		en.t.Errorf("n%d did not receive the DDL: %q", i+1, got)
	}
}

// With autocommit off and a transaction open on n2, CommitImplicit
// commits it; a DDL then fans out over both nodes outside any
// transaction, and the session keeps autocommit off with none open.
func TestLeaseCommitImplicitLocal(t *testing.T) {
	en := newEnv(t, deprecate, nil, nil)
	l, n1, n2 := en.lease, en.nodes["n1"], en.nodes["n2"]
	bc := en.acquire(n1, Write)
	en.exec(bc, "SET AUTOCOMMIT = 0")
	l.Release(bc)
	o := en.acquire(n2, Write)
	en.exec(o, "UPDATE t SET a = 1")
	l.Release(o)
	if l.Pinned() != o || !l.InTx() {
		t.Fatal("the UPDATE did not open a transaction on n2")
	}
	if err := l.CommitImplicit(); err != nil {
		t.Fatal(err)
	}
	if got := en.fakes[1].commands(o.ThreadID()); !slices.Equal(got[len(got)-2:], []string{"UPDATE t SET a = 1", "COMMIT"}) {
		t.Errorf("n2 received %q", got)
	}
	if l.Pinned() != nil || l.InTx() || l.TxOpen() || l.Vars.Autocommit || l.Status() != 0 {
		t.Fatalf("after CommitImplicit: pinned %v in tx %v autocommit %v status %#x", l.Pinned() != nil, l.InTx(), l.Vars.Autocommit, l.Status())
	}
	skip1, skip2 := len(en.fakes[0].commands(0)), len(en.fakes[1].commands(0))
	if ok := en.ddlFanOut(); ok.Status&(wire.StatusInTrans|wire.StatusAutocommit) != 0 {
		t.Errorf("the DDL's OK has status %#x, want autocommit off and no transaction", ok.Status)
	}
	en.wantDDLOutsideTx(0, skip1)
	en.wantDDLOutsideTx(1, skip2)
	if l.Pinned() != nil || l.TxOpen() || l.Vars.Autocommit || !l.Holding() {
		t.Errorf("after the DDL: pinned %v tx open %v autocommit %v", l.Pinned() != nil, l.TxOpen(), l.Vars.Autocommit)
	}
	en.wantPool("n1", 1, 0, 1, 0)
	en.wantPool("n2", 1, 0, 1, 0)
	// The next write opens a transaction again, on the session's setting.
	o = en.acquire(n2, Write)
	en.exec(o, "UPDATE t SET a = 2")
	l.Release(o)
	if !l.InTx() {
		t.Error("the write after the DDL opened no transaction")
	}
}

// A transaction over two nodes (XA) is committed in two phases by
// CommitImplicit, and the DDL after it joins no branch; a deferred BEGIN
// is dropped.
func TestLeaseCommitImplicitBranches(t *testing.T) {
	en := newEnv(t, deprecate, nil, nil)
	xa := &fakeAtomic{}
	l, n1, n2 := en.lease, en.nodes["n1"], en.nodes["n2"]
	l.XA = xa
	first := en.acquire(n1, Write)
	en.exec(first, "BEGIN")
	en.exec(first, "UPDATE t1")
	l.Release(first)
	br := en.acquire(n2, Write)
	en.exec(br, "UPDATE t2")
	l.Release(br)
	if err := l.CommitImplicit(); err != nil {
		t.Fatal(err)
	}
	xid := "'ks-x-1-2-n1','n2'"
	if got := en.fakes[1].commands(br.ThreadID()); !slices.Equal(got[len(got)-3:], []string{"XA END " + xid, "XA PREPARE " + xid, "XA COMMIT " + xid}) {
		t.Errorf("n2 received %q", got)
	}
	if got := en.fakes[0].commands(first.ThreadID()); got[len(got)-1] != "COMMIT" {
		t.Errorf("n1 received %q", got)
	}
	if l.Pinned() != nil || l.Branches() != 0 || l.TxOpen() {
		t.Fatalf("after CommitImplicit: pinned %v branches %d", l.Pinned() != nil, l.Branches())
	}
	l.Defer("BEGIN")
	if err := l.CommitImplicit(); err != nil || l.Deferred() {
		t.Fatalf("a deferred BEGIN: %v, still deferred %v", err, l.Deferred())
	}
	skip1, skip2 := len(en.fakes[0].commands(0)), len(en.fakes[1].commands(0))
	en.ddlFanOut()
	en.wantDDLOutsideTx(0, skip1)
	en.wantDDLOutsideTx(1, skip2)
	if l.Pinned() != nil || l.Branches() != 0 || l.TxOpen() {
		t.Errorf("after the DDL: pinned %v branches %d tx open %v", l.Pinned() != nil, l.Branches(), l.TxOpen())
	}
}

// A two-phase commit that fails (a branch refuses XA PREPARE) rolls the
// transaction back on every node, and CommitImplicit says so: the DDL
// must not run.
func TestLeaseCommitImplicitFails(t *testing.T) {
	en := newEnv(t, deprecate, nil, func(c *fakeConn, cmd byte, arg string) bool {
		if cmd == mysql.COM_QUERY && strings.HasPrefix(arg, "XA PREPARE ") {
			c.fail(mysql.ER_XAER_RMFAIL, "XAER_RMFAIL")
			return true
		}
		return false
	})
	l, n1, n2 := en.lease, en.nodes["n1"], en.nodes["n2"]
	l.XA = &fakeAtomic{}
	first := en.acquire(n1, Write)
	en.exec(first, "BEGIN")
	en.exec(first, "UPDATE t1")
	l.Release(first)
	br := en.acquire(n2, Write)
	en.exec(br, "UPDATE t2")
	l.Release(br)
	err := l.CommitImplicit()
	var ee *Error
	if !errors.As(err, &ee) || ee.Kind != KindTxLost || !strings.Contains(ee.Msg, "rolled back on every node") {
		t.Fatalf("CommitImplicit with a branch refusing PREPARE: %v", err)
	}
	if got := en.fakes[0].commands(first.ThreadID()); got[len(got)-1] != "ROLLBACK" {
		t.Errorf("n1 received %q, want its part rolled back", got)
	}
	if l.Pinned() != nil || l.Branches() != 0 || l.TxOpen() {
		t.Errorf("after the failed commit: pinned %v branches %d tx open %v", l.Pinned() != nil, l.Branches(), l.TxOpen())
	}
}
