package proxy

import (
	"crypto/sha256"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/frontend"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
)

// snapshot is one immutable configuration and everything built from it:
// the backend nodes, each user's routing, the allow_ips filter. A reload
// builds a new snapshot and swaps it in with one atomic store; a session
// takes the new one at its next statement outside a transaction, so
// running statements and open transactions finish on the old one.
type snapshot struct {
	cfg   *config.Config
	nodes map[string]*backend.Node
	// asUser are the nodes as each backend_user of user_list reaches them
	// (backend.Node.As views of nodes), by backend user.
	asUser map[string]map[string]*backend.Node
	routes map[string]*router.Schema // by user
	// routeCfgs are what routes were built from: a reload keeps a user's
	// router (and its plan cache) when its rules are unchanged.
	routeCfgs map[string]router.SchemaConfig
	allow     *frontend.IPFilter
	webAllow  *frontend.IPFilter // web_allow_ips, else allow
	// rywWindow: after a write, a session's reads stay on the master this
	// long (read_your_writes: master); 0 with read_your_writes off.
	rywWindow  time.Duration
	cacheRules *cacheRules // the result cache's rules (nil: off)
	// rev counts the configs applied since start (1: the first); applied
	// is when this one was.
	rev     int64
	applied time.Time
}

// buildSnapshot compiles cfg. Nodes whose pool settings are unchanged from
// old are kept (with their connections, health state and admin up/down),
// their replica lists brought up to date; the others are created. It
// returns the nodes of old that the new snapshot no longer uses.
func (s *Server) buildSnapshot(cfg *config.Config, old *snapshot) (*snapshot, []*backend.Node, error) {
	allow, err := frontend.ParseAllowIPs(cfg.AllowIPs)
	if err != nil {
		return nil, nil, err
	}
	webAllow := allow
	if cfg.WebAllowIPs != "" {
		if webAllow, err = frontend.ParseAllowIPs(cfg.WebAllowIPs); err != nil {
			return nil, nil, err
		}
	}

	routes, routeCfgs, err := buildRoutes(cfg, old)
	if err != nil {
		return nil, nil, err
	}
	snap := &snapshot{cfg: cfg, routes: routes, routeCfgs: routeCfgs, allow: allow, webAllow: webAllow, nodes: map[string]*backend.Node{},
		cacheRules: newCacheRules(cfg)}
	if cfg.ReadYourWrites == "master" {
		snap.rywWindow = cfg.ReadYourWritesWindow.D()
	}
	kept := map[*backend.Node]bool{}
	for i := range cfg.Nodes {
		nc := &cfg.Nodes[i]
		opts := s.nodeOptions(cfg, nc)
		var prev *backend.Node
		if old != nil {
			prev = old.nodes[nc.Name]
		}
		if prev != nil && prev.Master.Addr() == nc.Master && sameNode(prev.Options(), opts) {
			prev.SetReplicas(opts.Replicas)
			snap.nodes[nc.Name] = prev
			kept[prev] = true
			continue
		}
		n := backend.NewNode(nc.Name, nc.Master, opts)
		if prev != nil {
			n.KeepAdminDown(prev)
		}
		snap.nodes[nc.Name] = n
	}
	for _, u := range cfg.UserList {
		if u.BackendUser == "" || snap.asUser[u.BackendUser] != nil {
			continue
		}
		if snap.asUser == nil {
			snap.asUser = map[string]map[string]*backend.Node{}
		}
		views := map[string]*backend.Node{}
		for name, n := range snap.nodes {
			var prev *backend.Node
			if old != nil {
				prev = old.asUser[u.BackendUser][name]
			}
			if prev != nil && prev.Base() == n && prev.Options().Pool.Password == u.BackendPassword {
				kept[prev] = true
				views[name] = prev
				continue
			}
			views[name] = n.As(u.BackendUser, u.BackendPassword)
		}
		snap.asUser[u.BackendUser] = views
	}
	var gone []*backend.Node
	if old != nil {
		for _, n := range old.allNodes() {
			if !kept[n] {
				gone = append(gone, n)
			}
		}
	}
	return snap, gone, nil
}

