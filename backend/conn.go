package backend

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/sock"
	"github.com/keyshard/keyshard/backend/wire"
)

// clientCaps are the capabilities keyshard asks of every backend connection.
// Those in FlavorCaps come from the client each connection serves.
const clientCaps = mysql.CLIENT_LONG_PASSWORD | mysql.CLIENT_LONG_FLAG |
	mysql.CLIENT_CONNECT_WITH_DB | mysql.CLIENT_LOCAL_FILES | mysql.CLIENT_PROTOCOL_41 |
	mysql.CLIENT_TRANSACTIONS | mysql.CLIENT_SECURE_CONNECTION |
	mysql.CLIENT_MULTI_STATEMENTS | mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_PS_MULTI_RESULTS |
	mysql.CLIENT_PLUGIN_AUTH | mysql.CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA |
	mysql.CLIENT_SESSION_TRACK

// Conn is one connection to a backend server. It belongs to one goroutine at
// a time: the pool's, or the session that checked it out.
type Conn struct {
	pkt       *wire.Conn
	pool      *Pool
	threadID  uint32
	caps      uint32 // negotiated with the server
	ext       uint32 // MariaDB extended capabilities negotiated
	flavor    uint32 // the FlavorCaps asked for (see Flavor)
	flavorExt uint32 // the FlavorExt asked for
	version   string

	// Status is the server status of the last OK/EOF seen (see SetStatus).
	Status uint16
	// answered: an OK or EOF reported Status since ClearAnswered; an
	// answer that ended in an error leaves it unset (an ERR carries no
	// status: a statement that failed may have opened a transaction).
	answered bool

	// Session state applied on this connection (see Sync).
	db    string
	multi bool
	state *State

	stmts     stmtCache // statements prepared on this connection
	globals   int64     // the pool's globals generation when the session began (see Pool.GlobalsChanged)
	dropsSeen uint64    // StmtRefs drops when the cache was last checked (see closeUnheld)

	created  time.Time
	lastUsed time.Time
	broken   bool
	// failed: broken by a network failure (see MarkLost), which says
	// something about the server; check: pinged before its next use (its
	// pool saw another connection fail, see Pool.connLost).
	failed, check bool
}

// SetStatus records the server status an OK or EOF packet reported.
func (c *Conn) SetStatus(st uint16) { c.Status, c.answered = st, true }

// Answered reports whether an OK or EOF reported the status since the
// last ClearAnswered.
func (c *Conn) Answered() bool { return c.answered }

// ClearAnswered is called before a client's statement runs on c: until an
// OK or EOF ends it, Status says nothing about what it did.
func (c *Conn) ClearAnswered() { c.answered = false }

// Packets exposes the packet connection so the proxy can relay results raw.
func (c *Conn) Packets() *wire.Conn { return c.pkt }

// ThreadID is the backend's connection id (what KILL QUERY takes there).
func (c *Conn) ThreadID() uint32 { return c.threadID }

// Pool returns the pool the connection belongs to.
func (c *Conn) Pool() *Pool { return c.pool }

// Node returns the name of the node this connection belongs to.
func (c *Conn) Node() string { return c.pool.node }

// Addr returns the backend address.
func (c *Conn) Addr() string { return c.pool.addr }

// DB is the current database on the connection.
func (c *Conn) DB() string { return c.db }

// MarkBroken records that the connection's protocol state is unknown (an
// I/O error, an abandoned result). The pool closes it instead of reusing it.
func (c *Conn) MarkBroken() { c.broken = true }

// MarkLost marks the connection broken by a network failure (a read or
// write that failed, an answer that does not parse): when it is closed,
// its pool learns that its server may be gone (see Pool.connLost).
func (c *Conn) MarkLost() { c.broken, c.failed = true, true }

// Broken reports whether MarkBroken was called.
func (c *Conn) Broken() bool { return c.broken }

