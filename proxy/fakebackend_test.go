package proxy

import (
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/frontend"
)

// fakeBackendCaps are what the fake backend offers: MariaDB's usual set
// (no CLIENT_MYSQL, so its extended capabilities are read).
const fakeBackendCaps = mysql.CLIENT_LONG_FLAG | mysql.CLIENT_FOUND_ROWS | mysql.CLIENT_CONNECT_WITH_DB | mysql.CLIENT_LOCAL_FILES |
	mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_INTERACTIVE | mysql.CLIENT_TRANSACTIONS | mysql.CLIENT_SECURE_CONNECTION |
	mysql.CLIENT_MULTI_STATEMENTS | mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS | mysql.CLIENT_PLUGIN_AUTH |
	mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA | mysql.CLIENT_DEPRECATE_EOF | mysql.CLIENT_IGNORE_SPACE

// fakeBackendExt are the MariaDB extended capabilities it offers.
const fakeBackendExt = backend.MariaDBBulkOperations | backend.MariaDBExtendedTypeInfo | backend.MariaDBProgress

// fakeBackend is a MariaDB stand-in on 127.0.0.1 for tests that drive
// whole sessions without a server: any login is accepted and every command
// gets a plausible answer in the framing the connection negotiated. SQL
// is not parsed: a SELECT answers with one VARCHAR column per top-level
// item of its select list and two rows of "1", SHOW with two columns,
// anything else with an OK; a statement that contains "fake_error" is
// refused, LOAD DATA LOCAL asks for the file. Prepared statements count
// their ? placeholders, and cursors are served by COM_STMT_FETCH.
type fakeBackend struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns map[*fakeBackendConn]bool
	next  uint32
}

type fakeBackendConn struct {
	id     uint32
	nc     net.Conn
	pkt    *wire.Conn
	caps   uint32 // the client's
	ext    uint32 // MariaDB extended capabilities negotiated
	inTx   bool
	noAC   bool
	stmts  map[uint32]*fakeStmt
	nextSt uint32
}

type fakeStmt struct {
	params, cols int
	cursorRows   int // rows left in an open cursor; -1: none open
}

func newFakeBackend(tb testing.TB) *fakeBackend {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	f := &fakeBackend{ln: ln, conns: map[*fakeBackendConn]bool{}, next: 1000}
	f.wg.Add(1)
	go f.accept()
	return f
}

func (f *fakeBackend) addr() string { return f.ln.Addr().String() }

// connCount is the number of open connections (one goroutine each).
func (f *fakeBackend) connCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

func (f *fakeBackend) accept() {
	defer f.wg.Done()
	for {
		nc, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.next++
		c := &fakeBackendConn{id: f.next, nc: nc, pkt: wire.NewConn(nc, 4096, 4096), stmts: map[uint32]*fakeStmt{}}
		f.conns[c] = true
		f.wg.Add(1)
		f.mu.Unlock()
		go f.serve(c)
	}
}

// close stops the fake and waits for its goroutines.
func (f *fakeBackend) close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.nc.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *fakeBackend) serve(c *fakeBackendConn) {
	defer f.wg.Done()
	defer func() {
		c.nc.Close()
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
	}()
	if !c.login() {
		return
	}
	for {
		c.pkt.Seq = 0
		p, err := c.pkt.ReadPacket()
		if err != nil || len(p) == 0 || p[0] == mysql.COM_QUIT {
			return
		}
		if !c.command(p[0], p[1:]) || c.pkt.Flush() != nil {
			return
		}
	}
}