// nodesFor returns the nodes as user reaches them: through its
// backend_user's views, else as configured.
func (snap *snapshot) nodesFor(user string) map[string]*backend.Node {
	if snap.asUser != nil {
		if uc, ok := snap.cfg.UserPassword(user); ok && uc.BackendUser != "" {
			return snap.asUser[uc.BackendUser]
		}
	}
	return snap.nodes
}

// viewsOf returns the backend users' views of node name, by user.
func (snap *snapshot) viewsOf(name string) []*backend.Node {
	var out []*backend.Node
	for _, views := range snap.asUser {
		if v := views[name]; v != nil {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b *backend.Node) int { return strings.Compare(a.User(), b.User()) })
	return out
}

// allNodes returns the nodes and every backend user's views of them,
// views first (they close before what they view).
func (snap *snapshot) allNodes() []*backend.Node {
	var out []*backend.Node
	for _, views := range snap.asUser {
		for _, v := range views {
			out = append(out, v)
		}
	}
	for _, n := range snap.nodes {
		out = append(out, n)
	}
	return out
}

// sameNode reports whether a node built with a can serve as one built
// with b: everything but the replica list (which a node updates in place)
// is equal.
func sameNode(a, b backend.NodeOptions) bool {
	a.Replicas, b.Replicas = nil, nil
	return reflect.DeepEqual(a, b)
}

// restartKeys are the settings a reload cannot change in a running
// process: listeners, TLS and RSA keys, the log files, the proxy charset.
var restartKeys = []struct {
	key string
	get func(*config.Config) any
}{
	{"addr", func(c *config.Config) any { return c.Addr }},
	{"web_addr", func(c *config.Config) any { return c.WebAddr }},
	{"prometheus_addr", func(c *config.Config) any { return c.PrometheusAddr }},
	{"tls_cert", func(c *config.Config) any { return c.TLSCert }},
	{"tls_key", func(c *config.Config) any { return c.TLSKey }},
	{"rsa_key", func(c *config.Config) any { return c.RSAKey }},
	{"proxy_charset", func(c *config.Config) any { return c.ProxyCharset }},
	{"log_path", func(c *config.Config) any { return c.LogPath }},
	{"log_level", func(c *config.Config) any { return c.LogLevel }},
	{"max_procs", func(c *config.Config) any { return c.MaxProcs }},
	{"xa_log_db", func(c *config.Config) any { return c.XALogDB }},
}

// Pending is a setting whose running value is not the config's: it takes
// effect after a restart.
type Pending struct {
	Key        string `json:"key"`
	Running    string `json:"running"`
	Configured string `json:"configured"`
}

// PendingRestart lists the settings whose value in the running config is
// not the one running: they need a restart (restartKeys). Each reload
// warns of them.
func (s *Server) PendingRestart() []Pending {
	return s.pendingIn(s.Config())
}

// pendingIn lists the settings of cfg that differ from those running and
// need a restart.
func (s *Server) pendingIn(cfg *config.Config) []Pending {
	var out []Pending
	for _, k := range restartKeys {
		if a, b := k.get(s.startCfg), k.get(cfg); a != b {
			out = append(out, Pending{Key: k.key, Running: fmt.Sprint(a), Configured: fmt.Sprint(b)})
		}
	}
	return out
}

// Reload swaps in cfg (from config.Parse, which validated it): new
// sessions and the next statement of every session outside a transaction
// use it. Nodes that changed or were removed are drained: their
// statements in flight finish, then their pools close. The SQL blacklist
// is read again from blacklist_sql_file. It returns warnings for settings
// that need a restart.
//
// A config that changes where the rows of an existing sharded table are
// looked for (its key, type, nodes, sub-tables, limits) is refused with a
// *PlacementError unless force is set: rows already written would look
// lost.
func (s *Server) Reload(cfg *config.Config, force bool) ([]string, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	return s.reloadLocked(cfg, nil, force)
}

// PlacementError refuses a config that would move existing rows out of
// reach (see Reload).
type PlacementError struct{ Changes []string }

