package proxy

import (
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/frontend"
	"github.com/keyshard/keyshard/router"
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
