package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/proxy/frontend"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"
)

// The operator's controls: what admin SQL and the REST API do. Changes to
// settings kept in ks.yaml go through Change (a validated copy of the
// config swapped in), so 'save' writes what runs; the rest (online, a
// backend taken down) are run-time state only.

// Actor is who asks for an operator change, for the log.
type Actor struct {
	User string // the admin user (admin SQL) or web_user (REST)
	Via  string // the interface: "admin SQL" or "REST"
	From string // the client's address
}

// Controls are the operator's controls as an actor uses them (Server.By):
// each change that is made is logged with what changed, who changed it
// and through which interface, and counted in keyshard_admin_changes_total
// (apart from reloads).
type Controls struct {
	s  *Server
	by Actor
}

// By returns the controls for changes asked for by a.
func (s *Server) By(a Actor) Controls { return Controls{s: s, by: a} }

// done logs and counts the change what once it is made (err nil).
func (c Controls) done(what string, err error) error {
	if err != nil {
		return err
	}
	c.s.adminChanges.Add(1)
	c.s.log.Info("admin change", zap.String("change", what), zap.String("user", c.by.User),
		zap.String("via", c.by.Via), zap.String("from", c.by.From))
	return nil
}

// change makes the config change what with edit (see Server.change).
func (c Controls) change(what string, edit func(*config.Config) error) error {
	return c.done(what, c.s.change(edit))
}

// SetOnline puts the proxy online (true) or offline: offline, new client
// connections are refused with ER_SERVER_OFFLINE_MODE; sessions already
// open go on.
func (c Controls) SetOnline(on bool) error {
	c.s.offline.Store(!on)
	return c.done(map[bool]string{true: "proxy online", false: "proxy offline"}[on], nil)
}

// Online reports whether new connections are accepted.
func (s *Server) Online() bool { return !s.offline.Load() }

// Status is the proxy's state for SHOW PROXY STATUS and the REST API.
type Status struct {
	Name         string    `json:"name"`   // the instance's (-name)
	State        string    `json:"status"` // online | offline (kingshard's answer)
	Online       bool      `json:"online"`
	Started      time.Time `json:"started"`
	Uptime       string    `json:"uptime"`
	Connections  int64     `json:"connections"` // client connections open
	Sessions     int       `json:"sessions"`    // authenticated sessions
	Nodes        int       `json:"nodes"`
	Reloads      int64     `json:"reloads"`       // config reloads applied since start (SIGHUP, admin reload, REST, file change)
	AdminChanges int64     `json:"admin_changes"` // changes made through admin SQL or REST
	ReloadErrors int64     `json:"reload_errors"`
	LastReload   string    `json:"last_reload"` // RFC 3339, "" if none
	ConfigFile   string    `json:"config_file"`
	Goroutines   int       `json:"goroutines"`
}

// Status returns the proxy's state.
func (s *Server) Status() Status {
	st := Status{
		Name: s.Name(), State: "online", Online: s.Online(), Started: s.started, Uptime: uptime(s.started),
		Connections: s.fe.Conns(), Nodes: len(s.Nodes()), Reloads: s.reloads.Load(), AdminChanges: s.adminChanges.Load(),
		ReloadErrors: s.reloadErrors.Load(), ConfigFile: s.Config().Source(), Goroutines: runtime.NumGoroutine(),
	}
	if !st.Online {
		st.State = "offline"
	}
	s.sessions.Range(func(_, _ any) bool { st.Sessions++; return true })
	if t := s.lastReload.Load(); t != 0 {
		st.LastReload = time.Unix(0, t).Format(time.RFC3339)
	}
	return st
}

// Ready reports whether this instance can serve (nil) or why not: it is
// shutting down (draining) or offline, or the master of a schema's
// default node is down. For /readyz: a load balancer sends no new
// clients to an instance that is not ready.
func (s *Server) Ready() error {
	if s.shuttingDown.Load() {
		return errors.New("draining: shutting down")
	}
	if !s.Online() {
		return errors.New("offline (admin 'change proxy offline'): new connections are refused")
	}
	snap := s.snap.Load()
	for _, sc := range snap.cfg.SchemaList {
		n := snap.nodes[sc.Default]
		if n == nil {
			continue
		}
		if m := n.Master; m.Health() == backend.Down {
			why := m.LastCheckError()
			if m.AdminDown() {
				why = "taken down by an operator"
			}
			return fmt.Errorf("user %s: the master %s of default node %s is down: %s", sc.User, m.Addr(), sc.Default, why)
		}
	}
	return nil
}

