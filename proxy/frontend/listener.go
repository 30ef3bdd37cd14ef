package frontend

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/sock"
	"github.com/keyshard/keyshard/backend/wire"
	"go.uber.org/zap"
)

// Server is what the listener asks of keyshard (proxy.Server implements
// it). Its methods are called from many connections' goroutines at once.
type Server interface {
	// Settings are what a new connection runs with, read once when it is
	// accepted.
	Settings() Settings
	// NewHandler makes the handler of a new connection, before its
	// handshake.
	NewHandler(c *Conn) Handler
	// Answer maps err to the MySQL error its client is told: the one
	// mapping of errors to errno and SQLSTATE, which covers every Kind.
	// nil: err is not the client's to see (a broken socket), nothing is
	// written.
	Answer(err error) *mysql.MyError
	// Event counts what happens to connections, for metrics: "accepted",
	// or why one was refused ("host", "max_connections", "locked_out",
	// "unauthenticated_per_host", "auth").
	Event(what string)
}

// Settings are the settings of one connection (from the configuration
// running when it was accepted).
type Settings struct {
	NoDelay          bool
	ReadBuffer       int
	WriteBuffer      int
	MaxPacket        int       // max_allowed_packet, after login
	Allow            *IPFilter // allow_ips
	MaxConnections   int       // 0: no cap
	MaxUnauthPerHost int       // clients of one address not logged in yet; 0: no cap
	LockoutFailures  int       // failed logins that lock an address out (0: never)
	LockoutTime      time.Duration
}

// Listener accepts clients and runs each connection on a goroutine of its
// own: the checks before login, the handshake and authentication, then the
// command loop, each command handed to the connection's Handler.
type Listener struct {
	srv Server
	log *zap.Logger
	tls *tls.Config // nil: no TLS offered
	rsa rsaKey      // caching_sha2_password's key exchange

	sha2   sync.Map  // user+"\x00"+password -> struct{}: users who passed full authentication
	unauth hostCount // connections not logged in yet, by client address
	logins Lockout   // failed logins, by client address

	nextID atomic.Uint32
	conns  atomic.Int64
	closed atomic.Bool
	wg     sync.WaitGroup

	mu        sync.Mutex
	listeners []net.Listener
}

