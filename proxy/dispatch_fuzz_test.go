package proxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/frontend"
	"github.com/keyshard/keyshard/proxy/frontend/frontendtest"
)

// The bits of FuzzDispatch's flavor byte: what the client negotiates at
// login, and (the top two bits) who it logs in as (dispatchUsers).
const (
	flavorDeprecateEOF = 1 << iota
	flavorMulti
	flavorLocalFiles
	flavorTrack
	flavorDB      // log in with database kingshard
	flavorMariaDB // no CLIENT_MYSQL; extended type info and progress reports
)

// dispatchUsers: sharded schema, unsharded schema, admin with XA
// transactions, no schema at all.
var dispatchUsers = [4]string{"ks", "plain", "root", "nopw"}

// maxDispatchCommands bounds the commands of one input.
const maxDispatchCommands = 12

// FuzzDispatch logs in to a real Server (backed by fakeBackend) as the
// client flavor says, then sends each packet of cmds (see splitPackets)
// as a command: its first byte the command, the rest its payload. The
// proxy must never panic; it must answer every command with a well-formed
// answer of the kind that command gets, in the framing the client
// negotiated (OK, ERR, EOF, result sets, the prepare answer, the field
// list...), say nothing to COM_STMT_SEND_LONG_DATA and COM_STMT_CLOSE, and
// close the connection only for COM_QUIT or after an error that ends the
// session; and once the client leaves, the session must end and release
// every connection, statement and goroutine (fuzzProxy.settle).
func FuzzDispatch(f *testing.F) {
	h := newFuzzProxy(f, false)
	for _, s := range dispatchSeeds() {
		f.Add(s.flavor, joinPackets(s.cmds...))
	}
	f.Fuzz(func(t *testing.T, flavor byte, cmds []byte) {
		h.settle(t, h.session(t, flavor, splitPackets(cmds, maxDispatchCommands)))
	})
}

// dispatchClient reads the answers to the commands it sends, checking
// their framing as a client of its flavor would.
type dispatchClient struct {
	pc       *wire.Conn
	eofs     bool   // EOF packets frame result sets (no CLIENT_DEPRECATE_EOF)
	ext      bool   // column definitions carry MariaDB's extended type info
	local    bool   // CLIENT_LOCAL_FILES
	lastErr  uint16 // the errno of the last answer, if an ERR
	lastCmd  byte
	lastMore bool // the last result set's end said more results follow
	closed   bool
	// transcript has each command and the first packet of its answer,
	// for the failure message.
	transcript []string
}

// session runs one client of flavor through cmds; see FuzzDispatch.
func (h *fuzzProxy) session(t *testing.T, flavor byte, cmds [][]byte) error {
	nc := h.dial(t)
	defer nc.Close()
	c, err := h.clientLogin(nc, flavor)
	if err != nil {
		return fmt.Errorf("login: %v", err)
	}
	for i, cmd := range cmds {
		if c.closed {
			return nil
		}
		c.pc.Seq = 0
		err := c.pc.WritePacket(cmd)
		if err == nil {
			err = c.pc.Flush()
		}
		if err != nil && !closedErr(err) {
			return fmt.Errorf("command %d: %v", i, err)
		}
		if err := c.answer(cmd); err != nil {
			return fmt.Errorf("command %d %q: %v\nsession (flavor %#x):\n%s", i, cmd, err, flavor, strings.Join(c.transcript, "\n"))
		}
	}
	return nil
}