func (c *fakeBackendConn) login() bool {
	g := append([]byte{10}, "5.5.5-10.11.6-MariaDB-fake\x00"...)
	g = binary.LittleEndian.AppendUint32(g, c.id)
	g = append(g, "abcdefgh\x00"...)
	g = binary.LittleEndian.AppendUint16(g, uint16(fakeBackendCaps&0xffff))
	g = append(g, frontend.DefaultCollationID)
	g = binary.LittleEndian.AppendUint16(g, wire.StatusAutocommit)
	g = binary.LittleEndian.AppendUint16(g, uint16(fakeBackendCaps>>16))
	g = append(g, 21)
	g = append(g, make([]byte, 6)...)
	g = binary.LittleEndian.AppendUint32(g, fakeBackendExt)
	g = append(g, "ijklmnopqrst\x00mysql_native_password\x00"...)
	if c.pkt.WritePacket(g) != nil || c.pkt.Flush() != nil {
		return false
	}
	p, err := c.pkt.ReadPacket()
	if err != nil || len(p) < 4 {
		return false
	}
	c.caps = binary.LittleEndian.Uint32(p) & fakeBackendCaps
	if c.caps&mysql.CLIENT_LONG_PASSWORD == 0 && len(p) >= 32 {
		c.ext = binary.LittleEndian.Uint32(p[28:]) & fakeBackendExt
	}
	return c.ok(0) && c.pkt.Flush() == nil
}

func (c *fakeBackendConn) status() uint16 {
	st := uint16(0)
	if !c.noAC {
		st |= wire.StatusAutocommit
	}
	if c.inTx {
		st |= wire.StatusInTrans
	}
	return st
}

func (c *fakeBackendConn) deprecateEOF() bool { return c.caps&mysql.CLIENT_DEPRECATE_EOF != 0 }

func (c *fakeBackendConn) ok(affected uint64) bool {
	return c.pkt.WritePacket(wire.AppendOK(nil, affected, 0, c.status(), 0, "")) == nil
}

func (c *fakeBackendConn) fail(code uint16, msg string) bool {
	return c.pkt.WritePacket(wire.AppendErr(nil, code, mysql.MySQLState[code], msg)) == nil
}

func (c *fakeBackendConn) eof(status uint16) bool {
	return c.pkt.WritePacket(wire.AppendEOF(nil, 0, status)) == nil
}

// end ends a result set's rows in the connection's framing.
func (c *fakeBackendConn) end(status uint16) bool {
	if c.deprecateEOF() {
		return c.pkt.WritePacket(wire.AppendResultEndOK(nil, 0, status)) == nil
	}
	return c.eof(status)
}

func (c *fakeBackendConn) column(name string) bool {
	b := wire.AppendLenEncString(nil, "def")
	for _, s := range []string{"db", "t", "t", name, name} {
		b = wire.AppendLenEncString(b, s)
	}
	if c.ext&backend.MariaDBExtendedTypeInfo != 0 {
		b = append(b, 0) // no extended metadata
	}
	b = append(b, 0x0c, frontend.DefaultCollationID, 0, 0, 1, 0, 0, mysql.MYSQL_TYPE_VAR_STRING, 0, 0, 0, 0, 0)
	return c.pkt.WritePacket(b) == nil
}

// columns writes a result set's column count and definitions, and the EOF
// after them where the framing has one.
func (c *fakeBackendConn) columns(n int, status uint16) bool {
	if c.pkt.WritePacket(mysql.AppendLengthEncodedInteger(nil, uint64(n))) != nil {
		return false
	}
	for i := range n {
		if !c.column("c" + string(rune('a'+i%26))) {
			return false
		}
	}
	return c.deprecateEOF() || c.eof(status)
}

func (c *fakeBackendConn) textRows(cols, rows int) bool {
	for range rows {
		var b []byte
		for range cols {
			b = wire.AppendLenEncString(b, "1")
		}
		if c.pkt.WritePacket(b) != nil {
			return false
		}
	}
	return true
}

func (c *fakeBackendConn) binaryRows(cols, rows int) bool {
	for range rows {
		b := append([]byte{0}, make([]byte, (cols+7+2)/8)...)
		for range cols {
			b = wire.AppendLenEncString(b, "1")
		}
		if c.pkt.WritePacket(b) != nil {
			return false
		}
	}
	return true
}

