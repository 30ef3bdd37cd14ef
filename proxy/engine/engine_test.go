package engine

import (
	"bytes"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
	"github.com/keyshard/keyshard/router/shard"
)

// Client capabilities: a modern client, and one with classic EOF packets.
const (
	deprecate = mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_DEPRECATE_EOF | mysql.CLIENT_SESSION_TRACK
	classic   = mysql.CLIENT_PROTOCOL_41
)

// answer scripts the answer ps to every COM_QUERY containing sub.
func answer(sub string, ps ...[]byte) handler {
	return func(c *fakeConn, cmd byte, arg string) bool {
		if cmd != mysql.COM_QUERY || !strings.Contains(arg, sub) {
			return false
		}
		_ = c.send(ps...)
		return true
	}
}

// either is the first of hs that answers.
func either(hs ...handler) handler {
	return func(c *fakeConn, cmd byte, arg string) bool {
		for _, h := range hs {
			if h(c, cmd, arg) {
				return true
			}
		}
		return false
	}
}

func cat(parts ...[][]byte) [][]byte {
	var out [][]byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func one(p []byte) [][]byte { return [][]byte{p} }

var idDef = [][]byte{colDef("id", wire.TypeLongLong, 63)}

// warnDefs are SHOW WARNINGS's columns.
var warnDefs = [][]byte{colDef("Level", wire.TypeVarString, 33), colDef("Code", wire.TypeLong, 63), colDef("Message", wire.TypeVarString, 33)}

func rowsOf(vals ...string) [][]byte {
	var out [][]byte
	for _, v := range vals {
		out = append(out, textRow(v))
	}
	return out
}

func TestForwardResultSet(t *testing.T) {
	defs := [][]byte{colDef("id", wire.TypeLongLong, 63), colDef("name", wire.TypeVarString, 45)}
	rows := [][]byte{textRow("1", "a"), textRow("2", null), textRow("3", strings.Repeat("c", 300))}
	status := autocommit | mysql.SERVER_STATUS_NO_INDEX_USED
	plain := wire.AppendResultEndOK(nil, 2, status)
	tracked := wire.AppendOKState(nil, 0, 0, status, 2, "", wire.AppendTrackSchema(nil, "db2"))
	tracked[0] = wire.EOFHeader
	for _, c := range []struct {
		name string
		caps uint32
		end  []byte // the backend's terminator
		want [][]byte
	}{
		{"deprecate-eof", deprecate, plain, resultSet(defs, rows, plain)},
		{"deprecate-eof, state tracked", deprecate, tracked, resultSet(defs, rows, tracked)},
		{"deprecate-eof, state not tracked", deprecate &^ mysql.CLIENT_SESSION_TRACK, tracked, resultSet(defs, rows, plain)},
		{"classic EOF", classic, tracked, cat(resultSet(defs, nil, nil)[:3], one(wire.AppendEOF(nil, 0, autocommit)),
			rows, one(wire.AppendEOF(nil, 2, status)))},
	} {
		t.Run(c.name, func(t *testing.T) {
			en := newEnv(t, c.caps, answer("SELECT id, name", resultSet(defs, rows, c.end)...))
			en.e.Last.InsertID = 5
			raw, pkts, err := en.forward(nil, "SELECT id, name FROM t")
			if err != nil {
				t.Fatal(err)
			}
			wantPackets(t, pkts, c.want)
			if !bytes.Equal(raw, frame(c.want)) {
				t.Error("client bytes are not exactly the expected packets")
			}
			if *en.e.Last != (Last{InsertID: 5, RowCount: -1, FoundRows: 3}) {
				t.Errorf("Last %+v", *en.e.Last)
			}
			if en.tr.rows != 3 || en.tr.affected != 0 || en.tr.first != 1 {
				t.Errorf("tracer: rows %d affected %d first bytes %d", en.tr.rows, en.tr.affected, en.tr.first)
			}
			en.tr.checkRan(t, en.tr.lastWaited())
			en.wantPool("n1", 1, 0, 1, 0)
		})
	}
}

// A classic client is served by connections opened without
// CLIENT_DEPRECATE_EOF (the lease asks for the client's flavor): the
// server's own EOF packets, status and warnings included, reach the client
// unchanged; a client with CLIENT_DEPRECATE_EOF on such a connection (a
// server without it) gets the OK form.
func TestForwardClassicFraming(t *testing.T) {
	defs := [][]byte{colDef("id", wire.TypeLongLong, 63)}
	rows := rowsOf("1", "2")
	status := autocommit | mysql.SERVER_STATUS_NO_INDEX_USED
	colsEOF := wire.AppendEOF(nil, 1, autocommit|mysql.SERVER_MORE_RESULTS_EXISTS)
	answerSet := cat(resultSet(defs, nil, nil)[:2], one(colsEOF), rows, one(wire.AppendEOF(nil, 2, status)))
	for _, c := range []struct {
		name       string
		client     uint32
		backendEOF bool // the connection negotiates CLIENT_DEPRECATE_EOF
		want       [][]byte
	}{
		{"classic client, classic connection", classic, false, answerSet},
		{"deprecate client, classic connection", deprecate, false,
			cat(resultSet(defs, nil, nil)[:2], rows, one(wire.AppendResultEndOK(nil, 2, status)))},
	} {
		t.Run(c.name, func(t *testing.T) {
			var sawDeprecate atomic.Bool
			en := newEnv(t, c.client, answer("SELECT id", answerSet...))
			en.lease.Caps = c.client &^ mysql.CLIENT_DEPRECATE_EOF
			_, pkts, err := en.forward(nil, "SELECT id FROM t")
			if err != nil {
				t.Fatal(err)
			}
			wantPackets(t, pkts, c.want)
			bc, err := en.lease.Acquire(nil, Read)
			if err != nil {
				t.Fatal(err)
			}
			sawDeprecate.Store(bc.DeprecateEOF())
			en.lease.Release(bc)
			if sawDeprecate.Load() != c.backendEOF {
				t.Errorf("backend connection DEPRECATE_EOF %v, want %v", sawDeprecate.Load(), c.backendEOF)
			}
			en.wantPool("n1", 1, 0, 1, 0)
		})
	}
}

func TestForwardOKAndErr(t *testing.T) {
	info := "Rows matched: 3  Changed: 3  Warnings: 1"
	okState := wire.AppendOKState(nil, 3, 7, autocommit, 1, info, wire.AppendTrackVariable(nil, "autocommit", "ON"))
	errPkt := wire.AppendErr(nil, mysql.ER_DUP_ENTRY, "23000", "Duplicate entry '7' for key 'PRIMARY'")
	for _, c := range []struct {
		name      string
		caps      uint32
		sent, got []byte
		last      Last
	}{
		{"OK, state tracked", deprecate, okState, okState, Last{InsertID: 7, RowCount: 3}},
		{"OK, state stripped", classic, okState, wire.AppendOK(nil, 3, 7, autocommit, 1, info), Last{InsertID: 7, RowCount: 3}},
		{"ERR", classic, errPkt, errPkt, Last{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			en := newEnv(t, c.caps, answer("UPDATE", c.sent))
			_, pkts, err := en.forward(nil, "UPDATE t SET a = 1 WHERE id <= 3")
			wantPackets(t, pkts, one(c.got))
			var me *mysql.MyError
			if c.sent[0] == wire.ErrHeader {
				if !errors.As(err, &me) || me.Code != mysql.ER_DUP_ENTRY || me.State != "23000" {
					t.Errorf("error %v, want the backend's ER_DUP_ENTRY", err)
				}
			} else if err != nil || en.tr.affected != 3 {
				t.Errorf("error %v, affected traced %d", err, en.tr.affected)
			}
			if *en.e.Last != c.last {
				t.Errorf("Last %+v, want %+v", *en.e.Last, c.last)
			}
			en.wantPool("n1", 1, 0, 1, 0)
		})
	}
}

// fanRouting routes sql ($t: the sub-table) to t_0000 on n1 and t_0001 on n2.
func fanRouting(sql string, firstRoute int) *router.Routing {
	rt := &router.Routing{FirstRoute: firstRoute}
	for i, sub := range []string{"t_0000", "t_0001"} {
		rt.Routes = append(rt.Routes, router.Route{Node: []string{"n1", "n2"}[i], SubTables: []string{sub},
			SQL: []string{strings.ReplaceAll(sql, "$t", sub)}})
	}
	return rt
}

func noOne(t *testing.T) func(*backend.Node, *router.Route) error {
	return func(*backend.Node, *router.Route) error { t.Error("run.One called for a fan-out"); return nil }
}

func TestRouteFanOutSelect(t *testing.T) {
	// Each node lists one warning (n2 reported 2: its max_error_count).
	warnings := answer("SHOW WARNINGS", resultSet(warnDefs, [][]byte{textRow("Warning", "1365", "Division by 0")}, wire.AppendResultEndOK(nil, 0, autocommit))...)
	en := newEnv(t, classic,
		either(answer("t_0000", resultSet(idDef, rowsOf("1", "2"), wire.AppendResultEndOK(nil, 1, autocommit))...), warnings),
		either(answer("t_0001", resultSet([][]byte{colDef("other", wire.TypeLongLong, 63)}, rowsOf("3"), wire.AppendResultEndOK(nil, 2, autocommit))...), warnings))
	rt := fanRouting("SELECT id FROM $t", 0)
	_, pkts, err := en.do(func() error { return en.e.Route(rt, nil, Run{Kind: router.KindSelect, Read: true, One: noOne(t)}) })
	if err != nil {
		t.Fatal(err)
	}
	// One result set: the first leg's columns, every row, warnings summed.
	wantPackets(t, pkts, cat(resultSet(idDef, nil, nil)[:2], one(wire.AppendEOF(nil, 0, autocommit)),
		rowsOf("1", "2", "3"), one(wire.AppendEOF(nil, 3, autocommit))))
	// The warnings of each leg were read before its connection went back.
	for i, f := range en.fakes {
		if got := f.commands(0); len(got) != 2 || got[0] != rt.Routes[i].SQL[0] || got[1] != "SHOW WARNINGS" {
			t.Errorf("node %d received %q", i+1, got)
		}
	}
	if d := &en.e.Diag; !d.On() || d.count != 3 || len(d.rows) != 2 || d.rows[1][2] != "Division by 0" {
		t.Errorf("diagnostics %+v", *d)
	}
	if en.e.Last.FoundRows != 3 || en.e.Last.RowCount != -1 || en.tr.rows != 3 {
		t.Errorf("Last %+v, rows traced %d", *en.e.Last, en.tr.rows)
	}
	en.tr.checkRan(t, en.tr.waited[0])
	en.wantPool("n1", 1, 0, 1, 0)
	en.wantPool("n2", 1, 0, 1, 0)
}

func TestRouteFanOutWrite(t *testing.T) {
	for _, c := range []struct {
		name       string
		kind       router.Kind
		sql        string
		firstRoute int
		n1, n2     []byte // the nodes' answers
		want       []byte
		last       Last
	}{
		{"update summed", router.KindUpdate, "UPDATE $t SET a = 1", 0,
			wire.AppendOK(nil, 2, 0, autocommit, 0, ""), wire.AppendOK(nil, 3, 0, autocommit, 1, ""),
			wire.AppendOK(nil, 5, 0, autocommit, 1, ""), Last{RowCount: 5}},
		{"insert id of the first row", router.KindInsert, "INSERT INTO $t (id) VALUES (1)", 1,
			wire.AppendOK(nil, 1, 10, autocommit, 0, ""), wire.AppendOK(nil, 1, 20, autocommit, 0, ""),
			wire.AppendOK(nil, 2, 20, autocommit, 0, ""), Last{RowCount: 2, InsertID: 20}},
		{"one leg fails", router.KindUpdate, "UPDATE $t SET a = 1", 0,
			wire.AppendOK(nil, 2, 0, autocommit, 0, ""), wire.AppendErr(nil, mysql.ER_NO_SUCH_TABLE, "42S02", "Table 'db.t_0001' doesn't exist"),
			wire.AppendErr(nil, mysql.ER_NO_SUCH_TABLE, "42S02", "keyshard: node n2 t_0001: Table 'db.t_0001' doesn't exist; changed: t_0000; not changed: t_0001"), Last{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			en := newEnv(t, deprecate, answer("t_0000", c.n1), answer("t_0001", c.n2))
			_, pkts, err := en.do(func() error {
				return en.e.Route(fanRouting(c.sql, c.firstRoute), nil, Run{Kind: c.kind, One: noOne(t)})
			})
			wantPackets(t, pkts, one(c.want))
			if failed := c.want[0] == wire.ErrHeader; failed != (err != nil) {
				t.Errorf("error %v", err)
			}
			if *en.e.Last != c.last {
				t.Errorf("Last %+v, want %+v", *en.e.Last, c.last)
			}
			// Every answer was read: both connections are reusable.
			en.wantPool("n1", 1, 0, 1, 0)
			en.wantPool("n2", 1, 0, 1, 0)
		})
	}
}

func TestRouteFanOutLegError(t *testing.T) {
	const msg = "keyshard: node n1 t_0000: Table 'db.t_0000' doesn't exist"
	n2rows := resultSet(idDef, rowsOf("3", "4"), wire.AppendResultEndOK(nil, 0, autocommit))
	for _, c := range []struct {
		name           string
		n1             handler
		want           [][]byte // what the client gets before the ERR
		n1open, n1idle int64
	}{
		{"ERR", answer("t_0000", wire.AppendErr(nil, mysql.ER_NO_SUCH_TABLE, "42S02", "Table 'db.t_0000' doesn't exist")), nil, 1, 1},
		{"lost", func(fc *fakeConn, cmd byte, arg string) bool {
			if cmd != mysql.COM_QUERY {
				return false
			}
			_ = fc.send(resultSet(idDef, rowsOf("1"), nil)[:3]...)
			fc.nc.Close()
			return true
		}, resultSet(idDef, rowsOf("1"), nil)[:3], 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			en := newEnv(t, deprecate, c.n1, answer("t_0001", n2rows...))
			_, pkts, err := en.do(func() error {
				return en.e.Route(fanRouting("SELECT id FROM $t", 0), nil, Run{Kind: router.KindSelect, One: noOne(t)})
			})
			if len(pkts) != len(c.want)+1 {
				t.Fatalf("client got %q, want %q and one ERR", pkts, c.want)
			}
			wantPackets(t, pkts[:len(c.want)], c.want)
			// One error, naming the node.
			var me *mysql.MyError
			var be *backend.Error
			e := wire.ParseErr(pkts[len(c.want)])
			if c.want == nil {
				if !errors.As(err, &me) || me.Code != mysql.ER_NO_SUCH_TABLE || me.Message != msg || e.Message != msg {
					t.Errorf("error %v, client %q, want %q", err, e.Message, msg)
				}
			} else if !errors.As(err, &be) || be.Kind != backend.KindLost || !strings.HasPrefix(e.Message, "node n1 (") {
				t.Errorf("error %v, client %q, want node n1 lost", err, e.Message)
			}
			// n2's answer was never read: its connection is closed, not pooled.
			en.wantPool("n1", c.n1open, 0, c.n1idle, 1-c.n1open)
			en.wantPool("n2", 0, 0, 0, 1)
			// The next statement on n2 gets a clean connection and its own answer.
			_, pkts, err = en.forward(en.nodes["n2"], "SELECT id FROM t_0001")
			if err != nil {
				t.Fatal(err)
			}
			wantPackets(t, pkts, n2rows)
			en.wantPool("n2", 1, 0, 1, 1)
		})
	}
}

