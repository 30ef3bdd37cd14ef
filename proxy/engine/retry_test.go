package engine

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// Reads that lose their backend connection before any answer reached the
// client run again elsewhere; what already reached the client, or runs in a
// transaction, is never run twice.

// fullAnswer is the answer to "SELECT id FROM t" in these tests.
var fullAnswer = resultSet(idDef, rowsOf("1", "2"), wire.AppendResultEndOK(nil, 0, autocommit))

// dies answers the statements containing sub by closing the connection,
// the first n times (n < 0: always); then as next does.
func dies(sub string, n int32, next handler) handler {
	var seen atomic.Int32
	return func(c *fakeConn, cmd byte, arg string) bool {
		if !strings.Contains(arg, sub) && !(sub == "" && cmd != mysql.COM_QUERY) {
			return false
		}
		if n < 0 || seen.Add(1) <= n {
			c.nc.Close()
			return true
		}
		return next != nil && next(c, cmd, arg)
	}
}

// withReplicas replaces node n1 of en by one whose master is en's first
// fake and whose replicas are new fakes answering as reps do; reads split,
// master_reads on; health checks every health (0: none).
func withReplicas(t *testing.T, en *env, health time.Duration, reps ...handler) (*backend.Node, []*fakeServer) {
	t.Helper()
	var fakes []*fakeServer
	var addrs []backend.ReplicaAddr
	for _, h := range reps {
		f := newFake(t, h)
		fakes = append(fakes, f)
		addrs = append(addrs, backend.ReplicaAddr{Addr: f.ln.Addr().String(), Weight: 1})
	}
	old := en.nodes["n1"]
	n := backend.NewNode("n1", en.fakes[0].ln.Addr().String(), backend.NodeOptions{
		Pool: old.Options().Pool, Replicas: addrs, MasterReads: true, HealthInterval: health, HealthTimeout: time.Second})
	old.Close()
	en.nodes["n1"] = n
	en.lease.Default, en.lease.Split = n, true
	return n, fakes
}

// dropConns closes every connection the fake holds (it still accepts new
// ones): the server restarted, or closed them while idle.
func (f *fakeServer) dropConns() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.nc.Close()
	}
}

func (f *fakeServer) count(sub string) int {
	n := 0
	for _, q := range f.commands(0) {
		if strings.Contains(q, sub) {
			n++
		}
	}
	return n
}

// A replica whose connections die at each read: every read is retried once,
// on the other replica, never on the same one; none fails.
func TestRetryReadOtherReplica(t *testing.T) {
	en := newEnv(t, deprecate, answer("SELECT", fullAnswer...))
	_, reps := withReplicas(t, en, 0, dies("SELECT", -1, nil), answer("SELECT", fullAnswer...))
	for i := range 30 {
		before := en.tr.retries
		_, pkts, err := en.forward(nil, "SELECT id FROM t")
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		wantPackets(t, pkts, fullAnswer)
		if d := en.tr.retries - before; d > 1 {
			t.Fatalf("read %d retried %d times: the retry went back to the failed replica", i, d)
		}
	}
	if a, b := reps[0].count("SELECT"), reps[1].count("SELECT"); a == 0 || a != en.tr.retries || b != 30 || en.fakes[0].count("SELECT") != 0 {
		t.Errorf("replica A got %d reads, B %d, master %d; %d retries", a, b, en.fakes[0].count("SELECT"), en.tr.retries)
	}
}