// command answers one command; false ends the connection.
func (c *fakeBackendConn) command(cmd byte, arg []byte) bool {
	switch cmd {
	case mysql.COM_QUERY:
		return c.query(string(arg))
	case mysql.COM_INIT_DB:
		if strings.Contains(string(arg), "fake_error") {
			return c.fail(mysql.ER_BAD_DB_ERROR, "Unknown database")
		}
		return c.ok(0)
	case mysql.COM_PING, mysql.COM_REFRESH:
		return c.ok(0)
	case mysql.COM_RESET_CONNECTION:
		c.inTx, c.noAC, c.stmts = false, false, map[uint32]*fakeStmt{}
		return c.ok(0)
	case mysql.COM_SET_OPTION:
		return c.eof(c.status())
	case mysql.COM_STATISTICS:
		return c.pkt.WritePacket([]byte("Uptime: 1  Threads: 1  Questions: 1")) == nil
	case mysql.COM_DEBUG:
		return c.eof(c.status())
	case mysql.COM_FIELD_LIST:
		return c.column("a") && c.column("b") && c.eof(c.status())
	case mysql.COM_STMT_PREPARE:
		return c.prepare(string(arg))
	case mysql.COM_STMT_EXECUTE, mysql.COM_STMT_FETCH, mysql.COM_STMT_RESET, mysql.COM_STMT_CLOSE,
		mysql.COM_STMT_SEND_LONG_DATA, comStmtBulkExecute:
		return c.stmtCommand(cmd, arg)
	}
	return c.fail(mysql.ER_UNKNOWN_COM_ERROR, "Unknown command")
}

func (c *fakeBackendConn) query(sql string) bool {
	q := strings.ToUpper(strings.TrimSpace(sql))
	switch {
	case strings.Contains(q, "FAKE_ERROR"):
		return c.fail(mysql.ER_PARSE_ERROR, "You have an error in your SQL syntax")
	case q == "BEGIN" || strings.HasPrefix(q, "START TRANSACTION") || strings.HasPrefix(q, "XA START"):
		c.inTx = true
	case q == "COMMIT" || q == "ROLLBACK" || strings.HasPrefix(q, "XA COMMIT") || strings.HasPrefix(q, "XA ROLLBACK"):
		c.inTx = false
	case strings.HasPrefix(q, "SET AUTOCOMMIT"):
		c.noAC = strings.HasSuffix(q, "0") || strings.HasSuffix(q, "OFF")
	case strings.HasPrefix(q, "LOAD DATA LOCAL"):
		if c.pkt.WritePacket([]byte("\xfbfile.csv")) != nil || c.pkt.Flush() != nil {
			return false
		}
		for {
			p, err := c.pkt.ReadPacket()
			if err != nil {
				return false
			}
			if len(p) == 0 {
				return c.ok(1)
			}
		}
	case strings.HasPrefix(q, "SELECT") || strings.HasPrefix(q, "(SELECT") || strings.HasPrefix(q, "WITH"):
		n := selectColumns(sql)
		return c.columns(n, c.status()) && c.textRows(n, 2) && c.end(c.status())
	case strings.HasPrefix(q, "SHOW") || strings.HasPrefix(q, "DESC") || strings.HasPrefix(q, "EXPLAIN"):
		return c.columns(2, c.status()) && c.textRows(2, 1) && c.end(c.status())
	}
	if c.noAC && !strings.HasPrefix(q, "SET ") {
		c.inTx = true
	}
	return c.ok(1)
}