// clientLogin logs in as flavor says, with the right password.
func (h *fuzzProxy) clientLogin(nc net.Conn, flavor byte) (*dispatchClient, error) {
	pc := wire.NewConn(nc, 4096, 4096)
	p, err := pc.ReadPacket()
	if err != nil {
		return nil, err
	}
	g, err := parseGreeting(p)
	if err != nil {
		return nil, err
	}
	user := dispatchUsers[flavor>>6]
	r := frontendtest.ClientResponse{
		Caps: mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_LONG_FLAG | mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_TRANSACTIONS |
			mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS | mysql.CLIENT_PLUGIN_AUTH |
			mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA | mysql.CLIENT_FOUND_ROWS,
		Collation: frontend.DefaultCollationID, User: user, Plugin: g.plugin, Auth: frontendtest.AuthFor(g.plugin, g.scramble, fuzzPasswords[user]),
	}
	for bit, caps := range map[byte]uint32{flavorDeprecateEOF: mysql.CLIENT_DEPRECATE_EOF, flavorMulti: mysql.CLIENT_MULTI_STATEMENTS,
		flavorLocalFiles: mysql.CLIENT_LOCAL_FILES, flavorTrack: mysql.CLIENT_SESSION_TRACK} {
		if flavor&bit != 0 {
			r.Caps |= caps
		}
	}
	if flavor&flavorDB != 0 && user != "nopw" {
		r.Caps |= mysql.CLIENT_CONNECT_WITH_DB
		r.DB = "kingshard"
	}
	c := &dispatchClient{pc: pc, eofs: flavor&flavorDeprecateEOF == 0, local: flavor&flavorLocalFiles != 0}
	if flavor&flavorMariaDB != 0 && g.caps&mysql.CLIENT_LONG_PASSWORD == 0 {
		r.Caps &^= mysql.CLIENT_LONG_PASSWORD
		r.Ext = backend.MariaDBExtendedTypeInfo | backend.MariaDBProgress | backend.MariaDBBulkOperations
		c.ext = true
	}
	if err := pc.WritePacket(r.Append(nil)); err != nil {
		return nil, err
	}
	if err := pc.Flush(); err != nil {
		return nil, err
	}
	if p, err = pc.ReadPacket(); err != nil {
		return nil, err
	}
	if len(p) == 0 || p[0] != wire.OKHeader {
		return nil, fmt.Errorf("refused: %q", p)
	}
	return c, nil
}

// next reads the next packet of an answer, skipping progress reports.
func (c *dispatchClient) next() ([]byte, error) {
	for {
		p, err := c.pc.ReadPacket()
		if err != nil {
			return nil, err
		}
		if len(p) == 0 {
			return nil, errors.New("empty packet")
		}
		if !wire.IsProgress(p) {
			return p, nil
		}
		if !c.ext {
			return nil, errors.New("progress report to a client that did not ask for them")
		}
	}
}

// closeErrno are the errors after which the proxy may end the session.
var closeErrno = map[uint16]bool{
	erConnectionKilled:             true, // KILL of the session itself
	mysql.ER_NET_PACKET_TOO_LARGE:  true,
	mysql.ER_NET_READ_ERROR:        true, // a backend connection holding session state was lost
	mysql.ER_ERROR_DURING_ROLLBACK: true, // ... holding a transaction
}

// first reads the first packet of the answer to cmd. done reports that
// the answer is over: the connection closed where it may (c.closed), or
// an ERR (checked, c.lastErr).
func (c *dispatchClient) first(cmd byte) (p []byte, done bool, err error) {
	prevErr, prevCmd := c.lastErr, c.lastCmd
	c.lastErr, c.lastCmd = 0, cmd
	p, err = c.next()
	c.transcript = append(c.transcript, fmt.Sprintf("  %#02x -> %.80q %v", cmd, p, err))
	if err != nil {
		if closedErr(err) && (cmd == mysql.COM_QUIT || closeErrno[prevErr] || prevErr != 0 && prevCmd == mysql.COM_CHANGE_USER) {
			c.closed = true
			return nil, true, nil
		}
		return nil, true, fmt.Errorf("no answer (%v); the answer before was ERR %d to command %#x", err, prevErr, prevCmd)
	}
	if cmd == mysql.COM_QUIT {
		return nil, true, fmt.Errorf("answer %q to COM_QUIT", p)
	}
	if p[0] == wire.ErrHeader {
		return p, true, c.checkErr(p)
	}
	return p, false, nil
}

func (c *dispatchClient) checkErr(p []byte) error {
	e, err := checkErr(p)
	if err != nil {
		return err
	}
	c.lastErr = e.Code
	return nil
}