// A replica that dies (its connections cut, new ones refused) leaves the
// read rotation at the first failure, not after its health checks (which
// run once an hour here: at most one fails, and it takes two).
func TestRetryDeadReplicaTakenOut(t *testing.T) {
	en := newEnv(t, deprecate, answer("SELECT", fullAnswer...))
	n, reps := withReplicas(t, en, time.Hour, answer("SELECT", fullAnswer...), answer("SELECT", fullAnswer...))
	a := n.Replicas()[0].Pool
	for a.Stats().Idle == 0 {
		if _, _, err := en.forward(nil, "SELECT id FROM t"); err != nil {
			t.Fatal(err)
		}
	}
	reps[0].close()
	for i := 0; a.Health() != backend.Down; i++ {
		if _, pkts, err := en.forward(nil, "SELECT id FROM t"); err != nil {
			t.Fatalf("read %d with replica A gone: %v", i, err)
		} else {
			wantPackets(t, pkts, fullAnswer)
		}
		if i == 100 {
			t.Fatalf("replica A still %v after 100 reads (%s)", a.Health(), a.LastCheckError())
		}
		time.Sleep(time.Millisecond)
	}
	retries := en.tr.retries
	for range 20 {
		if _, _, err := en.forward(nil, "SELECT id FROM t"); err != nil {
			t.Fatal(err)
		}
	}
	if en.tr.retries != retries {
		t.Errorf("%d retries with replica A down: reads still go there", en.tr.retries-retries)
	}
}

// Idle connections of a server that dropped them all: the first one found
// dead makes the pool ping the others before use, so the retry gets a new
// connection instead of the next dead one.
func TestRetryStaleIdleConnectionsPinged(t *testing.T) {
	en := newEnv(t, deprecate, answer("SELECT", fullAnswer...))
	var held []*backend.Conn
	for range 3 {
		bc, err := en.lease.Acquire(nil, Write)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, bc)
	}
	for _, bc := range held {
		en.lease.Release(bc)
	}
	en.wantPool("n1", 3, 0, 3, 0)
	en.fakes[0].dropConns()
	time.Sleep(20 * time.Millisecond)
	_, pkts, err := en.forward(nil, "SELECT id FROM t")
	if err != nil {
		t.Fatal(err)
	}
	wantPackets(t, pkts, fullAnswer)
	if en.tr.retries != 1 {
		t.Errorf("%d retries, want 1 (the dead idle connections pinged, not used)", en.tr.retries)
	}
	en.wantPool("n1", 1, 0, 1, 3)
}

// A fan-out leg whose connection dies before its answer runs again; a
// batch leg that dies after its first statement's answer runs the rest.
func TestRetryFanOutLeg(t *testing.T) {
	rows := func(ids ...string) [][]byte {
		return resultSet(idDef, rowsOf(ids...), wire.AppendResultEndOK(nil, 0, autocommit))
	}
	t.Run("before its answer", func(t *testing.T) {
		en := newEnv(t, deprecate, dies("t_0000", 1, answer("t_0000", rows("1")...)), answer("t_0001", rows("2")...))
		_, pkts, err := en.do(func() error {
			return en.e.Route(fanRouting("SELECT id FROM $t", 0), nil, Run{Kind: router.KindSelect, Read: true, One: noOne(t)})
		})
		if err != nil {
			t.Fatal(err)
		}
		wantPackets(t, pkts, cat(resultSet(idDef, nil, nil)[:2], rowsOf("1", "2"), one(wire.AppendResultEndOK(nil, 0, autocommit))))
		if en.tr.retries != 1 || en.fakes[0].count("t_0000") != 2 {
			t.Errorf("%d retries, n1 got %q", en.tr.retries, en.fakes[0].commands(0))
		}
		en.wantPool("n1", 1, 0, 1, 1)
		en.wantPool("n2", 1, 0, 1, 0)
	})
	t.Run("after a statement of its batch", func(t *testing.T) {
		first := resultSet(idDef, rowsOf("1"), wire.AppendResultEndOK(nil, 0, autocommit|wire.StatusMoreResultsExists))
		var attempt atomic.Int32
		en := newEnv(t, deprecate, func(c *fakeConn, cmd byte, arg string) bool {
			if cmd != mysql.COM_QUERY || !strings.Contains(arg, "FROM t_") {
				return false
			}
			if attempt.Add(1) == 1 {
				_ = c.send(first...) // t_0000's answer, then the connection dies
				c.nc.Close()
				return true
			}
			_ = c.send(rows("2")...)
			return true
		})
		rt := &router.Routing{Routes: []router.Route{{Node: "n1", SubTables: []string{"t_0000", "t_0001"},
			SQL: []string{"SELECT id FROM t_0000", "SELECT id FROM t_0001"}}}}
		_, pkts, err := en.do(func() error {
			return en.e.Route(rt, nil, Run{Kind: router.KindSelect, Read: true, One: noOne(t)})
		})
		if err != nil {
			t.Fatal(err)
		}
		wantPackets(t, pkts, cat(resultSet(idDef, nil, nil)[:2], rowsOf("1", "2"), one(wire.AppendResultEndOK(nil, 0, autocommit))))
		var sent []string
		for _, q := range en.fakes[0].commands(0) {
			if strings.Contains(q, "FROM t_") {
				sent = append(sent, q)
			}
		}
		if len(sent) != 2 || sent[1] != "SELECT id FROM t_0001" {
			t.Errorf("n1 got %q: want the batch, then t_0001's statement alone", sent)
		}
	})
	t.Run("a write is not retried", func(t *testing.T) {
		en := newEnv(t, deprecate, dies("t_0000", 1, nil), answer("t_0001", wire.AppendOK(nil, 1, 0, autocommit, 0, "")))
		_, _, err := en.do(func() error {
			return en.e.Route(fanRouting("UPDATE $t SET a = 1", 0), nil, Run{Kind: router.KindUpdate, One: noOne(t)})
		})
		if backend.KindOf(err) != backend.KindLost || en.tr.retries != 0 || en.fakes[0].count("t_0000") != 1 {
			t.Errorf("error %v, %d retries, n1 got %q", err, en.tr.retries, en.fakes[0].commands(0))
		}
	})
}

