package proxy

import (
	"context"
	"fmt"

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

// ResolveXA finishes transaction xid by hand (see xa.Coordinator.Resolve)
// and records the change. It returns how many branches it finished.
func (c Controls) ResolveXA(ctx context.Context, xid string, commit bool) (int, error) {
	n, err := c.s.xa.Resolve(ctx, xid, commit)
	if n > 0 || err == nil {
		_ = c.done(fmt.Sprintf("XA %s %s by hand: %d branches finished", map[bool]string{true: "commit", false: "rollback"}[commit], xid, n), nil)
	}
	return n, err
}