// mergeRouting plans q over table t, hash-sharded to t_0000 on n1 and
// t_0001 on n2.
func mergeRouting(t *testing.T, q string) (*router.Routing, *router.Plan) {
	nodes := []string{"n1", "n2"}
	s, err := router.NewSchema(router.SchemaConfig{Default: "n1", Nodes: nodes, Tables: []router.TableConfig{
		{DB: "db", Table: "t", Key: "id", Nodes: nodes, Shard: shard.Config{Type: "hash", Nodes: 2, Locations: []int{1, 1}}},
	}}, 16)
	if err != nil {
		t.Fatal(err)
	}
	pl, lits, err := s.Plan(router.NewParser(), q, "db", router.Classify(q).Kind)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := pl.Bind(lits, "")
	if err != nil || rt.Spec == nil || len(rt.Routes) != 2 {
		t.Fatalf("routing %v (%v): want a merge over two nodes", rt, err)
	}
	return rt, pl
}

func TestRouteMergeSlowLeg(t *testing.T) {
	const delay = 150 * time.Millisecond
	// The sub-tables' statement selects id, then the sort key and its weight.
	defs := [][]byte{colDef("id", wire.TypeLongLong, 63), colDef("id", wire.TypeLongLong, 63),
		colDef("WEIGHT_STRING(RTRIM(`id`))", wire.TypeVarString, 63)}
	leg := func(slow bool, ids ...string) handler {
		return func(c *fakeConn, cmd byte, arg string) bool {
			if cmd != mysql.COM_QUERY || !strings.Contains(arg, "FROM `t_000") {
				return false
			}
			_ = c.send(resultSet(defs, nil, nil)[:4]...)
			if slow {
				time.Sleep(delay)
			}
			for _, id := range ids {
				_ = c.send(textRow(id, id, id))
			}
			_ = c.send(wire.AppendResultEndOK(nil, 0, autocommit))
			return true
		}
	}
	for _, slow := range []string{"n1", "n2"} {
		t.Run("slow "+slow, func(t *testing.T) {
			en := newEnv(t, deprecate, leg(slow == "n1", "1", "4", "5"), leg(slow == "n2", "2", "3", "6"))
			rt, pl := mergeRouting(t, "SELECT id FROM t ORDER BY id LIMIT 3")
			start := time.Now()
			raw, pkts, err := en.do(func() error { return en.e.Route(rt, pl, Run{Kind: router.KindSelect, Read: true}) })
			if err != nil {
				t.Fatal(err)
			}
			if time.Since(start) < delay {
				t.Errorf("merge took %v: the slow leg was not waited for", time.Since(start))
			}
			want := resultSet(defs[:1], rowsOf("1", "2", "3"), wire.AppendResultEndOK(nil, 0, autocommit))
			wantPackets(t, pkts, want)
			if !bytes.Equal(raw, frame(want)) {
				t.Error("client bytes are not exactly the expected packets")
			}
			for i, f := range en.fakes {
				if got := f.commands(0); len(got) != 1 || got[0] != rt.Routes[i].SQL[0] {
					t.Errorf("node %d received %q", i+1, got)
				}
			}
			if en.e.Last.FoundRows != 3 || en.tr.rows != 3 {
				t.Errorf("Last %+v, rows traced %d", *en.e.Last, en.tr.rows)
			}
			// Both legs were read to their end: back to the pools.
			en.wantPool("n1", 1, 0, 1, 0)
			en.wantPool("n2", 1, 0, 1, 0)
		})
	}
}