// A merge leg whose connection dies before its answer runs again; one
// whose replica refuses connections gets another backend.
func TestRetryMergeLeg(t *testing.T) {
	defs := [][]byte{colDef("id", wire.TypeLongLong, 63), colDef("id", wire.TypeLongLong, 63),
		colDef("WEIGHT_STRING(RTRIM(`id`))", wire.TypeVarString, 63)}
	leg := func(ids ...string) handler {
		return func(c *fakeConn, cmd byte, arg string) bool {
			if cmd != mysql.COM_QUERY || !strings.Contains(arg, "FROM `t_000") {
				return false
			}
			ps := resultSet(defs, nil, nil)[:4]
			for _, id := range ids {
				ps = append(ps, textRow(id, id, id))
			}
			_ = c.send(append(ps, wire.AppendResultEndOK(nil, 0, autocommit))...)
			return true
		}
	}
	want := resultSet(defs[:1], rowsOf("1", "2", "3"), wire.AppendResultEndOK(nil, 0, autocommit))
	t.Run("dies", func(t *testing.T) {
		en := newEnv(t, deprecate, leg("1", "4"), dies("FROM `t_000", 1, leg("2", "3")))
		rt, pl := mergeRouting(t, "SELECT id FROM t ORDER BY id LIMIT 3")
		_, pkts, err := en.do(func() error { return en.e.Route(rt, pl, Run{Kind: router.KindSelect, Read: true}) })
		if err != nil {
			t.Fatal(err)
		}
		wantPackets(t, pkts, want)
		if en.tr.retries != 1 {
			t.Errorf("%d retries", en.tr.retries)
		}
		en.wantPool("n2", 1, 0, 1, 1)
	})
	t.Run("refused", func(t *testing.T) {
		en := newEnv(t, deprecate, leg("1", "4"), leg("2", "3"))
		_, reps := withReplicas(t, en, 0, leg("1", "4"), leg("1", "4"))
		reps[0].close()
		for i := range 20 {
			_, pkts, err := en.do(func() error {
				rt, pl := mergeRouting(t, "SELECT id FROM t ORDER BY id LIMIT 3")
				return en.e.Route(rt, pl, Run{Kind: router.KindSelect, Read: true})
			})
			if err != nil {
				t.Fatalf("merge %d: %v", i, err)
			}
			wantPackets(t, pkts, want)
		}
		if reps[1].count("t_000") != 20 {
			t.Errorf("replica B served %d legs, want 20", reps[1].count("t_000"))
		}
	})
}