// Backend is one master or replica for SHOW BACKENDS and the REST API.
type Backend struct {
	Node       string  `json:"node"`
	Addr       string  `json:"address"`
	Role       string  `json:"type"` // master | slave
	State      string  `json:"status"`
	AdminDown  bool    `json:"admin_down"`
	Weight     int     `json:"weight"`
	Lag        int64   `json:"replication_lag"` // seconds; -1 unknown
	MaxConns   int     `json:"max_conn"`
	Open       int64   `json:"open_conn"`
	InUse      int64   `json:"in_use_conn"`
	Idle       int64   `json:"idle_conn"`
	Waits      int64   `json:"pool_waits"`   // gets that waited for a free connection
	WaitMs     float64 `json:"pool_wait_ms"` // time they waited
	Timeouts   int64   `json:"pool_timeouts"`
	Statements int64   `json:"statements"`
	Errors     int64   `json:"errors"`
	LastError  string  `json:"last_check_error"`
	// Pools are the connection pools to this server, one per backend user
	// (the node's, and each user_list backend_user's): the connection
	// counts above are their sums.
	Pools []PoolUse `json:"pools"`
}

// PoolUse is one backend user's pool to a server.
type PoolUse struct {
	User     string  `json:"user"`
	Open     int64   `json:"open_conn"`
	InUse    int64   `json:"in_use_conn"`
	Idle     int64   `json:"idle_conn"`
	Waits    int64   `json:"pool_waits"`
	WaitMs   float64 `json:"pool_wait_ms"`
	Timeouts int64   `json:"pool_timeouts"`
}

// Backends lists every master and replica, by node name.
func (s *Server) Backends() []Backend {
	snap := s.snap.Load()
	names := make([]string, 0, len(snap.nodes))
	for name := range snap.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []Backend
	for _, name := range names {
		n := snap.nodes[name]
		views := snap.viewsOf(name)
		out = append(out, backendOf(name, n, n.Master, 0, views))
		for _, r := range n.Replicas() {
			out = append(out, backendOf(name, n, r.Pool, r.Weight, views))
		}
	}
	return out
}

// backendOf describes pool p of node n; views are n's views (Node.As),
// whose pools to the same server are counted in.
func backendOf(node string, n *backend.Node, p *backend.Pool, weight int, views []*backend.Node) Backend {
	ls := p.Statements().Snapshot() // shared with the views' pools
	b := Backend{Node: node, Addr: p.Addr(), Role: p.Role().String(), State: p.Health().String(), AdminDown: p.AdminDown(),
		Weight: weight, Lag: p.Lag(), MaxConns: p.Options().MaxConns,
		Statements: ls.Count, Errors: ls.Errors, LastError: p.LastCheckError()}
	var sum backend.PoolStats
	add := func(user string, p *backend.Pool) {
		st := p.Stats()
		sum = sum.Add(st)
		b.Pools = append(b.Pools, poolUse(user, st))
	}
	add(n.User(), p)
	for _, v := range views {
		if vp := v.PoolFor(p); vp != nil {
			add(v.User(), vp)
		}
	}
	all := poolUse("", sum)
	b.Open, b.InUse, b.Idle, b.Waits, b.WaitMs, b.Timeouts = all.Open, all.InUse, all.Idle, all.Waits, all.WaitMs, all.Timeouts
	return b
}

// poolUse is a pool's stats st as REST shows them.
func poolUse(user string, st backend.PoolStats) PoolUse {
	return PoolUse{User: user, Open: st.Open, InUse: st.InUse, Idle: st.Idle, Waits: st.Waits,
		WaitMs: float64(st.WaitTime) / float64(time.Millisecond), Timeouts: st.Timeouts}
}

// adminArg is the error for a bad argument to an operator control.
func adminArg(format string, args ...any) error {
	return newErr(errAdminArg, format, args...)
}

// pool finds the backend of node with role (master|slave) at addr.
func (s *Server) pool(node, role, addr string) (*backend.Pool, error) {
	n := s.Nodes()[node]
	if n == nil {
		return nil, adminArg("keyshard: no node %q", node)
	}
	switch strings.ToLower(role) {
	case "master":
		if addr != "" && addr != n.Master.Addr() {
			return nil, adminArg("keyshard: node %s: master is %s, not %s", node, n.Master.Addr(), addr)
		}
		return n.Master, nil
	case "slave", "replica":
		for _, r := range n.Replicas() {
			if r.Pool.Addr() == addr {
				return r.Pool, nil
			}
		}
		return nil, adminArg("keyshard: node %s has no slave %s", node, addr)
	}
	return nil, adminArg("keyshard: role %q: want master or slave", role)
}

