package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// fakeCaps are the capabilities the fake server offers (MariaDB's usual set).
const fakeCaps = mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_LONG_FLAG | mysql.CLIENT_CONNECT_WITH_DB |
	mysql.CLIENT_LOCAL_FILES | mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_TRANSACTIONS | mysql.CLIENT_SECURE_CONNECTION |
	mysql.CLIENT_MULTI_STATEMENTS | mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS | mysql.CLIENT_PLUGIN_AUTH |
	mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA | mysql.CLIENT_DEPRECATE_EOF | mysql.CLIENT_SESSION_TRACK

const autocommit = wire.StatusAutocommit

// handler scripts a fake server's answer to one command; false leaves the
// command to the generic answers (OK to anything, transaction status kept).
type handler func(c *fakeConn, cmd byte, arg string) bool

// fakeServer is a scripted MySQL server on 127.0.0.1: a protocol-10
// greeting, any password accepted, then every command to its handler.
type fakeServer struct {
	ln     net.Listener
	h      handler
	wg     sync.WaitGroup
	mu     sync.Mutex
	delay  time.Duration // before each greeting (a slow dial)
	conns  map[uint32]*fakeConn
	log    []logEntry
	nextID uint32
	closed bool
}

type logEntry struct {
	conn uint32
	what string // a COM_QUERY's SQL, else "cmd <n>"
}

// fakeConn is one connection to the fake; its thread id is its key.
type fakeConn struct {
	id   uint32
	nc   net.Conn
	pkt  *wire.Conn
	inTx bool
	noAC bool          // autocommit off: any other statement opens a transaction
	kill chan struct{} // KILL QUERY <id> received
}

func newFake(t *testing.T, h handler) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln, h: h, conns: map[uint32]*fakeConn{}, nextID: 100}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeServer) accept() {
	defer f.wg.Done()
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.closed {
			f.mu.Unlock()
			nc.Close()
			return
		}
		f.nextID++
		c := &fakeConn{id: f.nextID, nc: nc, pkt: wire.NewConn(nc, 4096, 4096), kill: make(chan struct{}, 1)}
		f.conns[c.id] = c
		f.wg.Add(1)
		f.mu.Unlock()
		go f.serve(c)
	}
}

// close stops the server and waits for every connection's goroutine.
func (f *fakeServer) close() {
	f.mu.Lock()
	f.closed = true
	for _, c := range f.conns {
		c.nc.Close()
	}
	f.mu.Unlock()
	f.ln.Close()
	f.wg.Wait()
}

func (f *fakeServer) serve(c *fakeConn) {
	defer f.wg.Done()
	defer c.nc.Close()
	f.mu.Lock()
	delay := f.delay
	f.mu.Unlock()
	time.Sleep(delay)
	if !c.greet() {
		return
	}
	for {
		c.pkt.Seq = 0
		p, err := c.pkt.ReadPacket()
		if err != nil || len(p) == 0 || p[0] == mysql.COM_QUIT {
			return
		}
		cmd, arg := p[0], string(p[1:])
		what := arg
		if cmd != mysql.COM_QUERY {
			what = fmt.Sprintf("cmd %d", cmd)
		}
		f.mu.Lock()
		f.log = append(f.log, logEntry{c.id, what})
		f.mu.Unlock()
		if f.h == nil || !f.h(c, cmd, arg) {
			f.generic(c, cmd, arg)
		}
	}
}

// greet runs the server side of the handshake backend.dial expects.
func (c *fakeConn) greet() bool {
	g := append([]byte{10}, "5.5.5-10.11.6-MariaDB-fake\x00"...)
	g = binary.LittleEndian.AppendUint32(g, c.id)
	g = append(g, "abcdefgh\x00"...) // scramble, first part
	g = binary.LittleEndian.AppendUint16(g, uint16(fakeCaps&0xffff))
	g = append(g, 45) // utf8mb4_general_ci
	g = binary.LittleEndian.AppendUint16(g, autocommit)
	g = binary.LittleEndian.AppendUint16(g, uint16(fakeCaps>>16))
	g = append(g, 21)
	g = append(g, make([]byte, 10)...)
	g = append(g, "ijklmnopqrst\x00mysql_native_password\x00"...)
	if c.send(g) != nil {
		return false
	}
	if _, err := c.pkt.ReadPacket(); err != nil { // handshake response: any password will do
		return false
	}
	return c.send(wire.AppendOK(nil, 0, 0, autocommit, 0, "")) == nil
}