func (e *PlacementError) Error() string {
	return "keyshard: the new config changes where the rows of existing sharded tables are looked for, and was not applied: " +
		strings.Join(e.Changes, "; ") + ". Rows already written would be looked for in other sub-tables and seem lost. " +
		"Move them first, then apply the config deliberately: ADMIN RELOAD FORCE, or PUT /api/v1/proxy/config/reload?force=1 " +
		"(a SIGHUP or the file watcher never forces)"
}

// placementChanges describes how cfg would move the rows of the sharded
// tables of old (router.PlacementChanges), user by user.
func placementChanges(old *snapshot, cfg *config.Config) []string {
	return placementFrom(func(user string) (router.SchemaConfig, bool) {
		rc, ok := old.routeCfgs[user]
		return rc, ok
	}, cfg)
}

// PlacementChanges describes how next would move the rows of the sharded
// tables of old: a config Reload refuses unless forced (for keyshard
// config push).
func PlacementChanges(old, next *config.Config) []string {
	return placementFrom(func(user string) (router.SchemaConfig, bool) {
		sc, ok := old.SchemaFor(user)
		if !ok {
			return router.SchemaConfig{}, false
		}
		return routeConfig(sc), true
	}, next)
}

// placementFrom describes how cfg would move the rows of the sharded
// tables whose rules prev returns, user by user.
func placementFrom(prev func(user string) (router.SchemaConfig, bool), cfg *config.Config) []string {
	var out []string
	for i := range cfg.SchemaList {
		sc := &cfg.SchemaList[i]
		prev, ok := prev(sc.User)
		if !ok {
			continue
		}
		for _, c := range router.PlacementChanges(prev, routeConfig(sc)) {
			out = append(out, "user "+sc.User+", "+c)
		}
	}
	return out
}

