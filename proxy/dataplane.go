package proxy

import (
	"context"
	"fmt"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/control"
	"github.com/keyshard/keyshard/proxy/hold"
	"go.uber.org/zap"
)

// NewClustered builds a server like New whose config is o.State's
// document: it follows the document's changes and registers itself as a
// member until Shutdown.
func NewClustered(cfg *config.Config, log *zap.Logger, o control.ClusterOptions) (*Server, error) {
	black, err := blacklist.Parse(o.State.Blacklist)
	if err != nil {
		o.Store.Close()
		return nil, fmt.Errorf("%s: blacklist: %w", o.Store.Source(), err)
	}
	s, err := newServer(cfg, log, &o, black)
	if err != nil {
		o.Store.Close()
		return nil, err
	}
	if err := s.ctl.Start(s.metrics.Registry); err != nil {
		_ = s.Shutdown(context.Background())
		return nil, err
	}
	return s, nil
}

// dataPlane is the server as its control plane drives it
// (control.DataPlane): the running snapshot and what it is built from.
type dataPlane Server

var _ control.DataPlane = (*dataPlane)(nil)

func (d *dataPlane) srv() *Server { return (*Server)(d) }

func (d *dataPlane) Config() *config.Config          { return d.srv().Config() }
func (d *dataPlane) Nodes() map[string]*backend.Node { return d.srv().Nodes() }
func (d *dataPlane) Running() (*config.Config, map[string]*backend.Node) {
	return d.srv().Running()
}
func (d *dataPlane) Blacklist() *blacklist.List     { return d.black.Load() }
func (d *dataPlane) SetBlacklist(b *blacklist.List) { d.black.Store(b) }
func (d *dataPlane) ResetDigests()                  { d.digests.Reset() }
func (d *dataPlane) Conns() int64                   { return d.fe.Conns() }

func (d *dataPlane) Revision() (int64, time.Time) {
	snap := d.snap.Load()
	return snap.rev, snap.applied
}

func (d *dataPlane) Closed() error {
	if d.shuttingDown.Load() {
		return ErrServerClosed
	}
	return nil
}

func (d *dataPlane) PoolOptions(cfg *config.Config, n *config.NodeConfig) backend.Options {
	return d.srv().poolOptions(cfg, n)
}

func (d *dataPlane) Sessions() int {
	n := 0
	d.sessions.Range(func(_, _ any) bool { n++; return true })
	return n
}

func (d *dataPlane) Hold(tables []string) *hold.Gate { return d.srv().hold(tables) }
func (d *dataPlane) Unhold(g *hold.Gate)             { d.srv().unhold(g) }

func (d *dataPlane) ResolveXA(ctx context.Context, xid string, commit bool) (int, error) {
	return d.xa.Resolve(ctx, xid, commit)
}

// Apply builds a snapshot from cfg (validated) and swaps it in with the
// SQL blacklist black: nodes whose pool settings are unchanged are kept,
// the others drain (see buildSnapshot). The SQL log, the digests and the
// result cache take cfg's settings.
func (d *dataPlane) Apply(cfg *config.Config, black *blacklist.List) (control.Applied, error) {
	s := d.srv()
	old := s.snap.Load()
	snap, gone, err := s.buildSnapshot(cfg, old)
	if err != nil {
		return control.Applied{}, err
	}
	snap.rev, snap.applied = old.rev+1, time.Now()
	s.snap.Store(snap)
	s.black.Store(black)
	s.sql.configure(cfg)
	s.digests.SetSize(cfg.DigestSize)
	s.rcache.resize(cfg.ResultCacheMB)
	for _, v := range s.accounts.Drop(gone) {
		s.drain(v)
	}
	for _, n := range gone {
		s.drain(n)
	}
	s.accounts.Invalidate() // read again, maybe from another node or as another account
	d.catalog.Kick()        // new schemas know no columns yet
	return control.Applied{Revision: snap.rev, Nodes: len(snap.nodes), Drained: len(gone)}, nil
}