// selectColumns guesses the column count of a SELECT: the top-level items
// between SELECT and FROM (at least 1, at most 16).
func selectColumns(sql string) int {
	n, depth := 1, 0
	var quote byte
	for i := 0; i < len(sql); i++ {
		ch := sql[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"' || ch == '`':
			quote = ch
		case ch == '(':
			depth++
		case ch == ')':
			depth--
		case ch == ',' && depth == 0:
			n++
		case depth == 0 && (ch == 'f' || ch == 'F') && i > 0 && sql[i-1] == ' ' && len(sql) >= i+5 && strings.EqualFold(sql[i:i+4], "from"):
			return min(n, 16)
		}
	}
	return min(n, 16)
}

func (c *fakeBackendConn) prepare(sql string) bool {
	if strings.Contains(strings.ToUpper(sql), "FAKE_ERROR") {
		return c.fail(mysql.ER_PARSE_ERROR, "You have an error in your SQL syntax")
	}
	st := &fakeStmt{params: min(strings.Count(sql, "?"), 64), cursorRows: -1}
	if q := strings.ToUpper(strings.TrimSpace(sql)); strings.HasPrefix(q, "SELECT") || strings.HasPrefix(q, "SHOW") {
		st.cols = selectColumns(sql)
	}
	c.nextSt++
	c.stmts[c.nextSt] = st
	b := []byte{wire.OKHeader}
	b = binary.LittleEndian.AppendUint32(b, c.nextSt)
	b = binary.LittleEndian.AppendUint16(b, uint16(st.cols))
	b = binary.LittleEndian.AppendUint16(b, uint16(st.params))
	b = append(b, 0, 0, 0)
	if c.pkt.WritePacket(b) != nil {
		return false
	}
	for _, n := range []int{st.params, st.cols} {
		for i := range n {
			if !c.column("p" + string(rune('a'+i%26))) {
				return false
			}
		}
		if n > 0 && !c.deprecateEOF() && !c.eof(c.status()) {
			return false
		}
	}
	return true
}

func (c *fakeBackendConn) stmtCommand(cmd byte, arg []byte) bool {
	var st *fakeStmt
	if len(arg) >= 4 {
		st = c.stmts[binary.LittleEndian.Uint32(arg)]
	}
	switch cmd {
	case mysql.COM_STMT_CLOSE:
		if len(arg) >= 4 {
			delete(c.stmts, binary.LittleEndian.Uint32(arg))
		}
		return true
	case mysql.COM_STMT_SEND_LONG_DATA:
		return true
	}
	if st == nil {
		return c.fail(mysql.ER_UNKNOWN_STMT_HANDLER, "Unknown prepared statement handler")
	}
	switch cmd {
	case mysql.COM_STMT_RESET:
		st.cursorRows = -1
		return c.ok(0)
	case comStmtBulkExecute:
		return c.ok(1)
	case mysql.COM_STMT_FETCH:
		if st.cursorRows < 0 {
			return c.fail(mysql.ER_STMT_HAS_NO_OPEN_CURSOR, "The statement has no open cursor")
		}
		n := 0
		if len(arg) >= 8 {
			n = int(min(binary.LittleEndian.Uint32(arg[4:]), 1000))
		}
		n = min(n, st.cursorRows)
		st.cursorRows -= n
		status := c.status() | wire.StatusCursorExists
		if st.cursorRows == 0 {
			status |= wire.StatusLastRowSent
			st.cursorRows = -1
		}
		return c.binaryRows(st.cols, n) && c.end(status)
	}
	// COM_STMT_EXECUTE
	if st.cols == 0 {
		if c.noAC {
			c.inTx = true
		}
		return c.ok(1)
	}
	if len(arg) >= 5 && arg[4]&wire.CursorReadOnly != 0 {
		st.cursorRows = 2
		status := c.status() | wire.StatusCursorExists
		if !c.columns(st.cols, status) {
			return false
		}
		if c.deprecateEOF() {
			return c.end(status)
		}
		return true // the EOF after the columns was the answer's end
	}
	return c.columns(st.cols, c.status()) && c.binaryRows(st.cols, 2) && c.end(c.status())
}
