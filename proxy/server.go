package proxy

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/sock"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/control"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
)

// Server accepts client connections and runs one Session goroutine per
// client. Its configuration is an immutable snapshot.
type Server struct {
	snap  atomic.Pointer[snapshot]       // the running configuration
	black atomic.Pointer[blacklist.List] // the SQL blacklist (edited apart from the config)
	ident atomic.Pointer[identity]       // the greeting last derived from a backend version
	log   *zap.Logger
	sql   *sqlLog

	metrics *Metrics
	history history // per-second samples of the query metrics (status page)
	rcache  *resultCache
	// stateHook logs each backend state change (every pool's OnState).
	stateHook *backend.StateHook
	digests   *digest.Digests
	stageNs   stageTotals // of closed sessions; see stages
	stagesMu  sync.Mutex

	ctl   *control.Plane // reloads, the operator's controls, the etcd link, failovers
	admin atomic.Pointer[AdminFunc]

	tlsConf    *tls.Config
	rsaKey     *rsa.PrivateKey
	rsaPubPEM  []byte
	sha2Cache  sync.Map      // user+"\x00"+password -> struct{}: users who passed full auth
	userConns  sync.Map      // user -> *atomic.Int64: open sessions (max_connections of user_list)
	unauth     hostCount     // connections not logged in yet, by client address
	loginFails loginFailures // failed logins, by client address
	webFails   loginFailures // failed basic-auth logins on the web port

	baseState *backend.State
	states    sync.Map          // collation id -> *backend.State
	stmtRefs  *backend.StmtRefs // client statements per text, so the backend ones die with them
	xa        *xaCoordinator    // commits writes over several nodes all or nothing
	seqs      *sequences        // ids for auto_increment columns of sharded tables

	ctx          context.Context
	cancel       context.CancelFunc
	sessions     sync.Map // id -> *Session
	nextID       atomic.Uint32
	conns        atomic.Int64
	shuttingDown atomic.Bool
	wg           sync.WaitGroup

	mu        sync.Mutex
	listeners []net.Listener
}

// New builds a server from a validated config. Backend pools start warming
// in the background; a dead backend is not an error here.
func New(cfg *config.Config, log *zap.Logger) (*Server, error) {
	black, err := blacklist.Load(cfg.BlacklistSQLFile)
	if err != nil {
		return nil, fmt.Errorf("blacklist_sql_file: %w", err)
	}
	s, err := newServer(cfg, log, nil, black)
	if err != nil {
		return nil, err
	}
	_ = s.ctl.Start(s.metrics.Registry) // a file: nothing to fail
	return s, nil
}

// newServer is New with the options of a shared config (nil: a file) and
// the SQL blacklist.
func newServer(cfg *config.Config, log *zap.Logger, o *control.ClusterOptions, black *blacklist.List) (*Server, error) {
	s := &Server{log: log}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ctl = control.New(s.ctx, (*dataPlane)(s), cfg, log, o)
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("tls_cert/tls_key: %w", err)
		}
		s.tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if err := s.loadRSA(cfg.RSAKey); err != nil {
		return nil, err
	}
	cs, coll := collationNames(defaultCollationID)
	if cfg.ProxyCharset != "" && !strings.EqualFold(cfg.ProxyCharset, cs) {
		cs, coll = strings.ToLower(cfg.ProxyCharset), ""
	}
	s.baseState = backend.NewState(cs, coll)
	s.stmtRefs = backend.NewStmtRefs()
	s.states.Store(uint8(defaultCollationID), s.baseState)
	s.stateHook = &backend.StateHook{F: s.logState}
	s.digests = digest.New(cfg.DigestSize)
	s.rcache = newResultCache()
	s.rcache.resize(cfg.ResultCacheMB)
	s.metrics = newMetrics(s)
	var err error
	if s.sql, err = newSQLLog(cfg); err != nil {
		return nil, err
	}
	snap, _, err := s.buildSnapshot(cfg, nil)
	if err != nil {
		return nil, err
	}
	s.black.Store(black)
	snap.rev, snap.applied = 1, time.Now()
	s.snap.Store(snap)
	s.logNodes(snap)
	s.learnIdentity(snap, time.Duration(cfg.ConnectTimeout))
	s.xa = newXA(s)
	s.seqs = newSequences(s)
	go s.xa.run()
	go s.keepHistory()
	return s, nil
}

