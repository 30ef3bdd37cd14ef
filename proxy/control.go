package proxy

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/router"
)

// The operator's controls: what admin SQL and the REST API do. Changes to
// settings kept in ks.yaml go through Change (a validated copy of the
// config swapped in), so 'save' writes what runs; the rest (online, a
// backend taken down) are run-time state only.

// SetOnline puts the proxy online (true) or offline: offline, new client
// connections are refused with ER_SERVER_OFFLINE_MODE; sessions already
// open go on.
func (s *Server) SetOnline(on bool) { s.offline.Store(!on) }

// Online reports whether new connections are accepted.
func (s *Server) Online() bool { return !s.offline.Load() }

// Status is the proxy's state for SHOW PROXY STATUS and the REST API.
type Status struct {
	State        string    `json:"status"` // online | offline (kingshard's answer)
	Online       bool      `json:"online"`
	Started      time.Time `json:"started"`
	Uptime       string    `json:"uptime"`
	Connections  int64     `json:"connections"` // client connections open
	Sessions     int       `json:"sessions"`    // authenticated sessions
	Nodes        int       `json:"nodes"`
	Reloads      int64     `json:"reloads"` // configs applied since start (reloads and admin changes)
	ReloadErrors int64     `json:"reload_errors"`
	LastReload   string    `json:"last_reload"` // RFC 3339, "" if none
	ConfigFile   string    `json:"config_file"`
	Goroutines   int       `json:"goroutines"`
}

