package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	gomysql "github.com/go-sql-driver/mysql"
)

// rawCaps are the capabilities of the hand-made handshake responses.
const rawCaps = mysql.CLIENT_PROTOCOL_41 | mysql.CLIENT_SECURE_CONNECTION | mysql.CLIENT_PLUGIN_AUTH |
	mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_TRANSACTIONS | mysql.CLIENT_CONNECT_WITH_DB

// rawConn speaks MySQL packet framing by hand, for what a well-behaved
// client never sends.
type rawConn struct {
	t   *testing.T
	nc  net.Conn
	br  *bufio.Reader
	seq uint8
	// anySeq accepts whatever sequence id the server uses next.
	anySeq bool
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	// Only a guard against a hung proxy, never an assertion.
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

func (r *rawConn) read() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r.br, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	if r.anySeq {
		r.seq = hdr[3]
	}
	if hdr[3] != r.seq {
		return nil, fmt.Errorf("packet sequence %d, want %d", hdr[3], r.seq)
	}
	r.seq++
	p := make([]byte, n)
	if _, err := io.ReadFull(r.br, p); err != nil {
		return nil, err
	}
	return p, nil
}

func (r *rawConn) mustRead() []byte {
	r.t.Helper()
	p, err := r.read()
	if err != nil {
		r.t.Fatalf("reading a packet: %v", err)
	}
	if len(p) == 0 {
		r.t.Fatal("empty packet")
	}
	return p
}

// writeSeq writes one packet with an explicit sequence id.
func (r *rawConn) writeSeq(seq uint8, payload []byte) {
	r.t.Helper()
	b := make([]byte, 4, 4+len(payload))
	b[0], b[1], b[2], b[3] = byte(len(payload)), byte(len(payload)>>8), byte(len(payload)>>16), seq
	if _, err := r.nc.Write(append(b, payload...)); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *rawConn) writePacket(payload []byte) {
	r.t.Helper()
	r.writeSeq(r.seq, payload)
	r.seq++
}

// wantClosed fails unless the server closes the connection without sending
// anything more.
func (r *rawConn) wantClosed() {
	r.t.Helper()
	var b [1]byte
	n, err := r.br.Read(b[:])
	if n != 0 || err == nil {
		rest, _ := io.ReadAll(io.LimitReader(r.br, 256))
		r.t.Fatalf("want the server to close the connection, got more data: %q", append(b[:n], rest...))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		r.t.Fatalf("server did not close the connection: %v", err)
	}
}

// greeting is the decoded part of Protocol::HandshakeV10 the tests need.
type greeting struct {
	connID   uint32
	caps     uint32
	scramble []byte
	plugin   string
}

func (r *rawConn) readGreeting() greeting {
	r.t.Helper()
	p := r.mustRead()
	if p[0] != 10 {
		r.t.Fatalf("greeting: protocol version %d (packet %q)", p[0], p)
	}
	pos := bytes.IndexByte(p[1:], 0) + 2
	var g greeting
	g.connID = binary.LittleEndian.Uint32(p[pos:])
	pos += 4
	g.scramble = append(g.scramble, p[pos:pos+8]...)
	pos += 9
	g.caps = uint32(binary.LittleEndian.Uint16(p[pos:]))
	pos += 2 + 1 + 2
	g.caps |= uint32(binary.LittleEndian.Uint16(p[pos:])) << 16
	pos += 2
	authLen := int(p[pos])
	pos += 1 + 10
	n := max(13, authLen-8)
	g.scramble = append(g.scramble, p[pos:pos+n-1]...)
	pos += n
	if end := bytes.IndexByte(p[pos:], 0); end >= 0 {
		g.plugin = string(p[pos : pos+end])
	}
	return g
}

// handshakeResponse builds a HandshakeResponse41 payload.
func handshakeResponse(caps uint32, user string, auth []byte, db, plugin string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, caps)
	b = binary.LittleEndian.AppendUint32(b, 1<<24)
	b = append(b, 45)
	b = append(b, make([]byte, 23)...)
	b = append(b, user...)
	b = append(b, 0, byte(len(auth)))
	b = append(b, auth...)
	b = append(b, db...)
	b = append(b, 0)
	b = append(b, plugin...)
	return append(b, 0)
}

// rawLogin logs in as ks with mysql_native_password and returns the
// connection ready for a command.
func rawLogin(t *testing.T, addr string) (*rawConn, greeting) {
	t.Helper()
	r := dialRaw(t, addr)
	g := r.readGreeting()
	r.writePacket(handshakeResponse(rawCaps, "ks", mysql.CalcNativePassword(g.scramble, []byte("ks")), "ks_test", mysql.AUTH_NATIVE_PASSWORD))
	if p := r.mustRead(); p[0] != mysql.OK_HEADER {
		t.Fatalf("login: got %q, want OK", p)
	}
	return r, g
}

// errCode returns the code of an ERR packet, or 0.
func errCode(p []byte) uint16 {
	if len(p) < 3 || p[0] != mysql.ERR_HEADER {
		return 0
	}
	return binary.LittleEndian.Uint16(p[1:])
}

