package proxy

import (
	"context"
	"strings"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
	"go.uber.org/zap"
)

// What keyshard tells clients it is. Drivers pick their SQL dialect and
// protocol extensions from the greeting: a MariaDB backend behind a
// greeting that says MySQL 5.7 makes Connector/J, MariaDB Connector/J and
// others send MySQL-only SQL (SET transaction_isolation, ...) and fail.
// So the greeting carries the backends' own identity: the version of the
// identity node's master (the default node of the first schema), with
// "-keyshard" in place of the distribution suffix, and for MariaDB no
// CLIENT_MYSQL capability bit, as MariaDB itself greets. server_version in
// ks.yaml overrides it.

// fallbackVersion is greeted with until a backend has told its version
// (every backend down since the start).
const fallbackVersion = "5.7.99-keyshard"

// identity is the greeting version derived from one backend version.
type identity struct {
	backend *string // the backend version it was made from (pointer identity)
	version string  // what clients see
	mariaDB bool
	ext     uint32 // MariaDB extended capabilities offered (within backend.FlavorExt)
}

// greetingVersion makes the version clients see from a backend's:
// "5.5.5-10.11.19-MariaDB-0+deb12u1-log" -> "5.5.5-10.11.19-MariaDB-keyshard",
// "8.0.36-0ubuntu0.22.04.1" -> "8.0.36-keyshard".
func greetingVersion(v string) string {
	if i := strings.Index(v, "-MariaDB"); i >= 0 {
		return v[:i+len("-MariaDB")] + "-keyshard"
	}
	if i := strings.IndexByte(v, '-'); i >= 0 {
		v = v[:i]
	}
	return v + "-keyshard"
}

// identityNode is the node whose master gives keyshard its identity.
func (snap *snapshot) identityNode() *backend.Node {
	cfg := snap.cfg
	if len(cfg.SchemaList) > 0 {
		if n := snap.nodes[cfg.SchemaList[0].Default]; n != nil {
			return n
		}
	}
	if len(cfg.Nodes) > 0 {
		return snap.nodes[cfg.Nodes[0].Name]
	}
	return nil
}

// identity returns what the greeting says: server_version (which offers
// no extended capabilities), or the identity
// node's master's version as last seen (kept current: a backend upgraded
// and reconnected changes it).
func (s *Server) identity(snap *snapshot) identity {
	if v := snap.cfg.ServerVersion; v != "" {
		return identity{version: v, mariaDB: strings.Contains(v, "MariaDB")}
	}
	n := snap.identityNode()
	if n == nil {
		return identity{version: fallbackVersion}
	}
	bv := n.Master.ServerVersion()
	if bv == "" {
		return identity{version: fallbackVersion}
	}
	id := s.ident.Load()
	if id == nil || id.backend == nil || *id.backend != bv {
		id = &identity{backend: &bv, version: greetingVersion(bv), mariaDB: strings.Contains(bv, "MariaDB")}
		s.ident.Store(id)
	}
	out := *id
	out.ext = commonExt(snap)
	return out
}

// commonExt are the MariaDB extended capabilities keyshard offers: those
// every backend it has talked to offers (a client that negotiated extended
// type info must get it from whichever node answers), of those it passes
// through. Backends not contacted yet do not count.
func commonExt(snap *snapshot) uint32 {
	ext := uint32(backend.FlavorExt | backend.MariaDBBulkOperations)
	for _, n := range snap.nodes {
		for _, p := range n.Pools() {
			if p.ServerVersion() != "" {
				ext &= p.ServerExt()
			}
		}
	}
	return ext
}

// newSessionStatus is the server status a new session starts with: what
// node n's server gives a new connection (autocommit per its global
// setting), or autocommit on when it cannot be reached. learn allows a
// round trip to find out (else what is known).
func newSessionStatus(ctx context.Context, n *backend.Node, learn bool) uint16 {
	if n != nil {
		st, ok := n.Master.SessionStatus()
		if !ok && learn {
			st, ok = n.Master.LearnSessionStatus(ctx)
		}
		if ok {
			return st
		}
	}
	return wire.StatusAutocommit
}

// learnIdentity connects to the identity node's master once at start (so
// the first greeting already carries the backend's version) and, in the
// background, reports nodes whose servers are of another flavor or major
// version than the identity node's: clients see one identity.
func (s *Server) learnIdentity(snap *snapshot, timeout time.Duration) {
	n := snap.identityNode()
	if n == nil || snap.cfg.ServerVersion != "" {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	ref, err := n.Master.Probe(ctx)
	cancel()
	if err != nil {
		s.log.Warn("cannot learn the backends' version yet; greeting with a fallback until a backend answers",
			zap.String("node", n.Name), zap.String("fallback", fallbackVersion), zap.Error(err))
		return
	}
	s.log.Info("server identity", zap.String("node", n.Name), zap.String("backend_version", ref),
		zap.String("greeting", s.identity(snap).version))
	go func() {
		for name, other := range snap.nodes {
			if other == n {
				continue
			}
			ctx, cancel := context.WithTimeout(s.ctx, timeout)
			v, err := other.Master.Probe(ctx)
			cancel()
			if err == nil && family(v) != family(ref) {
				s.log.Warn("nodes run different server flavors or major versions; clients see the identity node's",
					zap.String("identity_node", n.Name), zap.String("identity_version", ref),
					zap.String("node", name), zap.String("version", v))
			}
		}
	}()
}

// family is a server version's flavor and major.minor ("MariaDB 10.11",
// "MySQL 8.0").
func family(v string) string {
	v = strings.TrimPrefix(v, "5.5.5-")
	flavor := "MySQL"
	if strings.Contains(v, "MariaDB") {
		flavor = "MariaDB"
	}
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return flavor + " " + v
	}
	return flavor + " " + parts[0] + "." + parts[1]
}