// answer reads and checks the whole answer to command packet cmd.
func (c *dispatchClient) answer(cmd []byte) error {
	op := byte(0xff) // an empty packet: answered like an unknown command
	if len(cmd) > 0 {
		op = cmd[0]
	}
	switch op {
	case mysql.COM_STMT_SEND_LONG_DATA, mysql.COM_STMT_CLOSE:
		// No answer: a COM_PING after it must get its OK first.
		c.pc.Seq = 0
		if err := c.pc.WritePacket([]byte{mysql.COM_PING}); err != nil {
			return err
		}
		if err := c.pc.Flush(); err != nil && !closedErr(err) {
			return err
		}
		p, done, err := c.first(mysql.COM_PING)
		if err != nil || c.closed {
			return err
		}
		if done || p[0] != wire.OKHeader {
			return fmt.Errorf("the COM_PING after it got %q: an answer to a command that has none?", p)
		}
		return nil
	case mysql.COM_QUERY, mysql.COM_STMT_EXECUTE, comStmtBulkExecute:
		return c.results(op)
	case mysql.COM_STMT_PREPARE:
		return c.prepared()
	case mysql.COM_STMT_FETCH:
		p, done, err := c.first(op)
		if done || err != nil {
			return err
		}
		return c.rows(p, 0, true, false)
	case mysql.COM_FIELD_LIST:
		return c.fieldList()
	case mysql.COM_CHANGE_USER:
		return c.changeUser(cmd)
	}
	p, done, err := c.first(op)
	if done || err != nil {
		return err
	}
	switch op {
	case mysql.COM_STATISTICS:
		return nil // a line of text
	case mysql.COM_SET_OPTION:
		return c.end(p, false)
	case mysql.COM_DEBUG:
		if !wire.IsOldEOF(p) {
			return fmt.Errorf("answer %q to COM_DEBUG", p)
		}
		return nil
	}
	if p[0] != wire.OKHeader {
		return fmt.Errorf("answer %q, want OK or ERR", p)
	}
	if _, err := wire.ParseOK(p); err != nil {
		return fmt.Errorf("OK %q: %v", p, err)
	}
	return nil
}

// end checks the packet that ends a result set (or answers
// COM_SET_OPTION) and returns its status: a classic EOF or, with
// CLIENT_DEPRECATE_EOF, an 0xfe-headed OK.
func (c *dispatchClient) end(p []byte, anyForm bool) error {
	_, err := c.endStatus(p, anyForm)
	return err
}

func (c *dispatchClient) endStatus(p []byte, anyForm bool) (uint16, error) {
	if !wire.IsEOF(p) {
		return 0, fmt.Errorf("%q where an EOF belongs", p)
	}
	if wire.IsOldEOF(p) && (c.eofs || anyForm) {
		_, st := wire.ParseEOF(p)
		return st, nil
	}
	if c.eofs && !anyForm || len(p) < 7 {
		return 0, fmt.Errorf("end of result %q in the wrong framing (EOF packets: %v)", p, c.eofs)
	}
	ok, err := wire.ParseOK(p)
	if err != nil {
		return 0, fmt.Errorf("end of result %q: %v", p, err)
	}
	return ok.Status, nil
}

// results reads the results of a statement (COM_QUERY, an execution):
// OKs, result sets and LOCAL INFILE requests, until one says no more
// follows.
func (c *dispatchClient) results(cmd byte) error {
	p, done, err := c.first(cmd)
	for {
		if done || err != nil {
			return err
		}
		switch p[0] {
		case wire.OKHeader:
			ok, err := wire.ParseOK(p)
			if err != nil {
				return fmt.Errorf("OK %q: %v", p, err)
			}
			if ok.Status&wire.StatusMoreResultsExists == 0 {
				return nil
			}
		case wire.LocalInfileHdr:
			if !c.local || cmd != mysql.COM_QUERY {
				return fmt.Errorf("LOCAL INFILE request %q (client LOCAL_FILES %v, command %#x)", p, c.local, cmd)
			}
			if err := c.pc.WritePacket([]byte("1,a\n2,b\n")); err != nil {
				return err
			}
			if err := c.pc.WritePacket(nil); err != nil {
				return err
			}
			if err := c.pc.Flush(); err != nil {
				return err
			}
		case wire.EOFHeader:
			return fmt.Errorf("%q where a result begins", p)
		default:
			more, err := c.resultSet(p, cmd != mysql.COM_QUERY)
			if err != nil || !more {
				return err
			}
		}
		if p, err = c.next(); err != nil {
			return fmt.Errorf("next result: %v", err)
		}
		if p[0] == wire.ErrHeader {
			return c.checkErr(p)
		}
	}
}

