package frontend

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
	"go.uber.org/zap"
)

// Handler runs the session of one connection (proxy.Session implements
// it). The connection's goroutine is the only one that calls it.
type Handler interface {
	Users
	// Greeting is what the greeting tells the client keyshard is.
	Greeting() Greeting
	// Login starts the session of a client that authenticated (and, for
	// a COM_CHANGE_USER, restarts it as the new user) and writes the OK
	// packet that answers the login (buffered). An error refuses it: the
	// client is told (Server.Answer), and a refused login closes the
	// connection.
	Login(l Login) error
	// Command runs one command packet (p[0] is the command; p is valid
	// until the next read) and writes its answer (buffered: the loop
	// flushes it). COM_CHANGE_USER is authenticated with Conn.ChangeUser.
	Command(p []byte) Next
	// Closed ends the session: the connection is closing. Called once,
	// whether the client logged in or not.
	Closed()
}

// Users are the accounts clients log in as.
type Users interface {
	// User returns the account name has from host, the client's address
	// (ok false: no such account). refresh is true when a login has just
	// failed with the answer given without it (no such account, or a
	// password that does not match a Hashed one): accounts read from
	// elsewhere may be read again.
	User(name, host string, refresh bool) (u User, ok bool)
	// DefaultPlugin is the authentication plugin offered first
	// (default_auth_plugin).
	DefaultPlugin() string
}

// User is an account as authentication needs it.
type User struct {
	Password string
	Plugin   string // "": whichever the client uses
	// Hashed: keyshard knows only NativeHash, SHA1(SHA1(password)), the
	// server's mysql_native_password hash (empty: no password), and not
	// Password. The client is asked for mysql_native_password, and from
	// its answer Login gets SHA1(password) (Login.NativeKey).
	Hashed     bool
	NativeHash []byte
	// Refuse, if set, refuses every login as the account, saying why
	// (locked, an authentication plugin keyshard cannot check).
	Refuse string
}

// Greeting is what the initial handshake says of the server.
type Greeting struct {
	Version string
	MariaDB bool   // greet as MariaDB does (no CLIENT_MYSQL bit; its error codes)
	Ext     uint32 // MariaDB extended capabilities offered
	Status  uint16 // the status flags a new session starts with
}

// Login is who logged in, and what the client asked for.
type Login struct {
	User      string
	DB        string
	Collation uint8
	// Hashed: the account was a Hashed one; NativeKey is then
	// SHA1(password) as recovered from the client's answer (empty, not
	// nil, for an account without a password).
	Hashed    bool
	NativeKey []byte
}

// Next is what the command loop does after a command.
type Next uint8

const (
	Continue Next = iota // flush the answer, read the next command
	Close                // flush the answer, then close the connection
	Quit                 // close the connection (COM_QUIT)
)

// Conn is one client connection: its socket and packets, what the client
// negotiated at login, and its state as KILL and shutdown see it. Its
// fields belong to its goroutine but for the atomics.
type Conn struct {
	l         *Listener
	nc        net.Conn // the socket, or the TLS connection over it
	pkt       *wire.Conn
	log       *zap.Logger
	id        uint32
	host      string // the client's address
	addr      string // host:port
	tls       bool
	caps      uint32 // the capabilities both sides have
	ext       uint32 // MariaDB extended capabilities both sides have
	greetExt  uint32 // those the greeting offered
	mariaDB   bool   // the greeting said MariaDB
	collation uint8
	zstdLevel int    // the client's zstd_compression_level
	scramble  []byte // the greeting's (or last auth switch's): COM_CHANGE_USER answers it
	loginUser string // the user name the client sent at login (logged when it fails)
	badChange int    // refused COM_CHANGE_USERs (the third ends the connection, as MariaDB)
	idle      time.Duration
	maxPacket int

	killed atomic.Bool
	busy   atomic.Bool // a command runs
}

// ID is the connection id clients see (CONNECTION_ID(), KILL).
func (c *Conn) ID() uint32 { return c.id }

// Packets is the connection's packet reader and writer.
func (c *Conn) Packets() *wire.Conn { return c.pkt }

// Log is the connection's logger (with its id).
func (c *Conn) Log() *zap.Logger { return c.log }

// Host is the client's address; Addr is host:port.
func (c *Conn) Host() string { return c.host }
func (c *Conn) Addr() string { return c.addr }

// Caps are the capabilities both sides have; Ext the MariaDB extended
// ones; GreetExt the extended ones the greeting offered.
func (c *Conn) Caps() uint32     { return c.caps }
func (c *Conn) Ext() uint32      { return c.ext }
func (c *Conn) GreetExt() uint32 { return c.greetExt }