func (c *Conn) errorf(kind Kind, err error, format string, args ...any) *Error {
	return &Error{Kind: kind, Node: c.pool.node, Addr: c.pool.addr, Role: c.pool.opts.Role, Msg: fmt.Sprintf(format, args...), Err: err}
}

// dial opens and authenticates a new backend connection.
func dial(ctx context.Context, p *Pool, f Flavor) (*Conn, error) {
	o := &p.opts
	d := net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}
	ctx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, &Error{Kind: KindConnect, Node: p.node, Addr: p.addr, Role: p.opts.Role, Msg: "cannot connect", Err: err}
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(o.NoDelay)
	}
	nc = sock.Wrap(nc)
	if o.Silence > 0 {
		nc = &watchConn{Conn: nc, pool: p}
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	c := &Conn{pkt: wire.NewConn(nc, o.ReadBuffer, o.WriteBuffer), pool: p, created: time.Now(),
		flavor: f.Caps & FlavorCaps, flavorExt: f.Ext & FlavorExt, globals: p.globals.Load()}
	c.pkt.MaxRead = o.MaxPacket
	if err := c.handshake(); err != nil {
		nc.Close()
		var be *Error
		if errors.As(err, &be) {
			return nil, err
		}
		return nil, c.errorf(KindConnect, err, "handshake failed")
	}
	_ = nc.SetDeadline(time.Time{})
	p.reached.Store(true)
	p.noteSessionStatus(c)
	c.lastUsed = time.Now()
	c.state = p.baseState
	c.multi = c.caps&mysql.CLIENT_MULTI_STATEMENTS != 0
	return c, nil
}

func (c *Conn) handshake() error {
	p, err := c.pkt.ReadPacket()
	if err != nil {
		return err
	}
	if len(p) > 0 && p[0] == wire.ErrHeader {
		e := wire.ParseErr(p)
		return c.errorf(KindConnect, e, "server refused connection")
	}
	if len(p) < 1 || p[0] != 10 {
		return c.errorf(KindProtocol, nil, "unsupported handshake protocol")
	}
	ver, pos, err := wire.ReadNulString(p, 1)
	if err != nil {
		return err
	}
	c.version = c.pool.noteVersion(ver)
	if pos+4+8+1+2 > len(p) {
		return wire.ErrMalformed
	}
	c.threadID = binary.LittleEndian.Uint32(p[pos:])
	pos += 4
	scramble := append([]byte(nil), p[pos:pos+8]...)
	pos += 8 + 1
	serverCaps := uint32(binary.LittleEndian.Uint16(p[pos:]))
	pos += 2
	plugin := mysql.AUTH_NATIVE_PASSWORD
	var serverExt uint32
	if pos+16 <= len(p) {
		// charset(1) status(2) caps-high(2) auth-len(1) reserved(10), the
		// last 4 of which are MariaDB's extended capabilities
		serverCaps |= uint32(binary.LittleEndian.Uint16(p[pos+3:])) << 16
		if serverCaps&mysql.CLIENT_LONG_PASSWORD == 0 { // no CLIENT_MYSQL: MariaDB
			serverExt = binary.LittleEndian.Uint32(p[pos+12:])
		}
		authLen := int(p[pos+5])
		pos += 16
		if serverCaps&mysql.CLIENT_SECURE_CONNECTION != 0 {
			n := max(13, authLen-8)
			if pos+n > len(p) {
				return wire.ErrMalformed
			}
			part := p[pos : pos+n]
			if part[len(part)-1] == 0 {
				part = part[:len(part)-1]
			}
			scramble = append(scramble, part...)
			pos += n
		}
		if serverCaps&mysql.CLIENT_PLUGIN_AUTH != 0 && pos < len(p) {
			name, _, err := wire.ReadNulString(p, pos)
			if err != nil {
				name = p[pos:]
			}
			plugin = string(name)
		}
	}
	if serverCaps&mysql.CLIENT_PROTOCOL_41 == 0 {
		return c.errorf(KindProtocol, nil, "server does not speak protocol 4.1")
	}
	base := uint32(clientCaps)
	if c.flavor&mysql.CLIENT_MULTI_RESULTS == 0 {
		base &^= mysql.CLIENT_MULTI_RESULTS | mysql.CLIENT_MULTI_STATEMENTS
	}
	c.caps = (base | c.flavor) & serverCaps
	// Bulk execution only enables a command: every connection may take
	// it, whatever its client.
	c.ext = (c.flavorExt | MariaDBBulkOperations) & serverExt
	c.pool.serverExt.Store(serverExt)
	o := &c.pool.opts
	if plugin != mysql.AUTH_NATIVE_PASSWORD && plugin != mysql.AUTH_CACHING_SHA2_PASSWORD {
		plugin = mysql.AUTH_NATIVE_PASSWORD
	}
	if o.Password == "" && len(o.NativeKey) > 0 {
		plugin = mysql.AUTH_NATIVE_PASSWORD // what a key can answer; a server that wants another switches
	}
	authResp := o.authResponse(plugin, scramble)

	buf := make([]byte, 0, 128)
	buf = binary.LittleEndian.AppendUint32(buf, c.caps)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(o.MaxPacket))
	buf = append(buf, o.CollationID)
	buf = append(buf, make([]byte, 19)...)
	buf = binary.LittleEndian.AppendUint32(buf, c.ext)
	buf = append(buf, o.User...)
	buf = append(buf, 0)
	buf = mysql.AppendLengthEncodedInteger(buf, uint64(len(authResp)))
	buf = append(buf, authResp...)
	if c.caps&mysql.CLIENT_CONNECT_WITH_DB != 0 {
		buf = append(buf, o.DB...)
		buf = append(buf, 0)
		c.db = o.DB
	}
	buf = append(buf, plugin...)
	buf = append(buf, 0)
	if err := c.pkt.WritePacket(buf); err != nil {
		return err
	}
	if err := c.pkt.Flush(); err != nil {
		return err
	}
	return c.authResult(plugin, scramble)
}