// resultSet reads a result set whose column count is p.
func (c *dispatchClient) resultSet(p []byte, binaryRows bool) (more bool, err error) {
	n, next, err := wire.ReadLenEncInt(p, 0)
	if err != nil || next != len(p) || n == 0 || n > 4096 {
		return false, fmt.Errorf("bad column count %q", p)
	}
	if err := c.columns(int(n)); err != nil {
		return false, err
	}
	if c.eofs {
		e, err := c.next()
		if err != nil {
			return false, fmt.Errorf("EOF after the columns: %v", err)
		}
		if !wire.IsOldEOF(e) {
			return false, fmt.Errorf("%q after the columns, want an EOF", e)
		}
		if _, st := wire.ParseEOF(e); st&wire.StatusCursorExists != 0 {
			if !binaryRows {
				return false, errors.New("a cursor opened by a text statement")
			}
			return false, nil // a cursor: the rows come with COM_STMT_FETCH
		}
	}
	r, err := c.next()
	if err != nil {
		return false, fmt.Errorf("rows: %v", err)
	}
	return c.moreRows(r, int(n), binaryRows)
}

func (c *dispatchClient) moreRows(r []byte, n int, binaryRows bool) (bool, error) {
	err := c.rows(r, n, binaryRows, true)
	if err != nil || c.lastErr != 0 {
		return false, err
	}
	return c.lastMore, nil
}

// columns reads and checks n column definitions.
func (c *dispatchClient) columns(n int) error {
	for i := range n {
		d, err := c.next()
		if err != nil {
			return fmt.Errorf("column %d: %v", i, err)
		}
		if err := c.column(d); err != nil {
			return err
		}
	}
	return nil
}

func (c *dispatchClient) column(d []byte) error {
	pos, err := wire.ColumnFixed(d, c.ext)
	if err != nil || d[pos] != 0x0c {
		return fmt.Errorf("bad column definition %q (extended type info %v)", d, c.ext)
	}
	return nil
}

// rows reads rows from r (the first, already read) to the packet that
// ends them. n is the column count (0: unknown, for COM_STMT_FETCH),
// which text rows must match. strict: the end must be in the client's
// framing.
func (c *dispatchClient) rows(r []byte, n int, binaryRows, strict bool) error {
	c.lastMore = false
	for {
		switch {
		case r[0] == wire.ErrHeader:
			return c.checkErr(r)
		case wire.IsEOF(r):
			st, err := c.endStatus(r, !strict)
			c.lastMore = st&wire.StatusMoreResultsExists != 0
			return err
		case binaryRows:
			if r[0] != 0 || n > 0 && len(r) < 1+(n+9)/8 {
				return fmt.Errorf("bad binary row %q", r)
			}
		default:
			pos := 0
			for i := range n {
				_, _, next, err := wire.ReadLenEncString(r, pos)
				if err != nil {
					return fmt.Errorf("text row %q: column %d: %v", r, i, err)
				}
				pos = next
			}
			if pos != len(r) {
				return fmt.Errorf("text row %q: %d bytes after %d columns", r, len(r)-pos, n)
			}
		}
		var err error
		if r, err = c.next(); err != nil {
			return fmt.Errorf("rows: %v", err)
		}
	}
}

// prepared reads the answer to COM_STMT_PREPARE.
func (c *dispatchClient) prepared() error {
	p, done, err := c.first(mysql.COM_STMT_PREPARE)
	if done || err != nil {
		return err
	}
	if p[0] != wire.OKHeader || len(p) < 12 {
		return fmt.Errorf("bad prepare answer %q", p)
	}
	cols, params := int(binary.LittleEndian.Uint16(p[5:])), int(binary.LittleEndian.Uint16(p[7:]))
	for _, n := range []int{params, cols} {
		if err := c.columns(n); err != nil {
			return err
		}
		if n > 0 && c.eofs {
			e, err := c.next()
			if err != nil || !wire.IsOldEOF(e) {
				return fmt.Errorf("%q (%v) after the definitions, want an EOF", e, err)
			}
		}
	}
	return nil
}

// fieldList reads the answer to COM_FIELD_LIST: column definitions and
// an end, which is a classic EOF whatever the client negotiated.
func (c *dispatchClient) fieldList() error {
	p, done, err := c.first(mysql.COM_FIELD_LIST)
	for {
		if done || err != nil {
			return err
		}
		if wire.IsEOF(p) {
			return c.end(p, true)
		}
		if err := c.column(p); err != nil {
			return err
		}
		if p, err = c.next(); err != nil {
			return fmt.Errorf("field list: %v", err)
		}
	}
}