// generic answers what a backend.Conn sends on its own (SET, COM_INIT_DB,
// COM_SET_OPTION, COM_PING, COM_RESET_CONNECTION) and whatever a test
// does not script: an OK, with BEGIN/COMMIT tracked in the status, and
// KILL QUERY signalled to the connection it names.
func (f *fakeServer) generic(c *fakeConn, cmd byte, arg string) {
	switch cmd {
	case mysql.COM_QUERY:
		q := strings.ToUpper(strings.TrimSpace(arg))
		switch {
		case q == "BEGIN" || strings.HasPrefix(q, "START TRANSACTION"):
			c.inTx = true
		case q == "COMMIT" || q == "ROLLBACK":
			c.inTx = false
		case q == "SET AUTOCOMMIT = 0" || q == "SET AUTOCOMMIT = 1":
			c.noAC = q == "SET AUTOCOMMIT = 0"
		case c.noAC && !strings.HasPrefix(q, "SET "):
			c.inTx = true
		case strings.HasPrefix(q, "KILL QUERY "):
			id, _ := strconv.Atoi(q[len("KILL QUERY "):])
			f.mu.Lock()
			k := f.conns[uint32(id)]
			f.mu.Unlock()
			if k != nil {
				select {
				case k.kill <- struct{}{}:
				default:
				}
			}
		}
		c.ok(0, 0)
	case mysql.COM_RESET_CONNECTION:
		c.inTx, c.noAC = false, false
		c.ok(0, 0)
	case mysql.COM_PING, mysql.COM_INIT_DB, mysql.COM_SET_OPTION:
		c.ok(0, 0)
	default:
		c.fail(mysql.ER_UNKNOWN_COM_ERROR, "Unknown command")
	}
}

// commands returns what connection id received, or every connection with id 0.
func (f *fakeServer) commands(id uint32) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.log {
		if id == 0 || e.conn == id {
			out = append(out, e.what)
		}
	}
	return out
}

func (c *fakeConn) send(ps ...[]byte) error {
	for _, p := range ps {
		if err := c.pkt.WritePacket(p); err != nil {
			return err
		}
	}
	return c.pkt.Flush()
}

func (c *fakeConn) ok(affected, insertID uint64) {
	status := autocommit
	if c.noAC {
		status = 0
	}
	if c.inTx {
		status |= wire.StatusInTrans
	}
	_ = c.send(wire.AppendOK(nil, affected, insertID, status, 0, ""))
}

func (c *fakeConn) fail(code uint16, msg string) { _ = c.send(wire.AppendErr(nil, code, "HY000", msg)) }

// colDef is a column definition packet.
func colDef(name string, typ byte, charset uint16) []byte {
	b := wire.AppendLenEncString(nil, "def")
	for _, s := range []string{"db", "t", "t", name, name} {
		b = wire.AppendLenEncString(b, s)
	}
	return append(b, 0x0c, byte(charset), byte(charset>>8), 20, 0, 0, 0, typ, 0, 0, 0, 0, 0)
}

// null in textRow is SQL NULL.
const null = "\x00NULL"

func textRow(vals ...string) []byte {
	var b []byte
	for _, v := range vals {
		if v == null {
			b = wire.AppendLenEncNull(b)
		} else {
			b = wire.AppendLenEncString(b, v)
		}
	}
	return b
}

// resultSet is a backend's result set (CLIENT_DEPRECATE_EOF): column count,
// definitions, rows and the terminator end.
func resultSet(defs, rows [][]byte, end []byte) [][]byte {
	out := [][]byte{mysql.AppendLengthEncodedInteger(nil, uint64(len(defs)))}
	out = append(append(out, defs...), rows...)
	return append(out, end)
}