func TestForwardKill(t *testing.T) {
	def := colDef("SLEEP(5)", wire.TypeLongLong, 63)
	for _, lose := range []bool{false, true} {
		name := "KILL QUERY"
		if lose {
			name = "session killed, backend lost"
		}
		t.Run(name, func(t *testing.T) {
			en := newEnv(t, deprecate, func(c *fakeConn, cmd byte, arg string) bool {
				if cmd != mysql.COM_QUERY || arg != "SELECT SLEEP(5)" {
					return false
				}
				if lose {
					_ = c.send([]byte{1}, def)
				}
				select {
				case <-c.kill:
				case <-time.After(5 * time.Second):
				}
				if lose {
					c.nc.Close()
				} else {
					_ = c.send(wire.AppendErr(nil, mysql.ER_QUERY_INTERRUPTED, "70100", "Query execution was interrupted"))
				}
				return true
			})
			type result struct {
				pkts [][]byte
				err  error
			}
			done := make(chan result, 1)
			go func() {
				_, pkts, err := en.forward(nil, "SELECT SLEEP(5)")
				done <- result{pkts, err}
			}()
			var bc *backend.Conn
			select {
			case bc = <-en.tr.run:
			case <-time.After(5 * time.Second):
				t.Fatal("Running was never called")
			}
			en.tr.killed.Store(lose)
			if err := bc.Pool().KillQuery(t.Context(), bc.ThreadID()); err != nil {
				t.Fatal(err)
			}
			r := <-done
			en.tr.checkRan(t, bc)
			if cmds := en.fakes[0].commands(0); !strings.Contains(strings.Join(cmds, ";"), "KILL QUERY "+strconv.Itoa(int(bc.ThreadID()))) {
				t.Errorf("fake received %q, no KILL QUERY for thread %d", cmds, bc.ThreadID())
			}
			if !lose {
				var me *mysql.MyError
				if !errors.As(r.err, &me) || me.Code != mysql.ER_QUERY_INTERRUPTED {
					t.Errorf("error %v", r.err)
				}
				wantPackets(t, r.pkts, one(wire.AppendErr(nil, mysql.ER_QUERY_INTERRUPTED, "70100", "Query execution was interrupted")))
				en.wantPool("n1", 1, 0, 1, 0)
				return
			}
			const msg = "Query execution was interrupted (connection killed)"
			var ee *Error
			if !errors.As(r.err, &ee) || ee.Kind != KindKilled || ee.Msg != msg {
				t.Errorf("error %v, want KindKilled %q", r.err, msg)
			}
			wantPackets(t, r.pkts, [][]byte{{1}, def, wire.AppendErr(nil, mysql.ER_QUERY_INTERRUPTED, "70100", msg)})
			en.wantPool("n1", 0, 0, 0, 1)
		})
	}
}