// buildRoutes compiles each schema's shard rules for the router. A schema
// whose rules are unchanged from old keeps its router (and plan cache).
func buildRoutes(cfg *config.Config, old *snapshot) (map[string]*router.Schema, map[string]router.SchemaConfig, error) {
	out := map[string]*router.Schema{}
	cfgs := map[string]router.SchemaConfig{}
	for i := range cfg.SchemaList {
		sc := &cfg.SchemaList[i]
		rc := sc.RouteConfig()
		cfgs[sc.User] = rc
		if old != nil {
			if prev, ok := old.routeCfgs[sc.User]; ok && reflect.DeepEqual(prev, rc) {
				out[sc.User] = old.routes[sc.User]
				continue
			}
		}
		rs, err := router.NewSchema(rc, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("schema_list[%d] (user %s): %w", i, sc.User, err)
		}
		out[sc.User] = rs
	}
	return out, cfgs, nil
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

// nodeOptions are node n's pools, replicas and health checks.
func (s *Server) nodeOptions(c *config.Config, n *config.NodeConfig) backend.NodeOptions {
	o := backend.NodeOptions{
		Pool:           s.poolOptions(c, n),
		HealthInterval: c.HealthCheckInterval.D(),
		HealthTimeout:  c.HealthCheckTimeout.D(),
		DownAfter:      time.Duration(n.DownAfterNoAlive) * time.Second,
		MaxLag:         time.Duration(c.MaxReplicationLag) * time.Second,
		MasterReads:    boolOr(c.MasterReads, true),
		NoSplit:        !n.RWSplit(),
	}
	slaves, _ := n.Slaves() // validated by config.Parse
	for _, sl := range slaves {
		o.Replicas = append(o.Replicas, backend.ReplicaAddr{Addr: sl.Addr, Weight: sl.Weight})
	}
	return o
}

func (s *Server) poolOptions(c *config.Config, n *config.NodeConfig) backend.Options {
	return backend.Options{
		User: n.User, Password: n.Password,
		CollationID: defaultCollationID, Charset: s.baseState.Charset, Collation: s.baseState.Collation,
		BaseState:      s.baseState,
		Refs:           s.stmtRefs,
		MaxConns:       n.MaxConnsLimit,
		MinIdle:        c.PoolMinIdle,
		WaitTimeout:    c.PoolWaitTimeout.D(),
		IdleTimeout:    c.PoolIdleTimeout.D(),
		MaxLifetime:    c.PoolMaxLifetime.D(),
		ConnectTimeout: c.ConnectTimeout.D(),
		Silence:        c.BackendSilence.D(),
		NoDelay:        boolOr(c.BackendTCPNoDelay, true),
		ReadBuffer:     c.ReadBuffer,
		WriteBuffer:    c.BackendWriteBuffer,
		MaxPacket:      c.MaxAllowedPacket,
		StmtCache:      c.StmtCacheSize,
		PipelineDepth:  c.BackendPipelineDepth,
		OnState:        s.stateHook,
	}
}

// logState logs a backend's state change at warn level: node, address,
// role, the states, why, and how long it was in the one it left.
func (s *Server) logState(c backend.StateChange) {
	s.log.Warn("backend state changed", zap.String("node", c.Node), zap.String("addr", c.Addr), zap.String("role", c.Role.String()),
		zap.String("from", c.From.String()), zap.String("to", c.To.String()), zap.String("reason", c.Reason),
		zap.Duration("after", c.After.Round(time.Millisecond)))
}

// logNodes logs one line per node of snap: its master and replicas.
func (s *Server) logNodes(snap *snapshot) {
	for name, n := range snap.nodes {
		var replicas []string
		for _, r := range n.Replicas() {
			replicas = append(replicas, r.Pool.Addr()+"@"+strconv.Itoa(r.Weight))
		}
		s.log.Info("node", zap.String("node", name), zap.String("master", n.Master.Addr()), zap.Strings("replicas", replicas),
			zap.Int("max_conns", n.Master.Options().MaxConns), zap.String("user", n.User()))
	}
}

func (s *Server) loadRSA(path string) error {
	var key *rsa.PrivateKey
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("rsa_key: %w", err)
		}
		block, _ := pem.Decode(b)
		if block == nil {
			return fmt.Errorf("rsa_key %s: no PEM block", path)
		}
		k, err := x509.ParsePKCS1PrivateKey(block.Bytes)
		if err != nil {
			pk, err2 := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err2 != nil {
				return fmt.Errorf("rsa_key %s: %w", path, err)
			}
			var ok bool
			if k, ok = pk.(*rsa.PrivateKey); !ok {
				return fmt.Errorf("rsa_key %s: not an RSA key", path)
			}
		}
		key = k
	} else {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return err
		}
		key = k
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	s.rsaKey = key
	s.rsaPubPEM = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	return nil
}