// frame is payloads ps as they go on the wire, sequence numbers from 1.
func frame(ps [][]byte) []byte {
	var b []byte
	for i, p := range ps {
		b = append(b, byte(len(p)), byte(len(p)>>8), byte(len(p)>>16), byte(i+1))
		b = append(b, p...)
	}
	return b
}

// fakeTracer records what the engine and the lease report (from one
// goroutine at a time; the test reads it once the statement is over).
type fakeTracer struct {
	waited, running []*backend.Conn // WaitDone and Running arguments
	first, retries  int
	rows, affected  uint64
	killed          atomic.Bool
	run             chan *backend.Conn // each non-nil Running, for a KILL
}

func (t *fakeTracer) WaitStart()                {}
func (t *fakeTracer) WaitDone(bc *backend.Conn) { t.waited = append(t.waited, bc) }
func (t *fakeTracer) FirstByte()                { t.first++ }
func (t *fakeTracer) Retry()                    { t.retries++ }
func (t *fakeTracer) Sent(rows, affected uint64) {
	t.rows, t.affected = t.rows+rows, t.affected+affected
}
func (t *fakeTracer) Killed() bool              { return t.killed.Load() }
func (t *fakeTracer) Released(bc *backend.Conn) {}
func (t *fakeTracer) Stopped() error            { return nil }
func (t *fakeTracer) Committing()               {}
func (t *fakeTracer) Piped(*backend.Turn)       {}
func (t *fakeTracer) Running(bc *backend.Conn) {
	t.running = append(t.running, bc)
	if bc != nil {
		select {
		case t.run <- bc:
		default:
		}
	}
}

// lastWaited is the connection of the last acquire.
func (t *fakeTracer) lastWaited() *backend.Conn { return t.waited[len(t.waited)-1] }

// checkRan checks that the statement ran on bc: Running(bc) then Running(nil).
func (t *fakeTracer) checkRan(tt *testing.T, bc *backend.Conn) {
	tt.Helper()
	if !slices.Equal(t.running, []*backend.Conn{bc, nil}) {
		tt.Errorf("Running calls %v, want [%p <nil>]", t.running, bc)
	}
}

// mapErr is the test's error mapper (the proxy's one maps the same kinds).
func mapErr(err error) *mysql.MyError {
	var me *mysql.MyError
	var ee *Error
	switch {
	case errors.As(err, &me):
		return me
	case errors.As(err, &ee) && ee.Kind == KindKilled:
		return &mysql.MyError{Code: mysql.ER_QUERY_INTERRUPTED, State: "70100", Message: ee.Msg}
	case errors.As(err, &ee):
		return &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: "HY000", Message: ee.Msg}
	}
	return &mysql.MyError{Code: 2013, State: "HY000", Message: err.Error()}
}

// env is an Engine over a real Lease and real pools on fake servers
// n1, n2..., writing to a client whose side the test reads.
type env struct {
	t     *testing.T
	fakes []*fakeServer
	nodes map[string]*backend.Node
	lease *Lease
	tr    *fakeTracer
	e     *Engine
	srv   net.Conn
	peer  net.Conn
	gone  chan struct{} // the client reader stopped
	mu    sync.Mutex
	got   []byte // everything the client received
	seen  int    // bytes of got already returned by do
	limit int    // the client hangs up once it got this many bytes (0: never)
	once  sync.Once
}