// A prepared execution (Engine.Execute) and a PREPARE whose connection
// dies before any answer run again; an execution that is no plain read
// does not.
func TestRetryPrepared(t *testing.T) {
	send := func(bc *backend.Conn) error {
		return bc.Packets().WriteCommandString(mysql.COM_QUERY, "SELECT id FROM t")
	}
	for _, retry := range []bool{true, false} {
		en := newEnv(t, deprecate, dies("SELECT", 1, answer("SELECT", fullAnswer...)))
		_, pkts, err := en.do(func() error { return en.e.Execute(nil, Exec{Read: true, Retry: retry, Send: send}) })
		if retry {
			if err != nil {
				t.Fatal(err)
			}
			wantPackets(t, pkts, fullAnswer)
		} else if backend.KindOf(err) != backend.KindLost || en.tr.retries != 0 {
			t.Errorf("not retriable: error %v, %d retries", err, en.tr.retries)
		}
	}

	prepOK := make([]byte, 12)
	prepOK[0] = wire.OKHeader
	binary.LittleEndian.PutUint32(prepOK[1:], 55)
	en := newEnv(t, deprecate, dies("", 1, func(c *fakeConn, cmd byte, arg string) bool {
		if cmd != mysql.COM_STMT_PREPARE {
			return false
		}
		_ = c.send(prepOK)
		return true
	}))
	_, pkts, err := en.do(func() error {
		_, err := en.e.Prepare(nil, true, "k", "DO ?", nil, 7)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkts) != 1 || binary.LittleEndian.Uint32(pkts[0][1:]) != 7 || en.tr.retries != 1 {
		t.Errorf("client got %q after %d retries, want the PREPARE's OK with statement id 7", pkts, en.tr.retries)
	}
}

// A server that answers with "shutdown in progress" (or "connection
// killed") instead of the result: a read runs again, a write gets the
// error, naming the node.
func TestRetryServerGoneError(t *testing.T) {
	gone := wire.AppendErr(nil, 1053, "08S01", "Server shutdown in progress")
	var reads atomic.Int32
	en := newEnv(t, deprecate, func(c *fakeConn, cmd byte, arg string) bool {
		switch {
		case cmd != mysql.COM_QUERY:
			return false
		case strings.HasPrefix(arg, "SELECT") && reads.Add(1) == 1, strings.HasPrefix(arg, "UPDATE"):
			_ = c.send(gone)
			c.nc.Close()
		case strings.HasPrefix(arg, "SELECT"):
			_ = c.send(fullAnswer...)
		default:
			return false
		}
		return true
	})
	_, pkts, err := en.forward(nil, "SELECT id FROM t")
	if err != nil || en.tr.retries != 1 {
		t.Fatalf("read: %v after %d retries", err, en.tr.retries)
	}
	wantPackets(t, pkts, fullAnswer)
	_, pkts, err = en.forward(nil, "UPDATE t SET a = 1")
	var be *backend.Error
	if !errors.As(err, &be) || be.Kind != backend.KindLost || len(pkts) != 1 || !strings.Contains(string(pkts[0]), "Server shutdown in progress") {
		t.Errorf("write: %v, client got %q", err, pkts)
	}
	if en.tr.retries != 1 {
		t.Errorf("the write was retried")
	}
}

// A read inside a transaction is never run again: the transaction died
// with its connection.
func TestRetryNotInTransaction(t *testing.T) {
	en := newEnv(t, deprecate, dies("SELECT", 1, answer("SELECT", fullAnswer...)))
	if _, _, err := en.forward(nil, "BEGIN"); err != nil || en.lease.Pinned() == nil {
		t.Fatalf("BEGIN: %v, pinned %v", err, en.lease.Pinned())
	}
	_, _, err := en.forward(nil, "SELECT id FROM t")
	if !errors.Is(err, ErrClose) || en.tr.retries != 0 {
		t.Errorf("read in a transaction: %v after %d retries, want the session closed, no retry", err, en.tr.retries)
	}
}