// stateFor returns the shared State for a handshake collation, so sessions
// with the same charset share one State and need no sync on checkout.
func (s *Server) stateFor(id uint8) *backend.State {
	if v, ok := s.states.Load(id); ok {
		return v.(*backend.State)
	}
	cs, coll := collationNames(id)
	v, _ := s.states.LoadOrStore(id, backend.NewState(cs, coll))
	return v.(*backend.State)
}

// Metrics returns the server's metrics (for the admin HTTP server).
func (s *Server) Metrics() *Metrics { return s.metrics }

// Nodes returns the backend nodes by name (do not modify the map).
func (s *Server) Nodes() map[string]*backend.Node { return s.snap.Load().nodes }

// ListenAndServe listens on the configured addr and serves until Shutdown.
func (s *Server) ListenAndServe() error {
	ln, err := net.Listen("tcp", s.Config().Addr)
	if err != nil {
		return err
	}
	return s.Serve(ln)
}

// Serve accepts connections on ln until Shutdown. Temporary accept errors
// (EMFILE and the like) back off instead of spinning.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shuttingDown.Load() {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.listeners = append(s.listeners, ln)
	s.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.shuttingDown.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				if delay == 0 {
					delay = 5 * time.Millisecond
				} else {
					delay = min(2*delay, time.Second)
				}
				s.log.Warn("accept error; retrying", zap.Error(err), zap.Duration("delay", delay))
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.wg.Add(1)
		go s.handle(nc)
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// WebAllowed reports whether a request from remote (host:port) may use
// web_addr: web_allow_ips, else allow_ips, admits it.
func (s *Server) WebAllowed(remote string) bool {
	a, err := net.ResolveTCPAddr("tcp", remote)
	if err != nil {
		return false
	}
	return s.snap.Load().webAllow.allowed(a)
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

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("keyshard: server closed")

// handle runs one client connection from accept to close.
func (s *Server) handle(nc net.Conn) {
	defer s.wg.Done()
	s.metrics.accepted.Inc()
	snap := s.snap.Load()
	cfg := snap.cfg
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(boolOr(cfg.TCPNoDelay, true))
	}
	nc = sock.Wrap(nc)
	id := s.nextID.Add(1)
	sess := newSession(s, snap, id, nc)
	host, _, _ := net.SplitHostPort(nc.RemoteAddr().String())
	sess.remoteHost = host
	defer func() {
		if r := recover(); r != nil {
			sess.log.Error("session panic", zap.Any("panic", r), zap.Stack("stack"))
		}
		nc.Close()
		if sess.nc != nc {
			sess.nc.Close()
		}
		if sess.userConns != nil {
			sess.userConns.Add(-1)
		}
	}()

	if !snap.allow.allowed(nc.RemoteAddr()) {
		s.metrics.rejected("host").Inc()
		sess.writeError(newErr(errHostNotAllowed, "Host '%s' is not allowed to connect to this keyshard server", host))
		_ = sess.pkt.Flush()
		return
	}
	n := s.conns.Add(1)
	defer s.conns.Add(-1)
	if max := cfg.MaxConnections; max > 0 && n > int64(max) {
		s.metrics.rejected("max_connections").Inc()
		sess.writeError(newErr(errTooManyConnections, "Too many connections (max_connections %d)", max))
		_ = sess.pkt.Flush()
		return
	}
	if s.shuttingDown.Load() {
		sess.writeError(newErr(errShutdown, "Server shutdown in progress"))
		_ = sess.pkt.Flush()
		return
	}
	if d := s.loginFails.lockedFor(host); d > 0 {
		s.metrics.rejected("locked_out").Inc()
		sess.writeError(newErr(errHostBlocked, "Host '%s' is blocked after %d failed logins (login_lockout_failures); retry in %s",
			host, cfg.LoginLockoutFailures, d.Round(time.Second)))
		_ = sess.pkt.Flush()
		return
	}
	if !s.unauth.enter(host, cfg.MaxUnauthPerHost) {
		s.metrics.rejected("unauthenticated_per_host").Inc()
		sess.writeError(newErr(errTooManyConnections, "Too many connections from %s still logging in (max_unauthenticated_per_host %d)",
			host, cfg.MaxUnauthPerHost))
		_ = sess.pkt.Flush()
		return
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	err := sess.handshake()
	s.unauth.leave(host)
	if errors.Is(err, wire.ErrPacketTooLarge) {
		err = newErr(errPacketTooLarge, "Got a packet bigger than %d bytes before login", preAuthMaxPacket)
	}
	if err != nil {
		var pe *Error
		var be *backend.Error
		if errors.As(err, &pe) || errors.As(err, &be) || isMyError(err) {
			if pe != nil && pe.kind == errAccessDenied {
				s.metrics.rejected("auth").Inc()
				time.Sleep(s.loginFailed(&s.loginFails, "sql", sess.loginUser, host, pe.Error()))
			}
			sess.writeError(err)
			_ = sess.pkt.Flush()
		}
		sess.log.Debug("handshake failed", zap.Error(err))
		sess.endSession()
		return
	}
	_ = sess.nc.SetDeadline(time.Time{})
	s.loginFails.succeeded(host)
	if err := sess.writeOK(0, 0); err != nil || sess.pkt.Flush() != nil {
		sess.endSession()
		return
	}
	// The compressed protocol starts with the first command.
	sess.pkt.Compress(sess.compression(), sess.zstdLevel)
	s.sessions.Store(id, sess)
	defer s.endStages(sess)
	sess.run()
}

// Shutdown stops accepting, lets running statements finish until ctx ends,
// then closes every session (rolling back open transactions) and the pools.
func (s *Server) Shutdown(ctx context.Context) error {
	s.ctl.Exclusive(func() { s.shuttingDown.Store(true) }) // no reload starts a drain after this
	s.mu.Lock()
	for _, ln := range s.listeners {
		ln.Close()
	}
	s.mu.Unlock()
	// Idle sessions (waiting for a command) are closed now: their pinned
	// connections are reset, which rolls back open transactions.
	closeIdle := func() {
		s.sessions.Range(func(_, v any) bool {
			sess := v.(*Session)
			if !sess.busy.Load() {
				_ = sess.nc.SetReadDeadline(time.Now())
			}
			return true
		})
	}
	closeIdle()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var err error
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick.C:
			closeIdle()
		case <-ctx.Done():
			err = ctx.Err()
			s.sessions.Range(func(_, v any) bool {
				v.(*Session).interrupt(true)
				return true
			})
			s.cancel()
			<-done
			break loop
		}
	}
	s.cancel()
	<-s.xa.stopped
	s.ctl.Leave()
	s.ctl.Exclusive(func() { // no reload swaps in new nodes after this
		for _, n := range s.snap.Load().allNodes() {
			n.Close()
		}
	})
	s.sql.close()
	return err
}