func newEnv(t *testing.T, caps uint32, hs ...handler) *env {
	en := &env{t: t, nodes: map[string]*backend.Node{}, tr: &fakeTracer{run: make(chan *backend.Conn, 8)}, gone: make(chan struct{})}
	for i, h := range hs {
		f := newFake(t, h)
		name := fmt.Sprintf("n%d", i+1)
		en.fakes = append(en.fakes, f)
		en.nodes[name] = backend.NewNode(name, f.ln.Addr().String(), backend.NodeOptions{Pool: backend.Options{
			User: "ks", Password: "secret", MaxConns: 4, WaitTimeout: 2 * time.Second, ConnectTimeout: 2 * time.Second}})
	}
	vars := &Vars{Multi: true}
	// Backend connections use CLIENT_DEPRECATE_EOF, as the fake's scripted
	// answers do, whatever the client: the engine converts for a classic
	// client. (TestForwardClassicFraming sets Caps to the client's, as the
	// session does, with classic answers.)
	en.lease = &Lease{Ctx: t.Context(), Vars: vars, Default: en.nodes["n1"], User: "app", Trace: en.tr,
		Caps: caps | mysql.CLIENT_DEPRECATE_EOF | mysql.CLIENT_MULTI_RESULTS}
	en.lease.SetStatus(wire.StatusAutocommit)
	en.srv, en.peer = net.Pipe()
	cl := NewClient(wire.NewConn(en.srv, 4096, 4096), mapErr)
	cl.SetCaps(caps, 0)
	en.e = &Engine{Client: cl, Conns: en.lease, Trace: en.tr, Vars: vars, Last: &Last{}, Nodes: en.nodes, MaxMergeRows: 1000}
	go en.read()
	t.Cleanup(en.close)
	return en
}

// close closes the client, then each node before its fake server.
func (en *env) close() {
	en.once.Do(func() {
		en.srv.Close()
		en.peer.Close()
		<-en.gone
		for i, f := range en.fakes {
			en.nodes[fmt.Sprintf("n%d", i+1)].Close()
			f.close()
		}
	})
}

func (en *env) read() {
	defer close(en.gone)
	buf := make([]byte, 4096)
	for {
		n, err := en.peer.Read(buf)
		en.mu.Lock()
		en.got = append(en.got, buf[:n]...)
		hang := en.limit > 0 && len(en.got) >= en.limit
		en.mu.Unlock()
		if err != nil || hang {
			en.peer.Close()
			return
		}
	}
}

// do runs f as the answer to one client command, flushes, and returns what
// the client received (raw and as payloads) with f's error.
func (en *env) do(f func() error) (raw []byte, pkts [][]byte, err error) {
	pkt := en.e.Client.pkt
	pkt.Seq = 1
	err = f()
	if pkt.Flush() == nil {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
			en.mu.Lock()
			n := len(en.got)
			en.mu.Unlock()
			if uint64(n) >= pkt.Written {
				break
			}
			if time.Now().After(deadline) {
				en.t.Errorf("client got %d bytes of %d written", n, pkt.Written)
				break
			}
		}
	}
	en.mu.Lock()
	raw = slices.Clone(en.got[en.seen:])
	en.seen = len(en.got)
	en.mu.Unlock()
	for b, seq := raw, byte(1); len(b) >= 4; seq++ {
		n := int(b[0]) | int(b[1])<<8 | int(b[2])<<16
		if b[3] != seq {
			en.t.Errorf("client packet %d has sequence %d", seq, b[3])
		}
		if len(b) < 4+n {
			break // cut short (the client hung up)
		}
		pkts, b = append(pkts, b[4:4+n]), b[4+n:]
	}
	return raw, pkts, err
}

// forward runs sql through Engine.Forward on node n (nil: the default).
func (en *env) forward(n *backend.Node, sql string) ([]byte, [][]byte, error) {
	info := router.Classify(sql)
	return en.do(func() error { return en.e.Forward(n, nil, &sql, &info) })
}

// wantPool checks a node's master pool: connections open, in use, idle, closed.
func (en *env) wantPool(node string, open, inUse, idle, closed int64) {
	en.t.Helper()
	s := en.nodes[node].Master.Stats()
	if s.Open != open || s.InUse != inUse || s.Idle != idle || s.Closed != closed {
		en.t.Errorf("pool %s: open %d in use %d idle %d closed %d, want %d %d %d %d",
			node, s.Open, s.InUse, s.Idle, s.Closed, open, inUse, idle, closed)
	}
}

// wantPackets compares packets with want, byte for byte.
func wantPackets(t *testing.T, got, want [][]byte) {
	t.Helper()
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("client got\n%q\nwant\n%q", got, want)
	}
}
