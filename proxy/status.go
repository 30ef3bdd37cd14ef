package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/control"
	"github.com/keyshard/keyshard/proxy/digest"
	"gopkg.in/yaml.v3"
)

// What the operator sees of the data plane: readiness, the backends, the
// running config's revision, the digests. The controls that change
// things are package control's (Server.Control).

// Ready reports whether this instance can serve (nil) or why not: it is
// shutting down (draining) or offline, or the master of a schema's
// default node is down. For /readyz: a load balancer sends no new
// clients to an instance that is not ready.
func (s *Server) Ready() error {
	if s.shuttingDown.Load() {
		return errors.New("draining: shutting down")
	}
	if !s.ctl.Online() {
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

// AllowIPs returns allow_ips as a list.
func (s *Server) AllowIPs() []string { return config.SplitList(s.Config().AllowIPs) }

// BlackSQLs returns the SQL blacklist, as written.
func (s *Server) BlackSQLs() []string { return s.black.Load().SQLs() }

// Digests returns the top n statement digests (all when n <= 0) in the
// given order (digest.Orders; "" = total time).
func (s *Server) Digests(n int, order string) ([]digest.Stats, error) {
	top, ok := s.digests.Top(n, order)
	if !ok {
		return nil, control.ArgErrorf("unknown digest order %q: want one of %s", order, strings.Join(digest.Orders, ", "))
	}
	return top, nil
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