// MariaDB reports whether the greeting said MariaDB: the client expects
// its errors (e.g. 1969 for a statement past its time limit).
func (c *Conn) MariaDB() bool { return c.mariaDB }

// Collation is the handshake collation (or the last COM_CHANGE_USER's).
func (c *Conn) Collation() uint8 { return c.collation }

// Compression is the algorithm the client negotiated: zlib when it asked
// for CLIENT_COMPRESS (as MySQL, which prefers it when both are set), else
// zstd with CLIENT_ZSTD_COMPRESSION_ALGORITHM.
func (c *Conn) Compression() wire.Compression {
	switch {
	case c.caps&mysql.CLIENT_COMPRESS != 0:
		return wire.CompressZlib
	case c.caps&mysql.CLIENT_ZSTD_COMPRESSION_ALGORITHM != 0:
		return wire.CompressZstd
	}
	return wire.CompressNone
}

// SetIdleTimeout sets the client's wait_timeout (0: none): a client idle
// that long between commands is disconnected, as the server would.
func (c *Conn) SetIdleTimeout(d time.Duration) { c.idle = d }

// Kill marks the connection killed: it ends after the current command's
// answer. Any goroutine may call it.
func (c *Conn) Kill() { c.killed.Store(true) }

// Killed reports whether Kill was called.
func (c *Conn) Killed() bool { return c.killed.Load() }

// Abort ends a killed connection from another goroutine: its socket's
// reads and writes fail from now on (a session blocked writing to a
// client that stopped reading gives up too), and an idle one is closed.
func (c *Conn) Abort() {
	_ = c.nc.SetDeadline(time.Now())
	if !c.busy.Load() {
		_ = c.nc.Close()
	}
}

// CloseIdle ends the connection if it waits for a command (shutdown):
// its read fails, which ends the command loop.
func (c *Conn) CloseIdle() {
	if !c.busy.Load() {
		_ = c.nc.SetReadDeadline(time.Now())
	}
}

// writeError writes err as an ERR packet (buffered), mapped by the
// server; an error that is not the client's is not written.
func (c *Conn) writeError(err error) {
	if me := c.l.srv.Answer(err); me != nil {
		_ = c.pkt.WritePacket(wire.AppendErr(nil, me.Code, me.State, me.Message))
	}
}

// refuse answers err and flushes: the connection ends next.
func (c *Conn) refuse(err error) {
	c.writeError(err)
	_ = c.pkt.Flush()
}

// writeFlush writes one packet and sends it.
func (c *Conn) writeFlush(b []byte) error {
	if err := c.pkt.WritePacket(b); err != nil {
		return err
	}
	return c.pkt.Flush()
}

// serve is the command loop.
func (c *Conn) serve(h Handler) {
	for {
		c.pkt.Seq = 0
		if c.idle > 0 {
			// The client's wait_timeout covers the wait for a command,
			// not the command's bytes.
			_ = c.nc.SetReadDeadline(time.Now().Add(c.idle))
			_, err := c.pkt.PeekLength()
			_ = c.nc.SetReadDeadline(time.Time{})
			if err != nil {
				return
			}
		}
		p, err := c.pkt.ReadPacket()
		if err != nil {
			if errors.Is(err, wire.ErrPacketTooLarge) {
				c.writeError(newErr(PacketTooLarge, "Got a packet bigger than 'max_allowed_packet' bytes"))
				if c.pkt.Flush() == nil {
					c.lingerClose()
				}
			} else if errors.Is(err, wire.ErrSequence) {
				c.writeError(newErr(MalformedPacket, "Got packets out of order"))
				_ = c.pkt.Flush()
			}
			return
		}
		if len(p) == 0 {
			c.writeError(newErr(MalformedPacket, "empty command packet"))
			if c.pkt.Flush() != nil {
				return
			}
			continue
		}
		c.busy.Store(true)
		next := h.Command(p)
		c.busy.Store(false)
		if next == Quit {
			return
		}
		if err := c.pkt.Flush(); err != nil || next == Close || c.killed.Load() {
			return
		}
	}
}

// lingerClose ends a connection whose client may still be sending (a packet
// we refused): closing with unread input makes the kernel send a reset,
// which can destroy the error we just wrote before the client reads it. So
// shut our side, and drain what the client sends for a moment first.
func (c *Conn) lingerClose() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = io.Copy(io.Discard, io.LimitReader(c.nc, int64(c.maxPacket)+1<<24))
}