// changeUser reads the answer to COM_CHANGE_USER cmd, answering an auth
// switch with the right password of the user cmd names.
func (c *dispatchClient) changeUser(cmd []byte) error {
	user, _, _ := wire.ReadNulString(cmd, 1)
	p, done, err := c.first(mysql.COM_CHANGE_USER)
	for {
		if done || err != nil {
			return err
		}
		switch {
		case p[0] == wire.OKHeader:
			_, err := wire.ParseOK(p)
			return err
		case p[0] == wire.EOFHeader:
			plugin, next, err := wire.ReadNulString(p, 1)
			if err != nil {
				return fmt.Errorf("bad auth switch %q", p)
			}
			scramble := bytes.TrimSuffix(p[next:], []byte{0})
			if err := c.send(frontendtest.AuthFor(string(plugin), scramble, fuzzPasswords[string(user)])); err != nil {
				return err
			}
		case p[0] == 0x01 && len(p) == 2 && p[1] == 3: // fast auth: the OK follows
		case p[0] == 0x01 && len(p) == 2 && p[1] == 4: // full authentication: refused without TLS
			if err := c.send(nil); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected %q in COM_CHANGE_USER", p)
		}
		if p, err = c.next(); err != nil {
			return fmt.Errorf("COM_CHANGE_USER: %v", err)
		}
		done = p[0] == wire.ErrHeader
		if done {
			err = c.checkErr(p)
		}
	}
}

func (c *dispatchClient) send(b []byte) error {
	if err := c.pc.WritePacket(b); err != nil {
		return err
	}
	return c.pc.Flush()
}

// dispatchSeed is one seed of FuzzDispatch: a client flavor and its
// commands.
type dispatchSeed struct {
	flavor byte
	cmds   [][]byte
}

func query(sql string) []byte { return append([]byte{mysql.COM_QUERY}, sql...) }

func stmtCmd(cmd byte, id uint32, rest ...byte) []byte {
	return append(binary.LittleEndian.AppendUint32([]byte{cmd}, id), rest...)
}

// execute builds COM_STMT_EXECUTE of statement id with cursor flags and
// parameters bound with their types (int64, string or nil for NULL).
func execute(id uint32, flags byte, params ...any) []byte {
	b := stmtCmd(mysql.COM_STMT_EXECUTE, id, flags, 1, 0, 0, 0)
	if len(params) == 0 {
		return b
	}
	nulls := make([]byte, (len(params)+7)/8)
	var types, values []byte
	for i, v := range params {
		switch v := v.(type) {
		case int64:
			types = append(types, mysql.MYSQL_TYPE_LONGLONG, 0)
			values = binary.LittleEndian.AppendUint64(values, uint64(v))
		case string:
			types = append(types, mysql.MYSQL_TYPE_VAR_STRING, 0)
			values = wire.AppendLenEncString(values, v)
		default:
			types = append(types, mysql.MYSQL_TYPE_NULL, 0)
			nulls[i/8] |= 1 << (i % 8)
		}
	}
	b = append(append(b, nulls...), 1)
	return append(append(b, types...), values...)
}

// changeUserCmd builds COM_CHANGE_USER (for a client with
// CLIENT_SECURE_CONNECTION and CLIENT_PLUGIN_AUTH).
func changeUserCmd(user string, auth []byte, db, plugin string) []byte {
	b := append([]byte{mysql.COM_CHANGE_USER}, user...)
	b = append(append(b, 0, byte(len(auth))), auth...)
	b = append(append(b, db...), 0, frontend.DefaultCollationID, 0)
	return append(append(b, plugin...), 0)
}