// SetBackendDown takes a backend out of service (down) or puts it back.
// Down, a master refuses statements at once and a replica gets no reads;
// it stays so until put up (health checks do not override it). Run-time
// state only: a reload keeps it for a node it keeps.
func (c Controls) SetBackendDown(node, role, addr string, down bool) error {
	s := c.s
	s.reloadMu.Lock() // not onto a node a reload is replacing
	defer s.reloadMu.Unlock()
	p, err := s.pool(node, role, addr)
	if err != nil {
		return err
	}
	if s.link != nil {
		if err := s.setDownShared(node, p.Role().String(), p.Addr(), down, c.by); err != nil {
			return err
		}
	}
	p.SetAdminDown(down)
	return c.done(fmt.Sprintf("node %s: %s %s %s", node, p.Role(), p.Addr(), map[bool]string{true: "down", false: "up"}[down]), nil)
}

// AddSlave adds a replica (host:port[@weight]) to node.
func (c Controls) AddSlave(node, addr string) error {
	return c.change(fmt.Sprintf("node %s: add slave %s", node, addr), func(c *config.Config) error {
		nc, ok := c.Node(node)
		if !ok {
			return adminArg("keyshard: no node %q", node)
		}
		want, err := config.ParseSlaves(addr)
		if err != nil || len(want) != 1 {
			return adminArg("keyshard: slave address %q: want host:port[@weight]", addr)
		}
		have, _ := nc.Slaves()
		if slices.ContainsFunc(have, func(x config.Slave) bool { return x.Addr == want[0].Addr }) {
			return adminArg("keyshard: node %s already has slave %s", node, want[0].Addr)
		}
		nc.Slave = config.FormatSlaves(append(have, want[0]))
		return nil
	})
}

// DelSlave removes the replica at addr from node; its statements in
// flight finish first.
func (c Controls) DelSlave(node, addr string) error {
	return c.change(fmt.Sprintf("node %s: remove slave %s", node, addr), func(c *config.Config) error {
		nc, ok := c.Node(node)
		if !ok {
			return adminArg("keyshard: no node %q", node)
		}
		addr, _, _ = strings.Cut(addr, "@")
		have, _ := nc.Slaves()
		i := slices.IndexFunc(have, func(x config.Slave) bool { return x.Addr == addr })
		if i < 0 {
			return adminArg("keyshard: node %s has no slave %s", node, addr)
		}
		nc.Slave = config.FormatSlaves(slices.Delete(have, i, i+1))
		return nil
	})
}

// AllowIPs returns allow_ips as a list.
func (s *Server) AllowIPs() []string { return splitList(s.Config().AllowIPs) }