// authResponse is the answer to scramble for plugin: from the password,
// or from NativeKey (mysql_native_password only; nil for another plugin,
// which the server then refuses).
func (o *Options) authResponse(plugin string, scramble []byte) []byte {
	password := o.Password
	if password == "" {
		if len(o.NativeKey) > 0 && plugin == mysql.AUTH_NATIVE_PASSWORD {
			return NativeToken(o.NativeKey, scramble)
		}
		return nil
	}
	if plugin == mysql.AUTH_CACHING_SHA2_PASSWORD {
		return mysql.CalcCachingSha2Password(scramble, []byte(password))
	}
	return mysql.CalcNativePassword(scramble, []byte(password))
}

func (c *Conn) authResult(plugin string, scramble []byte) error {
	o := &c.pool.opts
	password := o.Password
	for range 8 {
		p, err := c.pkt.ReadPacket()
		if err != nil {
			return err
		}
		if len(p) == 0 {
			return wire.ErrMalformed
		}
		switch p[0] {
		case wire.OKHeader:
			ok, err := wire.ParseOK(p)
			if err != nil {
				return err
			}
			c.SetStatus(ok.Status)
			return nil
		case wire.ErrHeader:
			e := wire.ParseErr(p)
			kind := KindConnect
			if e.Code == mysql.ER_ACCESS_DENIED_ERROR || e.Code == mysql.ER_DBACCESS_DENIED_ERROR {
				kind = KindAuth
			}
			if kind == KindAuth {
				// keyshard's own account, not the client's: named so.
				return c.errorf(kind, e, "refused keyshard's login as '%s'", c.pool.opts.User)
			}
			return c.errorf(kind, e, "authentication as %q failed", c.pool.opts.User)
		case wire.EOFHeader: // auth switch
			name, pos, err := wire.ReadNulString(p, 1)
			if err != nil {
				return err
			}
			plugin = string(name)
			data := p[pos:]
			if len(data) > 0 && data[len(data)-1] == 0 {
				data = data[:len(data)-1]
			}
			scramble = append([]byte(nil), data...)
			var resp []byte
			switch plugin {
			case mysql.AUTH_NATIVE_PASSWORD, mysql.AUTH_CACHING_SHA2_PASSWORD:
				if password == "" && len(o.NativeKey) > 0 && plugin != mysql.AUTH_NATIVE_PASSWORD {
					return c.errorf(KindAuth, nil, "backend asks %q to log in with %s: keyshard knows only its mysql_native_password hash", o.User, plugin)
				}
				resp = o.authResponse(plugin, scramble)
			case mysql.AUTH_CLEAR_PASSWORD:
				if password == "" && len(o.NativeKey) > 0 {
					return c.errorf(KindAuth, nil, "backend asks %q to log in with %s: keyshard knows only its mysql_native_password hash", o.User, plugin)
				}
				resp = append([]byte(password), 0)
			default:
				return c.errorf(KindAuth, nil, "backend asks for unsupported auth plugin %q", plugin)
			}
			if err := c.writeAuth(resp); err != nil {
				return err
			}
		case 0x01: // more data
			if plugin != mysql.AUTH_CACHING_SHA2_PASSWORD || len(p) < 2 {
				return c.errorf(KindProtocol, nil, "unexpected auth data")
			}
			switch p[1] {
			case 3: // fast auth success: OK follows
			case 4: // full authentication: ask for the public key
				if err := c.writeAuth([]byte{2}); err != nil {
					return err
				}
				kp, err := c.pkt.ReadPacket()
				if err != nil {
					return err
				}
				if len(kp) < 2 || kp[0] != 0x01 {
					return c.errorf(KindProtocol, nil, "bad public key packet")
				}
				block, _ := pem.Decode(kp[1:])
				if block == nil {
					return c.errorf(KindProtocol, nil, "bad public key PEM")
				}
				pub, err := x509.ParsePKIXPublicKey(block.Bytes)
				if err != nil {
					return c.errorf(KindProtocol, err, "bad public key")
				}
				rpub, ok := pub.(*rsa.PublicKey)
				if !ok {
					return c.errorf(KindProtocol, nil, "public key is not RSA")
				}
				enc, err := mysql.EncryptPassword(password, scramble, rpub)
				if err != nil {
					return err
				}
				if err := c.writeAuth(enc); err != nil {
					return err
				}
			default:
				return c.errorf(KindProtocol, nil, "unexpected caching_sha2 state %d", p[1])
			}
		default:
			return c.errorf(KindProtocol, nil, "unexpected auth packet 0x%02x", p[0])
		}
	}
	return c.errorf(KindProtocol, nil, "authentication did not finish")
}