func dispatchSeeds() []dispatchSeed {
	ks, plain, root, nopw := byte(0), byte(1<<6), byte(2<<6), byte(3<<6)
	all := byte(flavorDeprecateEOF | flavorMulti | flavorLocalFiles | flavorTrack | flavorDB | flavorMariaDB)
	ping := []byte{mysql.COM_PING}
	return []dispatchSeed{
		// What a driver does after login.
		{ks | flavorDB, [][]byte{
			query("select @@version_comment limit 1"), query("SET NAMES utf8mb4"), query("SET autocommit=1"),
			query("SELECT 1"), query("SHOW DATABASES"), ping, {mysql.COM_QUIT},
		}},
		{plain | all, [][]byte{
			query("SET SESSION sql_mode = 'STRICT_TRANS_TABLES'"), query("SELECT @@max_allowed_packet, @@system_time_zone"),
			{mysql.COM_STATISTICS}, {mysql.COM_DEBUG}, {mysql.COM_REFRESH, 1}, {mysql.COM_RESET_CONNECTION}, query("SELECT 1; SELECT 2"),
		}},
		// Sharded statements.
		{ks | flavorDB | flavorDeprecateEOF, [][]byte{
			query("SELECT id, name FROM test_shard_hash WHERE id IN (1, 2, 3) ORDER BY id LIMIT 2"),
			query("SELECT COUNT(*) FROM test_shard_hash"),
			query("INSERT INTO test_shard_hash (id, name) VALUES (1, 'a'), (2, 'b'), (7, 'c')"),
			query("UPDATE test_shard_hash SET name = 'x' WHERE id = 5"),
			query("DELETE FROM test_shard_range WHERE id BETWEEN 10 AND 150"),
			query("SELECT * FROM test_shard_range WHERE id > 90 ORDER BY id DESC"),
			query("EXPLAIN SHARD SELECT * FROM test_shard_hash WHERE id = 3"),
			query("SHOW CREATE TABLE test_shard_hash"),
			query("SELECT SQL_CALC_FOUND_ROWS id FROM test_shard_hash WHERE id = 1 LIMIT 1"), query("SELECT FOUND_ROWS()"),
		}},
		// A batch from a client without multi-statements, on a sharded
		// schema: planned as one statement, its shape "SELECT ?;SELECT ?"
		// parsed as two (the router returned no plan and no error).
		{root | flavorDeprecateEOF | flavorLocalFiles | flavorMariaDB, [][]byte{query("SELECT 0;SELECT 0")}},
		{ks | flavorDB, [][]byte{query("SELECT 1; SELECT * FROM test_shard_hash WHERE id = 1"), query("SELECT ?; SELECT ?")}},
		// Transactions, locks, the session's own state.
		{root | flavorDB | flavorTrack, [][]byte{
			query("BEGIN"), query("INSERT INTO test_shard_hash (id) VALUES (1), (2)"), query("COMMIT"),
			query("SET autocommit = 0"), query("UPDATE t SET a = 1"), query("ROLLBACK"), query("SET autocommit = 1"),
			query("LOCK TABLES t WRITE"), query("UNLOCK TABLES"), query("USE kingshard"), {mysql.COM_INIT_DB, 'k', 's'},
			{mysql.COM_INIT_DB, 'f', 'a', 'k', 'e', '_', 'e', 'r', 'r', 'o', 'r'},
		}},
		{plain | flavorMulti, [][]byte{
			query("SELECT LAST_INSERT_ID(), ROW_COUNT(), CONNECTION_ID()"), query("SELECT fake_error"),
			query("KILL 999999"), query("KILL QUERY 1"), query("PREPARE s FROM 'SELECT ?'"), query("SET @a = 1"),
			query("EXECUTE s USING @a"), query("DEALLOCATE PREPARE s"), query("show fuzz status"), query("admin fuzz"),
			query("admin fuzz error"), query(""),
		}},
		{plain | flavorLocalFiles, [][]byte{query("LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE t"), ping}},
		{ks | flavorDB | flavorLocalFiles, [][]byte{
			query("LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE test_shard_hash FIELDS TERMINATED BY ',' (id, name)"),
		}},
		{plain, [][]byte{query("LOAD DATA LOCAL INFILE 'x.csv' INTO TABLE t")}},
		// Prepared statements: prepare, execute, cursors, long data.
		{plain | flavorDB, [][]byte{
			append([]byte{mysql.COM_STMT_PREPARE}, "SELECT a, b FROM t WHERE a = ? AND b = ?"...),
			execute(1, 0, int64(7), "x"), execute(1, 0), execute(1, 0, nil, nil),
			execute(1, wire.CursorReadOnly, int64(1), "y"), stmtCmd(mysql.COM_STMT_FETCH, 1, 1, 0, 0, 0),
			stmtCmd(mysql.COM_STMT_FETCH, 1, 5, 0, 0, 0), stmtCmd(mysql.COM_STMT_FETCH, 1, 1, 0, 0, 0),
			stmtCmd(mysql.COM_STMT_SEND_LONG_DATA, 1, 1, 0, 'l', 'o', 'n', 'g'), execute(1, 0, int64(2), nil),
			stmtCmd(mysql.COM_STMT_RESET, 1), stmtCmd(mysql.COM_STMT_CLOSE, 1), execute(1, 0),
		}},
		{plain | flavorDB | flavorDeprecateEOF | flavorMariaDB, [][]byte{
			append([]byte{mysql.COM_STMT_PREPARE}, "INSERT INTO t (a, b) VALUES (?, ?)"...),
			stmtCmd(comStmtBulkExecute, 1, bulkSendTypes, 0, mysql.MYSQL_TYPE_LONGLONG, 0, mysql.MYSQL_TYPE_LONGLONG, 0,
				0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0),
			append([]byte{mysql.COM_STMT_PREPARE}, "SELECT 1"...), execute(2, wire.CursorReadOnly),
			stmtCmd(mysql.COM_STMT_FETCH, 2, 10, 0, 0, 0), execute(0xffffffff, 0), stmtCmd(mysql.COM_STMT_CLOSE, 2),
		}},
		{ks | flavorDB, [][]byte{
			append([]byte{mysql.COM_STMT_PREPARE}, "SELECT id, name FROM test_shard_hash WHERE id = ?"...),
			execute(1, 0, int64(3)), execute(1, 0, "5"), execute(1, 0, nil), execute(1, wire.CursorReadOnly, int64(3)),
			append([]byte{mysql.COM_STMT_PREPARE}, "INSERT INTO test_shard_hash (id, name) VALUES (?, ?), (?, ?)"...),
			execute(2, 0, int64(1), "a", int64(2), "b"),
			append([]byte{mysql.COM_STMT_PREPARE}, "SELECT * FROM test_shard_hash WHERE id IN (?, ?) ORDER BY id"...),
			execute(3, 0, int64(1), int64(2)), execute(3, wire.CursorReadOnly, int64(1), int64(2)),
			append([]byte{mysql.COM_STMT_PREPARE}, "DROP TABLE test_shard_hash"...),
		}},
		// Other commands, the odd and the unknown.
		{plain | flavorDB, [][]byte{
			{mysql.COM_FIELD_LIST, 't', 0}, {mysql.COM_FIELD_LIST, 't', 0, '%'}, {mysql.COM_SET_OPTION, 1, 0}, query("SELECT 1; SELECT 2"),
			{mysql.COM_SET_OPTION, 0, 0}, {mysql.COM_SET_OPTION, 9, 0}, {mysql.COM_SET_OPTION}, {mysql.COM_PROCESS_KILL, 1, 2, 3, 4},
			{mysql.COM_PROCESS_KILL}, {mysql.COM_SLEEP}, {mysql.COM_TIME}, {mysql.COM_BINLOG_DUMP, 4, 0, 0, 0}, {}, {0xff},
		}},
		{nopw, [][]byte{query("SELECT 1"), {mysql.COM_FIELD_LIST, 't', 0}, append([]byte{mysql.COM_STMT_PREPARE}, "SELECT ?"...), ping}},
		// COM_CHANGE_USER: refused, then to users with and without a schema.
		{ks | flavorDB, [][]byte{
			changeUserCmd("ks", bytes.Repeat([]byte{1}, 20), "kingshard", mysql.AUTH_NATIVE_PASSWORD),
			changeUserCmd("plain", nil, "", mysql.AUTH_CACHING_SHA2_PASSWORD), query("SELECT 1"),
			changeUserCmd("nopw", nil, "", mysql.AUTH_NATIVE_PASSWORD), query("SELECT 1"),
			changeUserCmd("root", nil, "kingshard", "mysql_clear_password"), query("SELECT 1"),
			changeUserCmd("sha2", nil, "", mysql.AUTH_CACHING_SHA2_PASSWORD),
			changeUserCmd("sha2", bytes.Repeat([]byte{2}, 32), "", mysql.AUTH_CACHING_SHA2_PASSWORD),
			changeUserCmd("nobody", nil, "", ""), {mysql.COM_CHANGE_USER},
		}},
		{plain, [][]byte{
			changeUserCmd("root", nil, "fake_error", "x"),
			stmtCmd(mysql.COM_STMT_EXECUTE, 9), stmtCmd(mysql.COM_STMT_FETCH, 9), stmtCmd(mysql.COM_STMT_RESET, 9), {mysql.COM_STMT_EXECUTE},
		}},
	}
}