func TestClientGoneMidResult(t *testing.T) {
	base := runtime.NumGoroutine()
	const rows = 20000
	big := textRow(strings.Repeat("x", 200))
	en := newEnv(t, deprecate, func(c *fakeConn, cmd byte, arg string) bool {
		if cmd != mysql.COM_QUERY || arg != "SELECT big FROM t" {
			return false
		}
		ps := [][]byte{{1}, colDef("big", wire.TypeVarString, 45)}
		for range rows {
			ps = append(ps, big)
		}
		_ = c.send(append(ps, wire.AppendResultEndOK(nil, 0, autocommit))...)
		return true
	})
	en.mu.Lock()
	en.limit = 8 << 10 // the client hangs up after 8 KiB
	en.mu.Unlock()
	raw, _, err := en.forward(nil, "SELECT big FROM t")
	var ce *ClientError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v, want a *ClientError", err)
	}
	if len(raw) >= rows*len(big) {
		t.Errorf("client got %d bytes: the whole result", len(raw))
	}
	en.tr.checkRan(t, en.tr.lastWaited())
	// The connection was abandoned mid-answer: closed, not pooled.
	en.wantPool("n1", 0, 0, 0, 1)
	if en.lease.Pinned() != nil {
		t.Error("the abandoned connection stayed pinned")
	}
	en.close()
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > base; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
	}
}