func (c *Conn) writeAuth(b []byte) error {
	if err := c.pkt.WritePacket(b); err != nil {
		return err
	}
	return c.pkt.Flush()
}

// Result is a fully read result of an internal statement (small by design:
// keyshard runs only its own tiny queries through it).
type Result struct {
	OK      wire.OK
	Columns []string
	Types   []byte      // MYSQL_TYPE_* of each column
	Binary  []bool      // column has the binary charset
	Rows    [][]*string // nil pointer is NULL
}

// Exec runs a statement issued by keyshard itself (state sync, FOUND_ROWS,
// health checks) and reads its whole result. A MySQL error from the server
// is returned as *mysql.MyError and leaves the connection usable; any other
// error marks it broken.
func (c *Conn) Exec(query string) (*Result, error) {
	if err := c.pkt.WriteCommandString(mysql.COM_QUERY, query); err != nil {
		return nil, c.lost(err)
	}
	if err := c.pkt.Flush(); err != nil {
		return nil, c.lost(err)
	}
	return c.answer()
}

// Queue writes COM_QUERY query without sending it yet (Flush sends it,
// as does the next command's flush): several statements of keyshard's
// own reach the server in one write and cost one round trip. Each
// queued statement's answer is read with Answer, in order.
func (c *Conn) Queue(query string) error {
	if err := c.pkt.WriteCommandString(mysql.COM_QUERY, query); err != nil {
		return c.lost(err)
	}
	return nil
}

