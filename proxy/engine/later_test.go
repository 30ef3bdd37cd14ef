package engine

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// A transaction over two nodes is answered only once its branch's XA
// COMMIT is: another connection reading after the answer must see the
// whole transaction, as on one server.
func TestLeaseCommitBeforeAnswer(t *testing.T) {
	hold := make(chan struct{})
	var committed atomic.Bool
	en := newEnv(t, deprecate, nil, func(c *fakeConn, cmd byte, arg string) bool {
		if cmd == mysql.COM_QUERY && strings.HasPrefix(arg, "XA COMMIT ") {
			<-hold
			committed.Store(true)
			c.ok(0, 0)
			return true
		}
		return false
	})
	l, n1, n2 := en.lease, en.nodes["n1"], en.nodes["n2"]
	xa := &fakeAtomic{}
	l.XA = xa
	first := en.acquire(n1, Write)
	en.exec(first, "BEGIN")
	en.exec(first, "UPDATE t1")
	l.Release(first)
	br := en.acquire(n2, Write)
	en.exec(br, "UPDATE t2")
	l.Release(br)
	ended := make(chan error, 1)
	go func() {
		_, err := l.EndTx(true)
		ended <- err
	}()
	select {
	case err := <-ended:
		t.Fatalf("EndTx answered (%v) before the branch's XA COMMIT was", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(hold)
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if !committed.Load() {
		t.Fatal("EndTx answered without the branch's XA COMMIT")
	}
	if !slices.Contains(xa.log, "done ks-x-1-2-n1") {
		t.Errorf("coordinator: %q, want the decision forgotten (done) once the branch committed", xa.log)
	}
}

// A branch that only read has no second phase: it ends with XA ROLLBACK
// and, no branch having written, the first node commits alone, with no
// decision.
func TestLeaseReadOnlyBranch(t *testing.T) {
	en := newEnv(t, deprecate, nil, nil)
	l, n1, n2 := en.lease, en.nodes["n1"], en.nodes["n2"]
	xa := &fakeAtomic{}
	l.XA = xa
	first := en.acquire(n1, Write)
	en.exec(first, "BEGIN")
	en.exec(first, "UPDATE t1")
	l.Release(first)
	br := en.acquire(n2, Read)
	en.exec(br, "SELECT 1")
	l.Release(br)
	if handled, err := l.EndTx(true); !handled || err != nil {
		t.Fatalf("EndTx: %v %v", handled, err)
	}
	xid := "'ks-x-1-2-n1','n2'"
	if got, want := en.fakes[0].commands(first.ThreadID()), []string{"BEGIN", "UPDATE t1", "COMMIT"}; !slices.Equal(got, want) {
		t.Errorf("n1 received %q, want %q", got, want)
	}
	if got, want := en.fakes[1].commands(br.ThreadID()), []string{"XA START " + xid, "SELECT 1", "XA END " + xid, "XA ROLLBACK " + xid}; !slices.Equal(got, want) {
		t.Errorf("n2 received %q, want %q", got, want)
	}
	if want := []string{"prepare n1", "xid n1", "outcome true 1"}; !slices.Equal(xa.log, want) {
		t.Errorf("coordinator: %q, want %q", xa.log, want)
	}
	en.wantPool("n2", 1, 0, 1, 0)
}