// ipFilter holds allow_ips: single addresses and CIDR networks.
type ipFilter struct {
	nets []*net.IPNet
}

func parseAllowIPs(s string) (*ipFilter, error) {
	f := &ipFilter{}
	for _, part := range splitList(s) {
		if !strings.Contains(part, "/") {
			ip := net.ParseIP(part)
			if ip == nil {
				return nil, fmt.Errorf("allow_ips: bad address %q", part)
			}
			bits := 128
			if ip.To4() != nil {
				ip, bits = ip.To4(), 32
			}
			f.nets = append(f.nets, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(part)
		if err != nil {
			return nil, fmt.Errorf("allow_ips: %w", err)
		}
		f.nets = append(f.nets, n)
	}
	return f, nil
}

func (f *ipFilter) allowed(a net.Addr) bool {
	if len(f.nets) == 0 {
		return true
	}
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip := ta.IP
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	for _, n := range f.nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

func isMyError(err error) bool {
	var me *mysql.MyError
	return errors.As(err, &me)
}

// mayLoginOffline reports whether user may log in while the proxy is
// offline: admin users and server_admin users (as MySQL's offline_mode
// lets SUPER and CONNECTION_ADMIN in), so that they can put it back
// online.
func (s *Server) mayLoginOffline(cfg *config.Config, user string) bool {
	u, _ := cfg.UserPassword(user)
	return u.ServerAdmin || cfg.IsAdmin(user)
}

// Control returns the server's control plane: reloads, the operator's
// controls, the shared config, failovers.
func (s *Server) Control() *control.Plane { return s.ctl }