// change applies edit to a copy of the running config, validates the
// result and swaps it in (keeping the SQL blacklist as it is in memory).
// If edit or validation fails, nothing changes. It is not a reload: the
// caller (Controls) logs and counts it.
func (s *Server) change(edit func(*config.Config) error) error {
	if s.link != nil {
		return s.changeShared(edit)
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	old := s.snap.Load()
	cfg := old.cfg.Clone()
	if err := edit(cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return adminArg("keyshard: the change would make the config invalid, nothing changed: %v", err)
	}
	_, err := s.reloadLocked(cfg, s.black.Load(), false)
	return err
}

// reloadLocked applies cfg with the SQL blacklist black (nil: read from
// blacklist_sql_file: a reload, counted and logged as such; else an admin
// change).
func (s *Server) reloadLocked(cfg *config.Config, black *blacklist, force bool) ([]string, error) {
	reload := black == nil
	if s.shuttingDown.Load() {
		return nil, ErrServerClosed
	}
	old := s.snap.Load()
	if changes := placementChanges(old, cfg); len(changes) > 0 {
		if !force {
			s.failedReload(reload)
			err := &PlacementError{Changes: changes}
			s.log.Warn("config not applied; the running config is unchanged", zap.String("source", cfg.Source()), zap.Error(err))
			return nil, err
		}
		s.log.Warn("config forced: existing rows of sharded tables may now be looked for elsewhere",
			zap.String("source", cfg.Source()), zap.Strings("changes", changes))
	}
	var err error
	if black == nil && s.link != nil {
		black = s.black.Load() // the shared one, applied apart (applyStoreLocked)
	}
	if black == nil {
		if black, err = loadBlacklist(cfg.BlacklistSQLFile); err != nil {
			s.failedReload(reload)
			return nil, fmt.Errorf("blacklist_sql_file: %w", err)
		}
	}
	snap, gone, err := s.buildSnapshot(cfg, old)
	if err != nil {
		s.failedReload(reload)
		s.log.Warn("config not applied; the running config is unchanged", zap.String("source", cfg.Source()), zap.Error(err))
		return nil, err
	}
	var warnings []string
	for _, p := range s.pendingIn(cfg) {
		warnings = append(warnings, fmt.Sprintf("%s changed (%s running, %s in the config): takes effect after a restart", p.Key, p.Running, p.Configured))
	}
	snap.rev, snap.applied = old.rev+1, time.Now()
	s.snap.Store(snap)
	s.black.Store(black)
	s.sql.configure(cfg)
	s.digests.SetSize(cfg.DigestSize)
	s.rcache.resize(cfg.ResultCacheMB)
	for _, n := range gone {
		s.drain(n)
	}
	if reload {
		s.reloads.Add(1)
		s.lastReload.Store(time.Now().UnixNano())
		s.log.Info("config reloaded", zap.String("source", cfg.Source()), zap.Int64("revision", snap.rev), zap.Int("nodes", len(snap.nodes)),
			zap.Int("drained", len(gone)), zap.Strings("warnings", warnings))
	}
	return warnings, nil
}

// failedReload counts a reload refused (not an admin change: its caller
// gets the error).
func (s *Server) failedReload(reload bool) {
	if reload {
		s.reloadErrors.Add(1)
	}
}

// ReloadFile reads, parses and validates the config file the running
// config came from, and reloads it. An invalid file changes nothing.
// force applies a config that moves existing rows (see Reload).
func (s *Server) ReloadFile(force bool) ([]string, error) {
	if s.link != nil {
		return s.reloadShared(force)
	}
	path := s.Config().Source()
	cfg, warnings, err := config.Load(path)
	if err == nil {
		err = s.local.Apply(cfg) // this instance's own addresses stay
	}
	if err != nil {
		s.reloadErrors.Add(1)
		s.log.Warn("config reload failed; the running config is unchanged", zap.String("source", path), zap.Error(err))
		return warnings, err
	}
	more, err := s.Reload(cfg, force)
	return append(warnings, more...), err
}

// drain closes node n once no statement uses its pools any more (or after
// shutdown_timeout): sessions move to the new snapshot at their next
// statement, so only statements in flight and open transactions are left.
func (s *Server) drain(n *backend.Node) {
	limit := s.Config().ShutdownTimeout.D()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		deadline := time.Now().Add(limit)
		for time.Now().Before(deadline) && !s.shuttingDown.Load() {
			if !slices.ContainsFunc(n.Pools(), func(p *backend.Pool) bool { return p.InUse() > 0 }) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		n.Close()
	}()
}

// Config returns the running configuration (do not modify it).
func (s *Server) Config() *config.Config { return s.snap.Load().cfg }

// watchConfig reloads the config file when its content changes, checked
// every config_watch_interval (read from the running config, so a reload
// can turn it on or off). It runs until the server shuts down.
// lastSum is the hash of the file as loaded.
func (s *Server) watchConfig(lastSum string) {
	var lastMod time.Time
	var lastSize int64
	for {
		d := s.Config().ConfigWatchInterval.D()
		on := d > 0
		if !on {
			d = time.Second
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(d):
		}
		path := s.Config().Source()
		fi, err := os.Stat(path)
		if err != nil || !on || fi.ModTime().Equal(lastMod) && fi.Size() == lastSize {
			continue
		}
		lastMod, lastSize = fi.ModTime(), fi.Size()
		sum := fileSum(path)
		if saved := s.savedSum.Load(); sum == lastSum || saved != nil && *saved == sum {
			lastSum = sum // keyshard's own write: what runs
			continue
		}
		lastSum = sum
		s.log.Info("config file changed; reloading", zap.String("source", path))
		_, _ = s.ReloadFile(false)
	}
}

// fileSum is a hash of the file's content ("" if unreadable).
func fileSum(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	h := sha256.Sum256(b)
	return string(h[:])
}

// keeps reports whether a session holding pinned (nil: none) may move to
// snap: its pinned connection (with the session state on it: variables,
// temporary tables, prepared statements) belongs to a node snap kept.
// Otherwise the session stays on its snapshot until it lets go of it.
func (snap *snapshot) keeps(user string, pinned *backend.Conn) bool {
	if pinned == nil {
		return true
	}
	n := snap.nodesFor(user)[pinned.Node()]
	return n != nil && slices.Contains(n.Pools(), pinned.Pool())
}
