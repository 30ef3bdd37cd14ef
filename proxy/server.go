package proxy

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/catalog"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/control"
	"github.com/keyshard/keyshard/proxy/deadlock"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/proxy/frontend"
	"github.com/keyshard/keyshard/proxy/users"
	"github.com/keyshard/keyshard/proxy/xa"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
)

// Server is the data plane: its frontend.Listener runs a goroutine per
// client, each with a Session as its handler. Its configuration is an immutable snapshot.
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

	fe        *frontend.Listener // the client side: accept, login, the command loop
	userConns sync.Map           // user -> *atomic.Int64: open sessions (max_connections of user_list)
	webFails  frontend.Lockout   // failed basic-auth logins on the web port

	baseState *backend.State
	states    sync.Map             // collation id -> *backend.State
	stmtRefs  *backend.StmtRefs    // client statements per text, so the backend ones die with them
	xa        *xa.Coordinator      // commits writes over several nodes all or nothing; its Sequences give ids for auto_increment columns of sharded tables
	catalog   *catalog.Catalog     // the tables' columns, for the router
	deadlocks *deadlock.Detector   // finds cycles of lock waits across nodes
	accounts  *users.Accounts      // backend_accounts: the backend's accounts, and the views their sessions run on
	held      atomic.Pointer[held] // tables held for a layout switch, or just switched (held.go); nil: none

	ctx          context.Context
	cancel       context.CancelFunc
	sessions     sync.Map // id -> *Session
	shuttingDown atomic.Bool
	wg           sync.WaitGroup // the drains of replaced nodes
}

// New builds a server from a validated config, with this instance's own
// settings (flags, environment: already applied to cfg, and again over
// each config reloaded). Backend pools start warming in the background; a
// dead backend is not an error here.
func New(cfg *config.Config, log *zap.Logger, local config.Local) (*Server, error) {
	black, err := blacklist.Load(cfg.BlacklistSQLFile)
	if err != nil {
		return nil, fmt.Errorf("blacklist_sql_file: %w", err)
	}
	s, err := newServer(cfg, log, nil, black)
	if err != nil {
		return nil, err
	}
	s.ctl.SetLocal(local)               // before the file watcher and the failover monitor read it
	_ = s.ctl.Start(s.metrics.Registry) // a file: nothing to fail
	return s, nil
}