// goMySQL connects with go-mysql as ks to ks_test.
func goMySQL(t *testing.T, addr string, opts ...client.Option) *client.Conn {
	t.Helper()
	c, err := client.Connect(addr, "ks", "ks", "ks_test", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func withCaps(on, off uint32) client.Option {
	return func(c *client.Conn) error {
		for bit := uint32(1); bit != 0; bit <<= 1 {
			if on&bit != 0 {
				if err := c.SetCapability(bit); err != nil {
					return err
				}
			}
			if off&bit != 0 {
				c.UnsetCapability(bit)
			}
		}
		return nil
	}
}

// command sends one raw command on a go-mysql connection and returns the
// first packet of the answer.
func command(t *testing.T, c *client.Conn, payload ...byte) []byte {
	t.Helper()
	c.ResetSequence()
	if err := c.WritePacket(append(make([]byte, 4), payload...)); err != nil {
		t.Fatalf("command %.1x: write: %v", payload, err)
	}
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatalf("command %.1x: read: %v", payload, err)
	}
	if len(p) == 0 {
		t.Fatalf("command %.1x: empty answer", payload)
	}
	return p
}

// queryString runs q and returns the first column of the first row ("NULL"
// for NULL).
func queryString(t *testing.T, c *client.Conn, q string) string {
	t.Helper()
	r, err := c.Execute(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer r.Close()
	if r.Resultset == nil || r.RowNumber() != 1 {
		t.Fatalf("%s: want one row, got %+v", q, r)
	}
	if null, _ := r.IsNull(0, 0); null {
		return "NULL"
	}
	s, err := r.GetString(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// negotiated reports whether the capability named (as in mysql.CapNames) is
// in effect on c: asked by the client and offered by the server.
func negotiated(c *client.Conn, name string) bool {
	return slices.Contains(strings.Split(c.CapabilityString(), "|"), name)
}

// myErrCode is the MySQL error number of err from either client library
// (0 if err is not a server error).
func myErrCode(err error) uint16 {
	var me *mysql.MyError
	if errors.As(err, &me) {
		return me.Code
	}
	var de *gomysql.MySQLError
	if errors.As(err, &de) {
		return de.Number
	}
	return 0
}

func TestComPingInitDBStatistics(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	c := goMySQL(t, p.Addr)
	if err := c.Ping(); err != nil {
		t.Fatalf("COM_PING: %v", err)
	}
	if err := c.UseDB("mysql"); err != nil {
		t.Fatalf("COM_INIT_DB: %v", err)
	}
	if db := queryString(t, c, "SELECT DATABASE()"); db != "mysql" {
		t.Fatalf("after COM_INIT_DB mysql: DATABASE() = %q", db)
	}
	if err := c.UseDB("nosuchdb"); myErrCode(err) != mysql.ER_BAD_DB_ERROR {
		t.Fatalf("COM_INIT_DB nosuchdb: got %v, want 1049", err)
	}
	if db := queryString(t, c, "SELECT DATABASE()"); db != "mysql" {
		t.Fatalf("after a failed COM_INIT_DB: DATABASE() = %q, want mysql", db)
	}
	// COM_STATISTICS answers with one human-readable string.
	st := command(t, c, mysql.COM_STATISTICS)
	if len(st) == 0 || st[0] == mysql.ERR_HEADER || !strings.Contains(string(st), "Uptime") {
		t.Fatalf("COM_STATISTICS: %q", st)
	}
	if err := c.Ping(); err != nil {
		t.Fatalf("COM_PING after COM_STATISTICS: %v", err)
	}
}

func TestComFieldList(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	for _, eof := range []bool{true, false} {
		t.Run(fmt.Sprintf("deprecate_eof=%v", eof), func(t *testing.T) {
			var c *client.Conn
			if eof {
				c = goMySQL(t, p.Addr)
			} else {
				c = goMySQL(t, p.Addr, withCaps(0, mysql.CLIENT_DEPRECATE_EOF))
			}
			if _, err := c.Execute("CREATE TABLE IF NOT EXISTS fl_t (id INT PRIMARY KEY, name VARCHAR(20) DEFAULT 'x', created DATETIME)"); err != nil {
				t.Fatal(err)
			}
			fields, err := c.FieldList("fl_t", "")
			if err != nil {
				t.Fatalf("COM_FIELD_LIST: %v", err)
			}
			var names []string
			for _, f := range fields {
				names = append(names, string(f.Name))
			}
			if !reflect.DeepEqual(names, []string{"id", "name", "created"}) {
				t.Fatalf("COM_FIELD_LIST fl_t: %v", names)
			}
			if string(fields[0].Table) != "fl_t" || fields[0].Type != mysql.MYSQL_TYPE_LONG || fields[1].Type != mysql.MYSQL_TYPE_VAR_STRING {
				t.Fatalf("field definitions: %+v %+v", fields[0], fields[1])
			}
			fields, err = c.FieldList("fl_t", "na%")
			if err != nil || len(fields) != 1 || string(fields[0].Name) != "name" {
				t.Fatalf("COM_FIELD_LIST fl_t na%%: %v %v", fields, err)
			}
			if _, err := c.FieldList("no_such_t", ""); myErrCode(err) != mysql.ER_NO_SUCH_TABLE {
				t.Fatalf("COM_FIELD_LIST on a missing table: %v, want 1146", err)
			}
			// The connection is still in step.
			if v := queryString(t, c, "SELECT 41+1"); v != "42" {
				t.Fatalf("after COM_FIELD_LIST: %q", v)
			}
		})
	}
}

// multiResults runs q with ExecuteMultiple and returns each result's first
// value, or the error that ended it.
func multiResults(c *client.Conn, q string) ([]string, error) {
	var out []string
	var firstErr error
	_, err := c.ExecuteMultiple(q, func(r *mysql.Result, err error) {
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		if r.Resultset != nil && r.RowNumber() > 0 {
			s, _ := r.GetString(0, 0)
			out = append(out, s)
		}
	})
	if err != nil {
		return out, err
	}
	return out, firstErr
}

func TestComSetOption(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	// Connected with CLIENT_MULTI_STATEMENTS: multi-statements work until
	// COM_SET_OPTION turns them off.
	c := goMySQL(t, p.Addr, withCaps(mysql.CLIENT_MULTI_STATEMENTS|mysql.CLIENT_MULTI_RESULTS, 0))
	got, err := multiResults(c, "SELECT 1; SELECT 2")
	if err != nil || !reflect.DeepEqual(got, []string{"1", "2"}) {
		t.Fatalf("multi-statements with CLIENT_MULTI_STATEMENTS: %v %v", got, err)
	}
	setOption := func(opt uint16) {
		t.Helper()
		ans := command(t, c, mysql.COM_SET_OPTION, byte(opt), byte(opt>>8))
		if ans[0] != mysql.EOF_HEADER || len(ans) >= 9 {
			t.Fatalf("COM_SET_OPTION %d: got %x, want an EOF packet", opt, ans)
		}
		// With CLIENT_DEPRECATE_EOF the server's EOF is an OK packet with
		// the 0xfe header (MariaDB sends fe 00 00 <status> <warnings>).
		if len(ans) < 7 {
			t.Errorf("COM_SET_OPTION %d with CLIENT_DEPRECATE_EOF: got the classic EOF %x, want the 0xfe OK packet "+
				"fe 00 00 <status> <warnings> as MySQL and MariaDB send (proxy/session.go COM_SET_OPTION always uses wire.AppendEOF)", opt, ans)
		}
	}
	setOption(1) // MYSQL_OPTION_MULTI_STATEMENTS_OFF
	if _, err := multiResults(c, "SELECT 1; SELECT 2"); myErrCode(err) != mysql.ER_PARSE_ERROR {
		t.Fatalf("multi-statements after OFF: got %v, want 1064", err)
	}
	if v := queryString(t, c, "SELECT 3"); v != "3" {
		t.Fatalf("single statement after OFF: %q", v)
	}
	setOption(0) // MYSQL_OPTION_MULTI_STATEMENTS_ON
	got, err = multiResults(c, "SELECT 1; SELECT 2")
	if err != nil || !reflect.DeepEqual(got, []string{"1", "2"}) {
		t.Fatalf("multi-statements after ON: %v %v", got, err)
	}
	if ans := command(t, c, mysql.COM_SET_OPTION, 7, 0); errCode(ans) == 0 {
		t.Fatalf("COM_SET_OPTION 7: got %x, want an error", ans)
	}
	if ans := command(t, c, mysql.COM_SET_OPTION); errCode(ans) != mysql.ER_MALFORMED_PACKET {
		t.Fatalf("short COM_SET_OPTION: got %x, want ERR 1835", ans)
	}

	// Connected without CLIENT_MULTI_STATEMENTS: refused, then allowed by ON.
	c2 := goMySQL(t, p.Addr, withCaps(mysql.CLIENT_MULTI_RESULTS, mysql.CLIENT_MULTI_STATEMENTS))
	if _, err := multiResults(c2, "SELECT 1; SELECT 2"); myErrCode(err) != mysql.ER_PARSE_ERROR {
		t.Fatalf("multi-statements without the capability: got %v, want 1064", err)
	}
	if ans := command(t, c2, mysql.COM_SET_OPTION, 0, 0); ans[0] != mysql.EOF_HEADER {
		t.Fatalf("COM_SET_OPTION ON: %x", ans)
	}
	got, err = multiResults(c2, "SELECT 1; SELECT 2")
	if err != nil || !reflect.DeepEqual(got, []string{"1", "2"}) {
		t.Fatalf("multi-statements after ON: %v %v", got, err)
	}
}

func TestMultiStatementsDriver(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	_, err := p.open(t, "ks:ks", "ks_test", "").Exec("SELECT 1; SELECT 2")
	if me := mysqlErr(t, err); me.Number != 1064 {
		t.Fatalf("multi-statements without multiStatements=true: %d %q, want 1064", me.Number, me.Message)
	}
	db := p.open(t, "ks:ks", "ks_test", "multiStatements=true")
	rows, err := db.Query("SELECT 1 AS a, 'x' AS b; SELECT 2 AS c; DO 1; SELECT 3")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sets [][]string
	for {
		var set []string
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]sql.RawBytes, len(cols))
			args := make([]any, len(cols))
			for i := range vals {
				args[i] = &vals[i]
			}
			if err := rows.Scan(args...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				set = append(set, string(v))
			}
		}
		sets = append(sets, set)
		if !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := [][]string{{"1", "x"}, {"2"}, {"3"}}; !reflect.DeepEqual(sets, want) {
		t.Fatalf("result sets %q, want %q", sets, want)
	}
	// An error in the second statement reaches the client; the
	// connection stays usable.
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows2, err := conn.QueryContext(context.Background(), "SELECT 1; SELECT * FROM no_such_table_ms; SELECT 3")
	if err == nil {
		for rows2.Next() {
		}
		if rows2.NextResultSet() {
			for rows2.Next() {
			}
		}
		err = rows2.Err()
		rows2.Close()
	}
	if me := mysqlErr(t, err); me.Number != 1146 {
		t.Fatalf("error in the second statement: %v", me)
	}
	var v int
	if err := conn.QueryRowContext(context.Background(), "SELECT 7").Scan(&v); err != nil || v != 7 {
		t.Fatalf("after a failed multi-statement: %d %v", v, err)
	}
}

func TestComResetConnection(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	c := goMySQL(t, p.Addr)
	if _, err := c.Execute("CREATE TABLE IF NOT EXISTS reset_t (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute("DELETE FROM reset_t"); err != nil {
		t.Fatal(err)
	}
	id := queryString(t, c, "SELECT CONNECTION_ID()")
	for _, q := range []string{
		"SET @a = 1",
		"SET SESSION sql_mode = 'ANSI_QUOTES'",
		"CREATE TEMPORARY TABLE reset_tmp (x INT)",
		"BEGIN",
		"INSERT INTO reset_t VALUES (1)",
	} {
		if _, err := c.Execute(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if v := queryString(t, c, "SELECT @a"); v != "1" {
		t.Fatalf("before reset: @a = %q", v)
	}
	if ans := command(t, c, mysql.COM_RESET_CONNECTION); ans[0] != mysql.OK_HEADER {
		t.Fatalf("COM_RESET_CONNECTION: %x", ans)
	}
	if v := queryString(t, c, "SELECT @a"); v != "NULL" {
		t.Fatalf("after reset: @a = %q, want NULL", v)
	}
	global := queryString(t, c, "SELECT @@GLOBAL.sql_mode")
	if v := queryString(t, c, "SELECT @@SESSION.sql_mode"); v != global {
		t.Fatalf("after reset: sql_mode %q, want the global %q", v, global)
	}
	if _, err := c.Execute("SELECT * FROM reset_tmp"); myErrCode(err) != mysql.ER_NO_SUCH_TABLE {
		t.Fatalf("after reset the temporary table is still there: %v", err)
	}
	if v := queryString(t, c, "SELECT COUNT(*) FROM reset_t"); v != "0" {
		t.Fatalf("after reset the open transaction was not rolled back: %s rows", v)
	}
	if v := queryString(t, c, "SELECT DATABASE()"); v != "ks_test" {
		t.Fatalf("after reset: DATABASE() = %q, want ks_test (kept, as MySQL does)", v)
	}
	if v := queryString(t, c, "SELECT CONNECTION_ID()"); v != id {
		t.Fatalf("after reset: CONNECTION_ID() %s, was %s", v, id)
	}
	if c.IsInTransaction() {
		t.Fatal("status still says in transaction")
	}
}

// changeUser sends COM_CHANGE_USER on c and follows the auth switch the
// proxy answers with. It returns the final packet (OK or ERR).
func changeUser(t *testing.T, c *client.Conn, user, password, db string) []byte {
	t.Helper()
	b := []byte{mysql.COM_CHANGE_USER}
	b = append(b, user...)
	// An empty answer for a plugin keyshard does not take: it asks for
	// mysql_native_password with an auth switch. (TestComChangeUserSameScramble
	// covers the answer over the greeting's scramble, without a switch.)
	b = append(b, 0, 0)
	b = append(b, db...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint16(b, 45)
	b = append(b, "mysql_clear_password"...)
	b = append(b, 0)
	p := command(t, c, b...)
	if p[0] != mysql.EOF_HEADER {
		return p
	}
	name, rest, ok := bytes.Cut(p[1:], []byte{0})
	if !ok || string(name) != mysql.AUTH_NATIVE_PASSWORD || len(rest) < 20 {
		t.Fatalf("COM_CHANGE_USER: auth switch %q", p)
	}
	auth := mysql.CalcNativePassword(rest[:20], []byte(password))
	if err := c.WritePacket(append(make([]byte, 4), auth...)); err != nil {
		t.Fatal(err)
	}
	p, err := c.ReadPacket()
	if err != nil {
		t.Fatalf("COM_CHANGE_USER: reading the verdict: %v", err)
	}
	return p
}

func TestComChangeUser(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	var port string
	if err := direct(t, downPort, "").QueryRow("SELECT @@port").Scan(&port); err != nil {
		t.Fatalf("backend %d (node3, used by user other) is not up: %v", downPort, err)
	}
	c := goMySQL(t, p.Addr)
	if _, err := c.Execute("SET @a = 5"); err != nil {
		t.Fatal(err)
	}
	if v := queryString(t, c, "SELECT @@port"); v != fmt.Sprint(basePort) {
		t.Fatalf("ks is served by port %s, want %d", v, basePort)
	}
	id := queryString(t, c, "SELECT CONNECTION_ID()")
	// Switch to "other", whose schema lives on node3.
	if ans := changeUser(t, c, "other", "other", "mysql"); ans[0] != mysql.OK_HEADER {
		t.Fatalf("COM_CHANGE_USER other: %q", ans)
	}
	if v := queryString(t, c, "SELECT @@port"); v != fmt.Sprint(downPort) {
		t.Fatalf("after COM_CHANGE_USER to other: served by port %s, want %d (node3)", v, downPort)
	}
	if v := queryString(t, c, "SELECT DATABASE()"); v != "mysql" {
		t.Fatalf("after COM_CHANGE_USER: DATABASE() = %q, want mysql", v)
	}
	if v := queryString(t, c, "SELECT @a"); v != "NULL" {
		t.Fatalf("after COM_CHANGE_USER: @a = %q, want NULL", v)
	}
	if v := queryString(t, c, "SELECT CONNECTION_ID()"); v != id {
		t.Fatalf("after COM_CHANGE_USER: CONNECTION_ID() %s, was %s", v, id)
	}
	// Back to ks.
	if ans := changeUser(t, c, "ks", "ks", "ks_test"); ans[0] != mysql.OK_HEADER {
		t.Fatalf("COM_CHANGE_USER ks: %q", ans)
	}
	if v := queryString(t, c, "SELECT @@port"); v != fmt.Sprint(basePort) {
		t.Fatalf("after COM_CHANGE_USER back to ks: port %s", v)
	}
	// A wrong password: ERR 1045, and the session goes on as it was, as
	// MariaDB's does.
	ans := changeUser(t, c, "ks", "wrong", "ks_test")
	if errCode(ans) != mysql.ER_ACCESS_DENIED_ERROR {
		t.Fatalf("COM_CHANGE_USER with a wrong password: %q, want ERR 1045", ans)
	}
	if v := queryString(t, c, "SELECT @@port"); v != fmt.Sprint(basePort) {
		t.Fatalf("after a failed COM_CHANGE_USER: port %s, want the old session's %d", v, basePort)
	}
}

func TestUnknownCommand(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	c := goMySQL(t, p.Addr)
	for _, cmd := range []byte{mysql.COM_SLEEP, mysql.COM_CONNECT, mysql.COM_TIME, mysql.COM_DELAYED_INSERT, mysql.COM_DAEMON, 0x40, 0xfe, 0xff} {
		ans := command(t, c, cmd, 'x')
		if errCode(ans) != mysql.ER_UNKNOWN_COM_ERROR {
			t.Fatalf("command %#x: got %q, want ERR 1047", cmd, ans)
		}
		if string(ans[3:9]) != "#08S01" {
			t.Fatalf("command %#x: SQLSTATE %q, want 08S01", cmd, ans[3:9])
		}
		if v := queryString(t, c, "SELECT 1"); v != "1" {
			t.Fatalf("after command %#x: %q", cmd, v)
		}
	}
	// An empty command packet is refused too and the connection goes on.
	if ans := command(t, c); errCode(ans) == 0 {
		t.Fatalf("empty packet: got %q, want an ERR", ans)
	}
	if v := queryString(t, c, "SELECT 2"); v != "2" {
		t.Fatalf("after an empty packet: %q", v)
	}
}

// resultShape is a result read packet by packet, with the framing that
// differs between CLIENT_DEPRECATE_EOF on and off taken out.
type resultShape struct {
	Columns   []string
	Rows      [][]byte
	ErrCode   uint16
	OKHeader  bool // the answer was a plain OK (no result set)
	Warnings  uint16
	EndStatus uint16
}

// readShape sends q as COM_QUERY and reads the whole answer, checking the
// framing for the connection's CLIENT_DEPRECATE_EOF setting.
func readShape(t *testing.T, c *client.Conn, q string) resultShape {
	t.Helper()
	eof := !negotiated(c, "CLIENT_DEPRECATE_EOF")
	var s resultShape
	first := command(t, c, append([]byte{mysql.COM_QUERY}, q...)...)
	switch first[0] {
	case mysql.OK_HEADER:
		s.OKHeader = true
		return s
	case mysql.ERR_HEADER:
		s.ErrCode = errCode(first)
		return s
	}
	n := int(first[0])
	for range n {
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		f, err := mysql.FieldData(p).Parse()
		if err != nil {
			t.Fatalf("%s: column definition: %v", q, err)
		}
		s.Columns = append(s.Columns, string(f.Name))
	}
	if eof {
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		if p[0] != mysql.EOF_HEADER || len(p) != 5 {
			t.Fatalf("%s: without CLIENT_DEPRECATE_EOF want an EOF after the columns, got %x", q, p)
		}
	}
	for {
		p, err := c.ReadPacket()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case p[0] == mysql.ERR_HEADER:
			s.ErrCode = errCode(p)
			return s
		case p[0] == mysql.EOF_HEADER && len(p) < 0xffffff:
			if eof {
				if len(p) != 5 {
					t.Fatalf("%s: without CLIENT_DEPRECATE_EOF want a 5-byte EOF at the end, got %x", q, p)
				}
				s.Warnings = binary.LittleEndian.Uint16(p[1:])
				s.EndStatus = binary.LittleEndian.Uint16(p[3:])
			} else {
				if len(p) < 7 {
					t.Fatalf("%s: with CLIENT_DEPRECATE_EOF want an OK packet (0xfe) at the end, got %x", q, p)
				}
				// 0xfe, affected rows 0, insert id 0, status, warnings.
				if p[1] != 0 || p[2] != 0 {
					t.Fatalf("%s: end-of-result OK packet %x", q, p)
				}
				s.EndStatus = binary.LittleEndian.Uint16(p[3:])
				s.Warnings = binary.LittleEndian.Uint16(p[5:])
			}
			return s
		}
		s.Rows = append(s.Rows, bytes.Clone(p))
	}
}

// CLIENT_DEPRECATE_EOF on and off give the same results; only the framing
// differs, and each framing is what the client asked for. The backend's
// own answers are the reference.
func TestDeprecateEOF(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	backendAddr := fmt.Sprintf("127.0.0.1:%d", basePort)
	queries := []string{
		"SELECT seq, CONCAT('row', seq) AS name, NULL AS n, seq * 1.5 AS f FROM seq_1_to_5",
		"SELECT 1 AS a FROM DUAL WHERE 1 = 0",
		"SELECT seq, EXP(IF(seq = 3, 1000, 1)) AS e FROM seq_1_to_5", // ERR after two rows
		"SELECT * FROM no_such_table_eof",
		"DO 1",
		"SELECT 1/0 AS w", // a warning in the final packet
	}
	var shapes [2][2][]resultShape // [proxy/backend][eof on/off]
	for i, addr := range []string{p.Addr, backendAddr} {
		for j, off := range []bool{false, true} {
			var opts []client.Option
			if off {
				opts = append(opts, withCaps(0, mysql.CLIENT_DEPRECATE_EOF))
			}
			c := goMySQL(t, addr, opts...)
			if negotiated(c, "CLIENT_DEPRECATE_EOF") == off {
				t.Fatalf("%s: CLIENT_DEPRECATE_EOF negotiated %v, asked %v (%s)", addr, off, !off, c.CapabilityString())
			}
			for _, q := range queries {
				shapes[i][j] = append(shapes[i][j], readShape(t, c, q))
			}
			// The connection is in step after every answer.
			if v := queryString(t, c, "SELECT 'in step'"); v != "in step" {
				t.Fatalf("%s: %q", addr, v)
			}
		}
	}
	for k, q := range queries {
		on, off := shapes[0][0][k], shapes[0][1][k]
		if !reflect.DeepEqual(on, off) {
			t.Errorf("%s:\n deprecate_eof on:  %+v\n deprecate_eof off: %+v", q, on, off)
		}
		if b := shapes[1][0][k]; !reflect.DeepEqual(on, b) {
			t.Errorf("%s:\n proxy:   %+v\n backend: %+v", q, on, b)
		}
		if b := shapes[1][1][k]; !reflect.DeepEqual(off, b) {
			t.Errorf("%s (deprecate_eof off):\n proxy:   %+v\n backend: %+v", q, off, b)
		}
	}
	if s := shapes[0][0][0]; len(s.Rows) != 5 || len(s.Columns) != 4 {
		t.Fatalf("first query: %+v", s)
	}
	if s := shapes[0][0][2]; len(s.Rows) != 2 || s.ErrCode != 1690 {
		t.Fatalf("error mid-result: got %d rows and error %d, want 2 rows then 1690", len(s.Rows), s.ErrCode)
	}
	if s := shapes[0][0][5]; s.Warnings != 1 {
		t.Fatalf("SELECT 1/0: %d warnings, want 1", s.Warnings)
	}

	// go-mysql's own decoding agrees too.
	for _, off := range []bool{false, true} {
		var opts []client.Option
		if off {
			opts = append(opts, withCaps(0, mysql.CLIENT_DEPRECATE_EOF))
		}
		c := goMySQL(t, p.Addr, opts...)
		r, err := c.Execute(queries[0])
		if err != nil {
			t.Fatal(err)
		}
		if r.RowNumber() != 5 || r.ColumnNumber() != 4 {
			t.Fatalf("deprecate_eof off=%v: %d rows %d columns", off, r.RowNumber(), r.ColumnNumber())
		}
		if s, _ := r.GetString(4, 1); s != "row5" {
			t.Fatalf("deprecate_eof off=%v: row 5 name %q", off, s)
		}
		r.Close()
		if _, err := c.Execute(queries[2]); myErrCode(err) != 1690 {
			t.Fatalf("deprecate_eof off=%v: error mid-result: %v", off, err)
		}
	}
}

// connID returns CONNECTION_ID() on conn.
func connID(t *testing.T, conn *sql.Conn) uint32 {
	t.Helper()
	var id uint32
	if err := conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// sleepQuery runs a 20-second SLEEP on conn in the background and waits
// until the backend is running it. The channel gets the query's error.
func sleepQuery(t *testing.T, conn *sql.Conn, marker string) <-chan error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		var v int
		err := conn.QueryRowContext(ctx, "SELECT SLEEP(20) AS "+marker).Scan(&v)
		if ctx.Err() != nil {
			err = fmt.Errorf("still running at the 10s deadline (%v): not interrupted", err)
		} else if err == nil {
			err = fmt.Errorf("SLEEP returned %d without an error", v)
		}
		done <- err
	}()
	running := direct(t, basePort, "")
	deadline := time.Now().Add(5 * time.Second)
	for {
		var n int
		if err := running.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE ?", "SELECT SLEEP(20) AS "+marker+"%").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return done
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed up on the backend", marker)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killUntil sends kill (again) until done reports, so a KILL that lands
// before the statement reaches the backend is retried rather than lost.
func killUntil(t *testing.T, kill func() error, done <-chan error) error {
	t.Helper()
	for {
		if err := kill(); err != nil {
			t.Fatalf("KILL: %v", err)
		}
		select {
		case err := <-done:
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func TestKill(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "ks_test", "")
	ctx := context.Background()
	a, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ida, idb := connID(t, a), connID(t, b)
	if ida == idb || ida == 0 || idb == 0 {
		t.Fatalf("CONNECTION_ID(): a %d, b %d", ida, idb)
	}

	// KILL QUERY: A's statement ends with an error, A's session lives on.
	done := sleepQuery(t, a, "kill_query_a")
	err = killUntil(t, func() error {
		_, err := b.ExecContext(ctx, fmt.Sprintf("KILL QUERY %d", ida))
		return err
	}, done)
	me := mysqlErr(t, err)
	if me.Number != 1317 && me.Number != 1927 {
		t.Fatalf("killed query: got %d %q, want 1317 or 1927", me.Number, me.Message)
	}
	if id := connID(t, a); id != ida {
		t.Fatalf("after KILL QUERY: A's CONNECTION_ID() %d, was %d", id, ida)
	}

	// Unknown thread id.
	_, err = b.ExecContext(ctx, "KILL 4000000000")
	if me := mysqlErr(t, err); me.Number != 1094 {
		t.Fatalf("KILL of an unknown id: %d %q, want 1094", me.Number, me.Message)
	}

	// KILL (connection) of an idle session: its next statement fails.
	if _, err := b.ExecContext(ctx, fmt.Sprintf("KILL %d", ida)); err != nil {
		t.Fatalf("KILL %d: %v", ida, err)
	}
	var one int
	err = a.QueryRowContext(ctx, "SELECT 1").Scan(&one)
	if err == nil {
		t.Fatal("killed connection still answers")
	}
	if !errors.Is(err, driver.ErrBadConn) && !errors.Is(err, gomysql.ErrInvalidConn) {
		t.Logf("killed connection: %v", err)
	}
	// KILL does not take down the killer, and the id is gone.
	if id := connID(t, b); id != idb {
		t.Fatalf("B's id changed: %d", id)
	}
	_, err = b.ExecContext(ctx, fmt.Sprintf("KILL %d", ida))
	if me := mysqlErr(t, err); me.Number != 1094 {
		t.Fatalf("KILL of a killed id: %d %q, want 1094", me.Number, me.Message)
	}

	// COM_PROCESS_KILL of a busy session, from a raw packet.
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	idc := connID(t, c)
	done = sleepQuery(t, c, "kill_conn_c")
	k := goMySQL(t, p.Addr)
	err = killUntil(t, func() error {
		ans := command(t, k, mysql.COM_PROCESS_KILL, byte(idc), byte(idc>>8), byte(idc>>16), byte(idc>>24))
		if ans[0] != mysql.OK_HEADER {
			return fmt.Errorf("COM_PROCESS_KILL %d: %q", idc, ans)
		}
		return nil
	}, done)
	if err == nil {
		t.Fatal("the killed session's statement succeeded")
	}
	if err := c.QueryRowContext(ctx, "SELECT 1").Scan(&one); err == nil {
		t.Fatal("connection killed with COM_PROCESS_KILL still answers")
	}
	ans := command(t, k, mysql.COM_PROCESS_KILL, byte(idc), byte(idc>>8), byte(idc>>16), byte(idc>>24))
	if errCode(ans) != mysql.ER_NO_SUCH_THREAD {
		t.Fatalf("COM_PROCESS_KILL of a killed id: %q, want ERR 1094", ans)
	}
	if ans := command(t, k, mysql.COM_PROCESS_KILL, 1); errCode(ans) != mysql.ER_MALFORMED_PACKET {
		t.Fatalf("short COM_PROCESS_KILL: %q, want ERR 1835", ans)
	}
	// go-mysql's id from the greeting is CONNECTION_ID().
	if v := queryString(t, k, "SELECT CONNECTION_ID()"); v != fmt.Sprint(k.GetConnectionID()) {
		t.Fatalf("CONNECTION_ID() %s, greeting id %d", v, k.GetConnectionID())
	}
	// The killed sessions are gone from the proxy: only b and k are left.
	a.Close()
	c.Close()
	if n := db.Stats().OpenConnections; n != 1 {
		t.Fatalf("database/sql still holds %d connections, want 1 (b)", n)
	}
	waitConns(t, p, 2)
}

func TestMalformedPackets(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	stillServes := func(what string) {
		t.Helper()
		if err := pingAs(t, p, "ks:ks", "ks_test", ""); err != nil {
			t.Fatalf("after %s: %v", what, err)
		}
	}

	// (a) A truncated handshake response.
	r := dialRaw(t, p.Addr)
	r.readGreeting()
	r.writePacket(make([]byte, 10))
	ans := r.mustRead()
	if errCode(ans) != mysql.ER_MALFORMED_PACKET {
		t.Fatalf("truncated handshake response: got %q, want ERR 1835", ans)
	}
	r.wantClosed()
	stillServes("a truncated handshake response")

	// (a') A handshake response cut inside the user name.
	r = dialRaw(t, p.Addr)
	g := r.readGreeting()
	full := handshakeResponse(rawCaps, "ks", mysql.CalcNativePassword(g.scramble, []byte("ks")), "ks_test", mysql.AUTH_NATIVE_PASSWORD)
	r.writePacket(full[:33])
	if ans := r.mustRead(); errCode(ans) != mysql.ER_MALFORMED_PACKET {
		t.Fatalf("handshake response cut in the user name: got %q, want ERR 1835", ans)
	}
	r.wantClosed()

	// (b) A header announcing 16 MiB - 1, then the client goes away:
	// refused before the body is read (1153), then closed.
	r = dialRaw(t, p.Addr)
	r.readGreeting()
	if _, err := r.nc.Write([]byte{0xff, 0xff, 0xff, 1, 'x', 'y', 'z'}); err != nil {
		t.Fatal(err)
	}
	if err := r.nc.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	r.anySeq = true
	if ans := r.mustRead(); errCode(ans) != mysql.ER_NET_PACKET_TOO_LARGE {
		t.Fatalf("a 16 MiB header before login: got %q, want ERR 1153", ans)
	}
	r.wantClosed()
	stillServes("a 16 MiB header and an early close")

	// (c) A handshake response with a wrong sequence id.
	r = dialRaw(t, p.Addr)
	g = r.readGreeting()
	r.writeSeq(5, handshakeResponse(rawCaps, "ks", mysql.CalcNativePassword(g.scramble, []byte("ks")), "ks_test", mysql.AUTH_NATIVE_PASSWORD))
	if pk, err := r.read(); err == nil {
		// An error packet is fine; a login is not.
		if pk[0] != mysql.ERR_HEADER {
			t.Fatalf("handshake response with sequence 5: got %q, want ERR or close", pk)
		}
		r.wantClosed()
	}
	stillServes("a wrong sequence id in the handshake")

	// (d) After login: a command with a wrong sequence id.
	r, _ = rawLogin(t, p.Addr)
	r.seq = 0
	r.writeSeq(3, []byte{mysql.COM_QUERY, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '1'})
	if pk, err := r.read(); err == nil {
		if pk[0] != mysql.ERR_HEADER {
			t.Fatalf("command with sequence 3: got %q, want ERR or close", pk)
		}
		r.wantClosed()
	}
	stillServes("a wrong sequence id after login")

	// (e) After login: the client vanishes mid-packet.
	r, _ = rawLogin(t, p.Addr)
	if _, err := r.nc.Write([]byte{100, 0, 0, 0, mysql.COM_QUERY, 'S', 'E'}); err != nil {
		t.Fatal(err)
	}
	if err := r.nc.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	r.wantClosed()
	stillServes("a command cut short")

	// (f) COM_CHANGE_USER with garbage.
	r, _ = rawLogin(t, p.Addr)
	r.seq = 0
	r.writePacket([]byte{mysql.COM_CHANGE_USER, 'k', 's'})
	if ans := r.mustRead(); errCode(ans) != mysql.ER_MALFORMED_PACKET {
		t.Fatalf("malformed COM_CHANGE_USER: got %q, want ERR 1835", ans)
	}
	stillServes("a malformed COM_CHANGE_USER")
}

func TestPacketTooLarge(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%")+"max_allowed_packet: 1048576\n")
	c := goMySQL(t, p.Addr)
	// Under the limit: fine.
	if v := queryString(t, c, "SELECT LENGTH('"+strings.Repeat("x", 512<<10)+"')"); v != fmt.Sprint(512<<10) {
		t.Fatalf("512 KiB query: %q", v)
	}
	// 2 MiB in one physical packet, over max_allowed_packet. Raw framing:
	// the writer goroutine and the reader share no sequence counter.
	r1, _ := rawLogin(t, p.Addr)
	q := append([]byte{mysql.COM_QUERY}, "SELECT LENGTH('"+strings.Repeat("y", 2<<20)+"')"...)
	werr := make(chan error, 1)
	go func() {
		hdr := []byte{byte(len(q)), byte(len(q) >> 8), byte(len(q) >> 16), 0}
		_, err := r1.nc.Write(append(hdr, q...))
		werr <- err
	}()
	r1.seq = 1 // the answer to a command packet with sequence 0
	ans, err := r1.read()
	<-werr // the proxy may close before reading it all
	switch {
	case err != nil:
		t.Errorf("2 MiB query over max_allowed_packet 1 MiB: no answer: %v", err)
	case errCode(ans) != mysql.ER_NET_PACKET_TOO_LARGE:
		t.Errorf("2 MiB query in one packet over max_allowed_packet 1 MiB: got %.80q, want ERR 1153: "+
			"the proxy accepted and forwarded a packet larger than max_allowed_packet", ans)
	default:
		if _, err := r1.read(); err == nil {
			t.Error("connection still open after ERR 1153")
		}
	}
	// The proxy still serves.
	if v := queryString(t, goMySQL(t, p.Addr), "SELECT 1"); v != "1" {
		t.Fatal(v)
	}
	// And after login over raw framing: a logical packet made of several
	// physical ones, too large in total.
	r, _ := rawLogin(t, p.Addr)
	r.anySeq = true // the ERR follows however many packets were read
	go func() {
		chunk := make([]byte, 1<<24-1)
		chunk[0] = mysql.COM_QUERY
		hdr := []byte{0xff, 0xff, 0xff, 0}
		for i := range 2 {
			hdr[3] = byte(i)
			if _, err := r.nc.Write(append(hdr, chunk...)); err != nil {
				return
			}
		}
	}()
	pk, err := r.read()
	if err != nil {
		t.Fatalf("32 MiB multi-packet command: no answer: %v", err)
	}
	if errCode(pk) != mysql.ER_NET_PACKET_TOO_LARGE {
		t.Fatalf("32 MiB multi-packet command: got %.80q, want ERR 1153", pk)
	}
}