// NewListener makes the listener of srv. tlsConf nil offers no TLS; rsaKey
// is the PEM file of caching_sha2_password's RSA key ("": a new key).
func NewListener(srv Server, log *zap.Logger, tlsConf *tls.Config, rsaKeyFile string) (*Listener, error) {
	l := &Listener{srv: srv, log: log, tls: tlsConf}
	if err := l.rsa.load(rsaKeyFile); err != nil {
		return nil, err
	}
	return l, nil
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("keyshard: server closed")

// Serve accepts connections on ln until Close. Temporary accept errors
// (EMFILE and the like) back off instead of spinning.
func (l *Listener) Serve(ln net.Listener) error {
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	l.listeners = append(l.listeners, ln)
	l.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if l.closed.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				if delay == 0 {
					delay = 5 * time.Millisecond
				} else {
					delay = min(2*delay, time.Second)
				}
				l.log.Warn("accept error; retrying", zap.Error(err), zap.Duration("delay", delay))
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		l.wg.Add(1)
		go l.handle(nc)
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// Close stops accepting: the listeners close, and a connection accepted
// from now on is refused with ER_SERVER_SHUTDOWN. Connections already
// logged in go on (the server drains them).
func (l *Listener) Close() {
	l.closed.Store(true)
	l.mu.Lock()
	for _, ln := range l.listeners {
		ln.Close()
	}
	l.mu.Unlock()
}

// Done is closed once every connection has ended.
func (l *Listener) Done() <-chan struct{} {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	return done
}

// Conns is the number of client connections open, logged in or not.
func (l *Listener) Conns() int64 { return l.conns.Load() }

// handle runs one client connection from accept to close.
func (l *Listener) handle(nc net.Conn) {
	defer l.wg.Done()
	l.srv.Event("accepted")
	st := l.srv.Settings()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(st.NoDelay)
	}
	nc = sock.Wrap(nc)
	c := &Conn{l: l, nc: nc, id: l.nextID.Add(1), addr: nc.RemoteAddr().String(), maxPacket: st.MaxPacket}
	c.log = l.log.With(zap.Uint32("conn", c.id))
	c.host, _, _ = net.SplitHostPort(c.addr)
	c.pkt = wire.NewConn(nc, st.ReadBuffer, st.WriteBuffer)
	c.pkt.MaxRead = st.MaxPacket
	h := l.srv.NewHandler(c)
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("session panic", zap.Any("panic", r), zap.Stack("stack"))
		}
		nc.Close()
		if c.nc != nc {
			c.nc.Close()
		}
	}()
	defer h.Closed()

	host := c.host
	if !st.Allow.Allowed(nc.RemoteAddr()) {
		l.srv.Event("host")
		c.refuse(newErr(HostNotAllowed, "Host '%s' is not allowed to connect to this keyshard server", host))
		return
	}
	n := l.conns.Add(1)
	defer l.conns.Add(-1)
	if max := st.MaxConnections; max > 0 && n > int64(max) {
		l.srv.Event("max_connections")
		c.refuse(newErr(TooManyConnections, "Too many connections (max_connections %d)", max))
		return
	}
	if l.closed.Load() {
		c.refuse(newErr(Shutdown, "Server shutdown in progress"))
		return
	}
	if d := l.logins.LockedFor(host); d > 0 {
		l.srv.Event("locked_out")
		c.refuse(newErr(HostBlocked, "Host '%s' is blocked after %d failed logins (login_lockout_failures); retry in %s",
			host, st.LockoutFailures, d.Round(time.Second)))
		return
	}
	if !l.unauth.enter(host, st.MaxUnauthPerHost) {
		l.srv.Event("unauthenticated_per_host")
		c.refuse(newErr(TooManyConnections, "Too many connections from %s still logging in (max_unauthenticated_per_host %d)",
			host, st.MaxUnauthPerHost))
		return
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	err := func() error {
		// Deferred: the handler's code runs in the handshake, and a
		// panic there must not keep the address counted for ever.
		defer l.unauth.leave(host)
		return c.handshake(h, &st)
	}()
	if errors.Is(err, wire.ErrPacketTooLarge) {
		err = newErr(PacketTooLarge, "Got a packet bigger than %d bytes before login", preAuthMaxPacket)
	}
	if err != nil {
		if me := l.srv.Answer(err); me != nil {
			if isAccessDenied(err) {
				l.srv.Event("auth")
				time.Sleep(l.logins.Failed(l.log, "sql", c.loginUser, host, err.Error(), st.LockoutFailures, st.LockoutTime))
			}
			c.refuse(me)
		}
		c.log.Debug("handshake failed", zap.Error(err))
		return
	}
	_ = c.nc.SetDeadline(time.Time{})
	l.logins.Succeeded(host)
	if c.pkt.Flush() != nil { // the OK Login wrote
		return
	}
	// The compressed protocol starts with the first command.
	c.pkt.Compress(c.Compression(), c.zstdLevel)
	c.serve(h)
}

// hostCount counts connections per client address.
type hostCount struct {
	mu sync.Mutex
	n  map[string]int
}

// enter counts one more connection from host, unless it has max already
// (max 0: no cap).
func (h *hostCount) enter(host string, max int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if max > 0 && h.n[host] >= max {
		return false
	}
	if h.n == nil {
		h.n = map[string]int{}
	}
	h.n[host]++
	return true
}

func (h *hostCount) leave(host string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[host]--; h.n[host] <= 0 {
		delete(h.n, host)
	}
}

// LoggingIn is the number of connections accepted and not logged in yet.
func (l *Listener) LoggingIn() int {
	l.unauth.mu.Lock()
	defer l.unauth.mu.Unlock()
	n := 0
	for _, c := range l.unauth.n {
		n += c
	}
	return n
}

// ForgetFailures forgets every failed login on the SQL port: no address
// is slowed down or locked out any more.
func (l *Listener) ForgetFailures() {
	l.logins.mu.Lock()
	l.logins.byHost = nil
	l.logins.mu.Unlock()
}