// newServer is New with the options of a shared config (nil: a file) and
// the SQL blacklist.
func newServer(cfg *config.Config, log *zap.Logger, o *control.ClusterOptions, black *blacklist.List) (*Server, error) {
	s := &Server{log: log}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ctl = control.New(s.ctx, (*dataPlane)(s), cfg, log, o)
	var tlsConf *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("tls_cert/tls_key: %w", err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	var err error
	if s.fe, err = frontend.NewListener(s, log, tlsConf, cfg.RSAKey); err != nil {
		return nil, err
	}
	cs, coll := collationNames(frontend.DefaultCollationID)
	if cfg.ProxyCharset != "" && !strings.EqualFold(cfg.ProxyCharset, cs) {
		cs, coll = strings.ToLower(cfg.ProxyCharset), ""
	}
	s.baseState = backend.NewState(cs, coll)
	s.stmtRefs = backend.NewStmtRefs()
	s.states.Store(uint8(frontend.DefaultCollationID), s.baseState)
	s.stateHook = &backend.StateHook{F: s.logState}
	s.digests = digest.New(cfg.DigestSize)
	s.rcache = newResultCache()
	s.rcache.resize(cfg.ResultCacheMB)
	s.accounts = users.New(s.accountsNode)
	s.accounts.OnError = func(err error) { s.log.Warn("cannot read the backend's accounts", zap.Error(err)) }
	s.metrics = newMetrics(s)
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
	s.xa = xa.New(s.ctx, s, s.log)
	go s.xa.Run()
	s.catalog = catalog.New(s, s.log)
	go s.catalog.Run(s.ctx)
	// With a shared config, the instances see each other's transactions
	// over several nodes through etcd, under their unique names.
	var peers deadlock.Peers
	name := "keyshard"
	if o != nil {
		name, peers = o.Local.Name, o.Store.Waits(o.Local.Name)
	}
	s.deadlocks = deadlock.New(s, s.log, name, peers)
	go s.deadlocks.Run(s.ctx)
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
		CollationID: frontend.DefaultCollationID, Charset: s.baseState.Charset, Collation: s.baseState.Collation,
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

// Serve accepts connections on ln until Shutdown (frontend.Listener).
func (s *Server) Serve(ln net.Listener) error { return s.fe.Serve(ln) }

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = frontend.ErrServerClosed

// WebAllowed reports whether a request from remote (host:port) may use
// web_addr: web_allow_ips, else allow_ips, admits it.
func (s *Server) WebAllowed(remote string) bool {
	a, err := net.ResolveTCPAddr("tcp", remote)
	if err != nil {
		return false
	}
	return s.snap.Load().webAllow.Allowed(a)
}

// Settings are what a new client connection runs with (frontend.Server).
func (s *Server) Settings() frontend.Settings {
	snap := s.snap.Load()
	cfg := snap.cfg
	return frontend.Settings{NoDelay: boolOr(cfg.TCPNoDelay, true), ReadBuffer: cfg.ReadBuffer, WriteBuffer: cfg.ClientWriteBuffer,
		MaxPacket: cfg.MaxAllowedPacket, Allow: snap.allow, MaxConnections: cfg.MaxConnections, MaxUnauthPerHost: cfg.MaxUnauthPerHost,
		LockoutFailures: cfg.LoginLockoutFailures, LockoutTime: cfg.LoginLockoutTime.D()}
}

// Answer is what a client is told of err (frontend.Server): toMySQL's
// mapping, or nil for an error that is not the client's to see.
func (s *Server) Answer(err error) *mysql.MyError {
	var be *backend.Error
	if refusal(err) || errors.As(err, &be) {
		return toMySQL(err)
	}
	return nil
}

// Event counts a connection accepted or refused (frontend.Server).
func (s *Server) Event(what string) {
	if what == "accepted" {
		s.metrics.accepted.Inc()
		return
	}
	s.metrics.rejected(what).Inc()
}

// WebLoginFailed records a failed basic-auth login on the web port from
// remote (host:port) and returns how long the answer must wait: as on the
// SQL port, logged at a bounded rate, slowed from the third failure, and
// locked out with login_lockout_failures.
func (s *Server) WebLoginFailed(remote, user string) time.Duration {
	s.metrics.rejected("web_auth").Inc()
	cfg := s.Config()
	return s.webFails.Failed(s.log, "web", user, frontend.HostOf(remote), "wrong web_user or web_password",
		cfg.LoginLockoutFailures, cfg.LoginLockoutTime.D())
}

// WebLoginOK clears remote's failed web logins.
func (s *Server) WebLoginOK(remote string) { s.webFails.Succeeded(frontend.HostOf(remote)) }

// WebLockedFor returns how long remote is still locked out of the web
// port (0: not).
func (s *Server) WebLockedFor(remote string) time.Duration {
	return s.webFails.LockedFor(frontend.HostOf(remote))
}

// Shutdown stops accepting, lets running statements finish until ctx ends,
// then closes every session (rolling back open transactions) and the pools.
func (s *Server) Shutdown(ctx context.Context) error {
	s.ctl.Exclusive(func() { // no reload starts a drain after this
		s.shuttingDown.Store(true)
		s.fe.Close() // a client accepted from now on is told ER_SERVER_SHUTDOWN
	})
	// Idle sessions (waiting for a command) are closed now: their pinned
	// connections are reset, which rolls back open transactions.
	closeIdle := func() {
		s.sessions.Range(func(_, v any) bool {
			v.(*Session).c.CloseIdle()
			return true
		})
	}
	closeIdle()
	done := make(chan struct{})
	go func() {
		<-s.fe.Done()
		s.wg.Wait()
		close(done)
	}()
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
	<-s.xa.Stopped()
	s.ctl.Leave()
	s.ctl.Exclusive(func() { // no reload swaps in new nodes after this
		s.accounts.Close()
		for _, n := range s.snap.Load().allNodes() {
			n.Close()
		}
	})
	s.sql.close()
	return err
}

func isMyError(err error) bool {
	var me *mysql.MyError
	return errors.As(err, &me)
}

// accountsNode is the node backend_accounts reads (users.Source).
func (s *Server) accountsNode() *backend.Node {
	snap := s.snap.Load()
	if snap == nil {
		return nil
	}
	return snap.nodes[snap.cfg.AccountsNode()]
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
