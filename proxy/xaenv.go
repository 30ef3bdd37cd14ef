package proxy

import (
	"context"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/xa"
	"github.com/keyshard/keyshard/router"
)

// The XA coordinator and the sequences live in package xa; Server is
// their xa.Env.

// Routes are the running configuration's compiled shard rules, by user
// (xa.Env: a sequence starts after the ids of every table it fills).
func (s *Server) Routes() map[string]*router.Schema { return s.snap.Load().routes }

// XABranches lists keyshard's prepared branches on every node, with the
// decision recorded for each (in doubt: none yet, or not finished).
func (s *Server) XABranches(ctx context.Context) ([]xa.Branch, error) { return s.xa.Branches(ctx) }

// Running is the running configuration and its nodes, of one snapshot
// (xa.Env, control.DataPlane).
func (s *Server) Running() (*config.Config, map[string]*backend.Node) {
	snap := s.snap.Load()
	return snap.cfg, snap.nodes
}