func splitList(v string) []string {
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// AddAllowIP adds an address or CIDR network to allow_ips. Note that an
// empty allow_ips allows everyone: the first entry restricts access.
func (c Controls) AddAllowIP(ip string) error {
	ip = strings.TrimSpace(ip)
	return c.change("allow_ips: add "+ip, func(c *config.Config) error {
		list := splitList(c.AllowIPs)
		if slices.Contains(list, ip) {
			return adminArg("keyshard: %s is already in allow_ips", ip)
		}
		if _, err := frontend.ParseAllowIPs(ip); err != nil || ip == "" {
			return adminArg("keyshard: allow_ips: bad address or network %q", ip)
		}
		c.AllowIPs = strings.Join(append(list, ip), ",")
		return nil
	})
}

// DelAllowIP removes an entry of allow_ips.
func (c Controls) DelAllowIP(ip string) error {
	ip = strings.TrimSpace(ip)
	return c.change("allow_ips: remove "+ip, func(c *config.Config) error {
		list := splitList(c.AllowIPs)
		i := slices.Index(list, ip)
		if i < 0 {
			return adminArg("keyshard: %s is not in allow_ips", ip)
		}
		c.AllowIPs = strings.Join(slices.Delete(list, i, i+1), ",")
		return nil
	})
}

// SetLogSQL turns the SQL log on or off.
func (c Controls) SetLogSQL(on bool) error {
	v := map[bool]string{true: "on", false: "off"}[on]
	return c.change("log_sql: "+v, func(cfg *config.Config) error {
		cfg.LogSQL = v
		return nil
	})
}

// SetSlowLogTime sets slow_log_time (milliseconds; 0 turns the slow log off).
func (c Controls) SetSlowLogTime(ms int) error {
	if ms < 0 {
		return adminArg("keyshard: slow_log_time %d: want milliseconds >= 0", ms)
	}
	return c.change(fmt.Sprintf("slow_log_time: %d ms", ms), func(cfg *config.Config) error {
		cfg.SlowLogTime = ms
		return nil
	})
}

// BlackSQLs returns the SQL blacklist, as written.
func (s *Server) BlackSQLs() []string { return slices.Clone(s.black.Load().sqls) }

// AddBlackSQL adds a statement to the SQL blacklist: statements of the
// same canonical form (any literal values, spelling of names...) are
// refused from the next statement on.
func (c Controls) AddBlackSQL(sql string) error {
	if strings.TrimSpace(sql) == "" {
		return adminArg("keyshard: empty blacklist entry")
	}
	if router.Classify(sql).Flags&router.FlagMulti != 0 {
		return adminArg("keyshard: a blacklist entry is one statement; add %q as one entry per statement", sql)
	}
	return c.done("blacklist: add "+strconv.Quote(sql), c.s.setBlack(func(b *blacklist) (*blacklist, error) {
		nb, ok := b.with(sql)
		if !ok {
			return nil, adminArg("keyshard: %q is already in the blacklist", sql)
		}
		return nb, nil
	}))
}

// DelBlackSQL removes the blacklist entry of sql's shape.
func (c Controls) DelBlackSQL(sql string) error {
	return c.done("blacklist: remove "+strconv.Quote(sql), c.s.setBlack(func(b *blacklist) (*blacklist, error) {
		nb, ok := b.without(sql)
		if !ok {
			return nil, newErr(errAdminMissing, "keyshard: %q is not in the blacklist", sql)
		}
		return nb, nil
	}))
}

func (s *Server) setBlack(edit func(*blacklist) (*blacklist, error)) error {
	if s.link != nil {
		return s.setBlackShared(edit)
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	nb, err := edit(s.black.Load())
	if err != nil {
		return err
	}
	s.black.Store(nb)
	return nil
}

// SaveConfig writes the running settings that admin commands change
// (allow_ips, log_sql, slow_log_time, slaves) into the config file,
// keeping its comments, and the blacklist into blacklist_sql_file.
// On a shared config there is nothing to save: every change was
// written to etcd when it was made.
func (c Controls) SaveConfig() error {
	if c.s.link != nil {
		return c.done("config save (nothing to do: changes are written to "+c.s.link.store.Source()+" as they are made)", nil)
	}
	return c.done("config saved to "+c.s.Config().Source(), c.s.saveConfig())
}

func (s *Server) saveConfig() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	cfg, black := s.Config(), s.black.Load()
	if err := cfg.Save(); err != nil {
		return fmt.Errorf("keyshard: save %s: %w", cfg.Source(), err)
	}
	s.wroteConfig(cfg.Source())
	if f := cfg.BlacklistSQLFile; f != "" {
		if err := config.WriteFileAtomic(f, black.file()); err != nil {
			return fmt.Errorf("keyshard: save blacklist_sql_file: %w", err)
		}
	} else if len(black.sqls) > 0 {
		return adminArg("keyshard: %s saved, but the SQL blacklist was not: blacklist_sql_file is not set", cfg.Source())
	}
	return nil
}

// wroteConfig records the config file at path as keyshard wrote it, so
// that the file watcher does not reload it.
func (s *Server) wroteConfig(path string) {
	sum := fileSum(path)
	s.savedSum.Store(&sum)
}

// IsArgError reports whether err is a bad argument to an operator control
// (an unknown node, a malformed address, a change that fails validation).
func IsArgError(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && (pe.kind == errAdminArg || pe.kind == errAdminMissing)
}

// IsMissing reports whether err is a bad argument naming something to
// remove that is not there (a blacklist entry).
func IsMissing(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.kind == errAdminMissing
}

// Digests returns the top n statement digests (all when n <= 0) in the
// given order (digest.Orders; "" = total time).
func (s *Server) Digests(n int, order string) ([]digest.Stats, error) {
	top, ok := s.digests.Top(n, order)
	if !ok {
		return nil, adminArg("unknown digest order %q: want one of %s", order, strings.Join(digest.Orders, ", "))
	}
	return top, nil
}

// ResetDigests drops every digest.
func (c Controls) ResetDigests() error {
	c.s.digests.Reset()
	return c.done("digests reset", nil)
}

// Reload reloads the config file (Server.ReloadFile), logging who asked.
func (c Controls) Reload(force bool) ([]string, error) {
	c.s.log.Info("config reload asked for", zap.Bool("force", force), zap.String("user", c.by.User),
		zap.String("via", c.by.Via), zap.String("from", c.by.From))
	return c.s.ReloadFile(force)
}

// DigestsSince is when the digests were last reset (or the proxy started).
func (s *Server) DigestsSince() time.Time { return s.digests.Since() }

// ConfigRevision identifies the running config for the status page.
type ConfigRevision struct {
	Revision int64     `json:"revision"` // configs applied since start; 1 is the first
	Digest   string    `json:"digest"`   // of the running settings (not the file's bytes)
	Applied  time.Time `json:"applied"`
	Source   string    `json:"source"`
}

// ConfigRevision returns the running config's revision.
func (s *Server) ConfigRevision() ConfigRevision {
	snap := s.snap.Load()
	b, err := yaml.Marshal(snap.cfg)
	if err != nil {
		b = []byte(err.Error())
	}
	sum := sha256.Sum256(b)
	return ConfigRevision{Revision: snap.rev, Digest: hex.EncodeToString(sum[:6]), Applied: snap.applied, Source: snap.cfg.Source()}
}