// Flush sends what Queue wrote.
func (c *Conn) Flush() error {
	if err := c.pkt.Flush(); err != nil {
		return c.lost(err)
	}
	return nil
}

// Answer reads the whole answer to the next queued statement (see
// Queue), as Exec does.
func (c *Conn) Answer() (*Result, error) {
	c.pkt.Seq = 1 // each command's answer starts its own sequence
	return c.answer()
}

// Ahead queues query in front of the next command written on the
// connection (whoever writes it): its answer is read, before that
// command's, by the first read of the connection. An error answer fails
// that read (and the connection with it): the command behind it ran all
// the same, so only a statement that cannot fail on a healthy connection
// of keyshard's (XA START on a fresh connection) may go ahead of one
// whose effect depends on it.
func (c *Conn) Ahead(query string) error {
	if err := c.Queue(query); err != nil {
		return err
	}
	c.pkt.SetAhead(func() error {
		_, err := c.answer()
		if err != nil {
			c.MarkLost() // the answer behind it is not read
			return fmt.Errorf("%s: %w", query, err)
		}
		c.pkt.Seq = 1
		return nil
	})
	return nil
}

func (c *Conn) answer() (*Result, error) {
	var res *Result
	for {
		r, err := c.readResult()
		if err != nil {
			return nil, err
		}
		if res == nil {
			res = r
		}
		if r.OK.Status&wire.StatusMoreResultsExists == 0 {
			return res, nil
		}
	}
}

// Command sends a command with no result set (COM_INIT_DB, COM_PING,
// COM_SET_OPTION, COM_RESET_CONNECTION) and reads its OK or ERR.
func (c *Conn) Command(cmd byte, arg []byte) (wire.OK, error) {
	if err := c.pkt.WriteCommand(cmd, arg); err != nil {
		return wire.OK{}, c.lost(err)
	}
	if err := c.pkt.Flush(); err != nil {
		return wire.OK{}, c.lost(err)
	}
	p, err := c.readFirst()
	if err != nil {
		return wire.OK{}, c.lost(err)
	}
	switch {
	case len(p) > 0 && p[0] == wire.ErrHeader:
		return wire.OK{}, wire.ParseErr(p)
	case len(p) > 0 && p[0] == wire.EOFHeader && len(p) < 9:
		// COM_SET_OPTION answers with an EOF (the 0xfe OK under
		// CLIENT_DEPRECATE_EOF).
		ok, err := wire.ParseEnd(p)
		if err != nil {
			return ok, c.lost(err)
		}
		c.SetStatus(ok.Status)
		return ok, nil
	case len(p) > 0 && p[0] == wire.OKHeader:
		ok, err := wire.ParseOK(p)
		if err != nil {
			return ok, c.lost(err)
		}
		c.SetStatus(ok.Status)
		return ok, nil
	}
	return wire.OK{}, c.lost(fmt.Errorf("unexpected reply 0x%x", p[0]))
}

func (c *Conn) lost(err error) error {
	c.MarkLost()
	if be, ok := err.(*Error); ok {
		return be
	}
	// Everything else is the connection's loss, a frozen server's too
	// (whose error wraps the failed dial's).
	return c.errorf(KindLost, err, "connection lost")
}

// readFirst reads the first packet of an answer, skipping MariaDB progress
// reports (keyshard's own statements show none).
func (c *Conn) readFirst() ([]byte, error) {
	p, err := c.pkt.ReadPacket()
	for err == nil && wire.IsProgress(p) {
		p, err = c.pkt.ReadPacket()
	}
	return p, err
}