// Status returns the proxy's state.
func (s *Server) Status() Status {
	st := Status{
		State: "online", Online: s.Online(), Started: s.started, Uptime: time.Since(s.started).Round(time.Second).String(),
		Connections: s.conns.Load(), Nodes: len(s.Nodes()), Reloads: s.reloads.Load(),
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

// Backend is one master or replica for SHOW BACKENDS and the REST API.
type Backend struct {
	Node       string `json:"node"`
	Addr       string `json:"address"`
	Role       string `json:"type"` // master | slave
	State      string `json:"status"`
	AdminDown  bool   `json:"admin_down"`
	Weight     int    `json:"weight"`
	Lag        int64  `json:"replication_lag"` // seconds; -1 unknown
	MaxConns   int    `json:"max_conn"`
	Open       int64  `json:"open_conn"`
	InUse      int64  `json:"in_use_conn"`
	Idle       int64  `json:"idle_conn"`
	Statements int64  `json:"statements"`
	Errors     int64  `json:"errors"`
	LastError  string `json:"last_check_error"`
}

// Backends lists every master and replica, by node name.
func (s *Server) Backends() []Backend {
	nodes := s.Nodes()
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []Backend
	for _, name := range names {
		n := nodes[name]
		out = append(out, backendOf(name, n.Master, 0))
		for _, r := range n.Replicas() {
			out = append(out, backendOf(name, r.Pool, r.Weight))
		}
	}
	return out
}

func backendOf(node string, p *backend.Pool, weight int) Backend {
	st := p.Stats()
	ls := p.Statements().Snapshot()
	return Backend{Node: node, Addr: p.Addr(), Role: p.Role().String(), State: p.Health().String(), AdminDown: p.AdminDown(),
		Weight: weight, Lag: p.Lag(), MaxConns: p.Options().MaxConns, Open: st.Open, InUse: st.InUse, Idle: st.Idle,
		Statements: ls.Count, Errors: ls.Errors, LastError: p.LastCheckError()}
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
func (s *Server) SetBackendDown(node, role, addr string, down bool) error {
	s.reloadMu.Lock() // not onto a node a reload is replacing
	defer s.reloadMu.Unlock()
	p, err := s.pool(node, role, addr)
	if err != nil {
		return err
	}
	p.SetAdminDown(down)
	return nil
}

// AddSlave adds a replica (host:port[@weight]) to node.
func (s *Server) AddSlave(node, addr string) error {
	return s.Change(func(c *config.Config) error {
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
func (s *Server) DelSlave(node, addr string) error {
	return s.Change(func(c *config.Config) error {
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
func (s *Server) AddAllowIP(ip string) error {
	ip = strings.TrimSpace(ip)
	return s.Change(func(c *config.Config) error {
		list := splitList(c.AllowIPs)
		if slices.Contains(list, ip) {
			return adminArg("keyshard: %s is already in allow_ips", ip)
		}
		if _, err := parseAllowIPs(ip); err != nil || ip == "" {
			return adminArg("keyshard: allow_ips: bad address or network %q", ip)
		}
		c.AllowIPs = strings.Join(append(list, ip), ",")
		return nil
	})
}

// DelAllowIP removes an entry of allow_ips.
func (s *Server) DelAllowIP(ip string) error {
	ip = strings.TrimSpace(ip)
	return s.Change(func(c *config.Config) error {
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
func (s *Server) SetLogSQL(on bool) error {
	return s.Change(func(c *config.Config) error {
		c.LogSQL = map[bool]string{true: "on", false: "off"}[on]
		return nil
	})
}

// SetSlowLogTime sets slow_log_time (milliseconds; 0 turns the slow log off).
func (s *Server) SetSlowLogTime(ms int) error {
	if ms < 0 {
		return adminArg("keyshard: slow_log_time %d: want milliseconds >= 0", ms)
	}
	return s.Change(func(c *config.Config) error {
		c.SlowLogTime = ms
		return nil
	})
}

// BlackSQLs returns the SQL blacklist, as written.
func (s *Server) BlackSQLs() []string { return slices.Clone(s.black.Load().sqls) }

// AddBlackSQL adds a statement to the SQL blacklist: statements of the
// same canonical form (any literal values, spelling of names...) are
// refused from the next statement on.
func (s *Server) AddBlackSQL(sql string) error {
	if strings.TrimSpace(sql) == "" {
		return adminArg("keyshard: empty blacklist entry")
	}
	if router.Classify(sql).Flags&router.FlagMulti != 0 {
		return adminArg("keyshard: a blacklist entry is one statement; add %q as one entry per statement", sql)
	}
	return s.setBlack(func(b *blacklist) (*blacklist, error) {
		nb, ok := b.with(sql)
		if !ok {
			return nil, adminArg("keyshard: %q is already in the blacklist", sql)
		}
		return nb, nil
	})
}

// DelBlackSQL removes the blacklist entry of sql's shape.
func (s *Server) DelBlackSQL(sql string) error {
	return s.setBlack(func(b *blacklist) (*blacklist, error) {
		nb, ok := b.without(sql)
		if !ok {
			return nil, adminArg("keyshard: %q is not in the blacklist", sql)
		}
		return nb, nil
	})
}

func (s *Server) setBlack(edit func(*blacklist) (*blacklist, error)) error {
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
func (s *Server) SaveConfig() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	cfg, black := s.Config(), s.black.Load()
	if err := cfg.Save(); err != nil {
		return fmt.Errorf("keyshard: save %s: %w", cfg.Source(), err)
	}
	if f := cfg.BlacklistSQLFile; f != "" {
		if err := config.WriteFileAtomic(f, black.file()); err != nil {
			return fmt.Errorf("keyshard: save blacklist_sql_file: %w", err)
		}
	} else if len(black.sqls) > 0 {
		return adminArg("keyshard: %s saved, but the SQL blacklist was not: blacklist_sql_file is not set", cfg.Source())
	}
	return nil
}

// IsArgError reports whether err is a bad argument to an operator control
// (an unknown node, a malformed address, a change that fails validation).
func IsArgError(err error) bool {
	var pe *Error
	return errors.As(err, &pe) && pe.kind == errAdminArg
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
func (s *Server) ResetDigests() { s.digests.Reset() }

// DigestsSince is when the digests were last reset (or the proxy started).
func (s *Server) DigestsSince() time.Time { return s.digests.Since() }