func TestForwardBackendLost(t *testing.T) {
	full := resultSet(idDef, rowsOf("1", "2"), wire.AppendResultEndOK(nil, 0, autocommit))
	for _, c := range []struct {
		name    string
		sql     string
		raw     bool // sent as the client's own COM_QUERY packet (then info decides the retry)
		closeAt int  // packets of full sent before the fake closes, on the first attempt
		queries int  // statements the fake receives
		want    [][]byte
	}{
		{"mid-result", "SELECT id FROM t", false, 4, 1, full[:4]},
		{"read before any answer: retried", "SELECT id FROM t", true, 0, 2, full},
		{"write before any answer: not retried", "UPDATE t SET a = 1", true, 0, 1, nil},
		{"rewritten read before any answer: retried", "SELECT id FROM t", false, 0, 2, full},
		{"rewritten write before any answer: not retried", "UPDATE t SET a = 1", false, 0, 1, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var attempt atomic.Int32
			en := newEnv(t, deprecate, func(fc *fakeConn, cmd byte, arg string) bool {
				if cmd != mysql.COM_QUERY || arg != c.sql {
					return false
				}
				if attempt.Add(1) == 1 {
					_ = fc.send(full[:c.closeAt]...)
					fc.nc.Close()
				} else {
					_ = fc.send(full...)
				}
				return true
			})
			info := router.Classify(c.sql)
			sql, raw := &c.sql, []byte(nil)
			if c.raw {
				sql, raw = nil, append([]byte{mysql.COM_QUERY}, c.sql...)
			}
			_, pkts, err := en.do(func() error { return en.e.Forward(nil, raw, sql, &info) })
			if got := len(en.fakes[0].commands(0)); got != c.queries {
				t.Errorf("fake received %d statements, want %d", got, c.queries)
			}
			if c.queries == 2 { // the retry: the whole answer, from a fresh connection
				if err != nil {
					t.Fatal(err)
				}
				wantPackets(t, pkts, full)
				en.wantPool("n1", 1, 0, 1, 1)
				return
			}
			var be *backend.Error
			if !errors.As(err, &be) || be.Kind != backend.KindLost || be.Node != "n1" {
				t.Fatalf("error %v, want a lost connection of node n1", err)
			}
			if len(pkts) != len(c.want)+1 {
				t.Fatalf("client got %q, want %q and an ERR", pkts, c.want)
			}
			wantPackets(t, pkts[:len(c.want)], c.want)
			if e := wire.ParseErr(pkts[len(c.want)]); pkts[len(c.want)][0] != wire.ErrHeader || e.Code != 2013 ||
				!strings.HasPrefix(e.Message, "node n1 (") || !strings.Contains(e.Message, "connection lost during query") {
				t.Errorf("client ERR %q", pkts[len(c.want)])
			}
			en.wantPool("n1", 0, 0, 0, 1)
		})
	}
}