func (c *Conn) readResult() (*Result, error) {
	p, err := c.readFirst()
	if err != nil {
		return nil, c.lost(err)
	}
	if len(p) == 0 {
		return nil, c.lost(wire.ErrMalformed)
	}
	switch p[0] {
	case wire.OKHeader:
		ok, err := wire.ParseOK(p)
		if err != nil {
			return nil, c.lost(err)
		}
		c.SetStatus(ok.Status)
		return &Result{OK: ok}, nil
	case wire.ErrHeader:
		return nil, wire.ParseErr(p)
	case wire.LocalInfileHdr:
		// keyshard never asks for a file; refuse by sending an empty one.
		_ = c.pkt.WritePacket(nil)
		_ = c.pkt.Flush()
		return c.readResult()
	}
	n, _, err := wire.ReadLenEncInt(p, 0)
	if err != nil {
		return nil, c.lost(err)
	}
	res := &Result{Columns: make([]string, 0, n)}
	for range n {
		cp, err := c.pkt.ReadPacket()
		if err != nil {
			return nil, c.lost(err)
		}
		name, err := wire.ColumnName(cp)
		if err != nil {
			return nil, c.lost(err)
		}
		res.Columns = append(res.Columns, string(name))
		typ, cs, _ := wire.ColumnType(cp, c.ExtTypeInfo())
		res.Types = append(res.Types, typ)
		res.Binary = append(res.Binary, cs == 63)
	}
	if c.caps&mysql.CLIENT_DEPRECATE_EOF == 0 {
		if _, err := c.pkt.ReadPacket(); err != nil {
			return nil, c.lost(err)
		}
	}
	for {
		rp, err := c.pkt.ReadPacket()
		if err != nil {
			return nil, c.lost(err)
		}
		if len(rp) > 0 && rp[0] == wire.ErrHeader {
			return nil, wire.ParseErr(rp)
		}
		if wire.IsEOF(rp) {
			if c.caps&mysql.CLIENT_DEPRECATE_EOF != 0 {
				ok, err := wire.ParseOK(rp)
				if err != nil {
					return nil, c.lost(err)
				}
				res.OK = ok
			} else {
				res.OK.Warnings, res.OK.Status = wire.ParseEOF(rp)
			}
			c.SetStatus(res.OK.Status)
			return res, nil
		}
		row := make([]*string, 0, n)
		pos := 0
		for range n {
			v, null, next, err := wire.ReadLenEncString(rp, pos)
			if err != nil {
				return nil, c.lost(err)
			}
			pos = next
			if null {
				row = append(row, nil)
			} else {
				s := string(v)
				row = append(row, &s)
			}
		}
		res.Rows = append(res.Rows, row)
	}
}

// Ping checks the connection with COM_PING.
func (c *Conn) Ping() error {
	_, err := c.Command(mysql.COM_PING, nil)
	return err
}

// Reset cleans all session state on the server (COM_RESET_CONNECTION):
// transactions, temporary tables, locks, user variables, prepared
// statements. The connection goes back to the pool's base state.
func (c *Conn) Reset() error {
	c.globals = c.pool.globals.Load()
	if _, err := c.Command(mysql.COM_RESET_CONNECTION, nil); err != nil {
		c.broken = true
		return err
	}
	// The multi-statement option and the current database survive a
	// reset (c.multi, c.db stay as they were).
	c.pool.noteSessionStatus(c)
	c.forgetStmts()
	c.state = nil // charset after a reset is the server's idea; Sync re-applies
	return nil
}

// SetDeadline sets the I/O deadline on the underlying socket.
func (c *Conn) SetDeadline(t time.Time) error { return c.pkt.NetConn().SetDeadline(t) }

// Close closes a connection from Pool.Dial (one of the pool's goes back
// with Put or Discard instead).
func (c *Conn) Close() { c.close() }

func (c *Conn) close() {
	c.forgetStmts()
	if c.pkt != nil {
		_ = c.pkt.Close()
	}
}

// Quote returns s as a single-quoted SQL string literal.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case '\'':
			b.WriteString("''")
		case '\\':
			b.WriteString("\\\\")
		case 0:
			b.WriteString("\\0")
		default:
			b.WriteByte(ch)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// QuoteName returns s as a backquoted SQL identifier.
func QuoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
