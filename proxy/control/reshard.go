package control

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/binlog"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/hold"
	"github.com/keyshard/keyshard/proxy/reshard"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
)

// Online resharding, as the operator drives it (ADMIN RESHARD, REST): the
// workflow itself is proxy/reshard's; here it gets the pending layout
// (the config file as edited), the nodes, and the switch.

// reshards holds this instance's workflow: one at a time.
type reshards struct {
	mu sync.Mutex
	w  *reshard.Workflow
}

// ReshardStart compares the config file (the layout wanted) with the
// running config, plans the tables whose rows move (all of them, or those
// named as db.table), creates their new sub-tables and starts the copy. It
// returns what each table's move does.
func (c Controls) ReshardStart(ctx context.Context, tables []string) ([]string, error) {
	p := c.p
	if p.link != nil {
		return nil, argErr("keyshard: online resharding with a config shared in etcd is not supported yet (every instance would " +
			"have to hold and switch together); run it with a config file")
	}
	p.reshard.mu.Lock()
	defer p.reshard.mu.Unlock()
	if w := p.reshard.w; w != nil {
		switch st := w.Status(); st.Phase {
		case reshard.Switched, reshard.Complete, reshard.Cancelled, reshard.Failed:
		default:
			return nil, argErr("keyshard: a reshard of %s is %s; wait for it, or ADMIN RESHARD CANCEL", strings.Join(st.Tables, ", "), st.Phase)
		}
	}
	running := p.dp.Config()
	pending, _, err := config.Load(running.Source())
	if err == nil {
		err = p.local.Apply(pending)
	}
	if err != nil {
		return nil, argErr("keyshard: reading the layout wanted from %s: %v", running.Source(), err)
	}
	plans, err := reshardPlans(running, pending, tables)
	if err != nil {
		return nil, err
	}
	nodes := &reshardNodes{dp: p.dp, cfgs: []*config.Config{pending, running}, id: serverID(p.local.Name)}
	sw := &reshardSwitch{p: p, pending: pending}
	opts := reshard.Options{CutoverTimeout: running.ReshardCutoverTimeout.D()}
	w, err := reshard.New(ctx, nodes, sw, plans, opts)
	if err != nil {
		return nil, argErr("keyshard: the reshard did not start: %v", err)
	}
	w.Run()
	p.reshard.w = w
	var out []string
	for _, pl := range plans {
		out = append(out, pl.Describe())
	}
	return out, c.done("reshard start: "+strings.Join(w.Tables(), ", "), nil)
}

// ReshardStatus is the workflow's status (ok false: none has run).
func (c Controls) ReshardStatus() (reshard.Status, bool) { return c.p.ReshardStatus() }

// ReshardStatus is the workflow's status (ok false: none has run).
func (p *Plane) ReshardStatus() (reshard.Status, bool) {
	p.reshard.mu.Lock()
	w := p.reshard.w
	p.reshard.mu.Unlock()
	if w == nil {
		return reshard.Status{}, false
	}
	return w.Status(), true
}

// ReshardCancel stops the running workflow before its switch and drops
// the sub-tables it created.
func (c Controls) ReshardCancel(ctx context.Context) error {
	p := c.p
	p.reshard.mu.Lock()
	w := p.reshard.w
	p.reshard.mu.Unlock()
	if w == nil {
		return argErr("keyshard: no reshard to cancel")
	}
	if err := w.Cancel(ctx); err != nil {
		return argErr("keyshard: %v", err)
	}
	return c.done("reshard cancel: "+strings.Join(w.Tables(), ", "), nil)
}

// ReshardComplete drops the old layout's tables after the switch (the
// sub-tables that moved away, the renamed ones) and ends the workflow.
func (c Controls) ReshardComplete(ctx context.Context) ([]string, error) {
	p := c.p
	p.reshard.mu.Lock()
	w := p.reshard.w
	p.reshard.mu.Unlock()
	if w == nil {
		return nil, argErr("keyshard: no reshard to complete")
	}
	dropped, err := w.Complete(ctx)
	var out []string
	for _, pl := range dropped {
		out = append(out, pl.String())
	}
	if err != nil {
		return out, argErr("keyshard: %v", err)
	}
	return out, c.done("reshard complete: dropped "+strings.Join(out, ", "), nil)
}

// reshardPlans plans every table whose placement differs between running
// and pending, for each schema. names (db.table) restricts them; a table
// that moves but is not named is an error, since the switch would place
// its rows anew without moving them.
func reshardPlans(running, pending *config.Config, names []string) ([]*reshard.TablePlan, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[strings.ToLower(n)] = true
	}
	seen := map[string]bool{}
	var plans []*reshard.TablePlan
	var unnamed []string
	for i := range pending.SchemaList {
		sc := &pending.SchemaList[i]
		prev, ok := running.SchemaFor(sc.User)
		if !ok {
			continue
		}
		oldS, err := router.NewSchema(prev.RouteConfig(), 1)
		if err != nil {
			return nil, err
		}
		newS, err := router.NewSchema(sc.RouteConfig(), 1)
		if err != nil {
			return nil, err
		}
		for _, o := range oldS.Rules() {
			name := o.DB + "." + o.Table
			if seen[name] {
				continue
			}
			n := newS.Table(o.DB, o.Table)
			if n == nil {
				return nil, argErr("keyshard: the config file has no rule for %s: resharding moves rows to a new rule, it does not remove one", name)
			}
			pl, err := reshard.PlanTable(o, n)
			if err != nil {
				return nil, argErr("keyshard: %v", err)
			}
			if pl == nil {
				continue
			}
			seen[name] = true
			if len(want) > 0 && !want[name] {
				unnamed = append(unnamed, name)
				continue
			}
			delete(want, name)
			plans = append(plans, pl)
		}
	}
	if len(unnamed) > 0 {
		return nil, argErr("keyshard: the config file also moves the rows of %s; name them too, or leave their rules as they run",
			strings.Join(unnamed, ", "))
	}
	if len(want) > 0 {
		var left []string
		for n := range want {
			left = append(left, n)
		}
		slices.Sort(left)
		return nil, argErr("keyshard: no rows of %s move between the running config and the config file", strings.Join(left, ", "))
	}
	if len(plans) == 0 {
		return nil, argErr("keyshard: no rows move between the running config and the config file: edit the file to the layout wanted first")
	}
	return plans, nil
}

// reshardNodes reaches the nodes of the pending and running configs
// (reshard.Nodes): new nodes are only in the first. One pool per node, no
// warm connections, closed with Close.
type reshardNodes struct {
	dp   DataPlane
	cfgs []*config.Config
	id   uint32

	mu    sync.Mutex
	pools map[string]*backend.Pool
}

func (n *reshardNodes) node(name string) (*config.Config, *config.NodeConfig, error) {
	for _, cfg := range n.cfgs {
		if nc, ok := cfg.Node(name); ok {
			return cfg, nc, nil
		}
	}
	return nil, nil, fmt.Errorf("no node %s in the config", name)
}

func (n *reshardNodes) Dial(ctx context.Context, name string) (*backend.Conn, error) {
	n.mu.Lock()
	p := n.pools[name]
	if p == nil {
		cfg, nc, err := n.node(name)
		if err != nil {
			n.mu.Unlock()
			return nil, err
		}
		opts := n.dp.PoolOptions(cfg, nc)
		opts.DB, opts.MinIdle = "", 0
		p = backend.NewPool(name, nc.Master, opts)
		if n.pools == nil {
			n.pools = map[string]*backend.Pool{}
		}
		n.pools[name] = p
	}
	n.mu.Unlock()
	return p.Dial(ctx)
}

// Close closes the pools (Dial opens them again).
func (n *reshardNodes) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for name, p := range n.pools {
		p.Close()
		delete(n.pools, name)
	}
}

func (n *reshardNodes) Binlog(name string) (binlog.Config, error) {
	_, nc, err := n.node(name)
	if err != nil {
		return binlog.Config{}, err
	}
	host, port, err := net.SplitHostPort(nc.Master)
	if err != nil {
		return binlog.Config{}, fmt.Errorf("node %s: master %q: %v", name, nc.Master, err)
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return binlog.Config{}, fmt.Errorf("node %s: master %q: %v", name, nc.Master, err)
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return binlog.Config{Host: host, Port: uint16(pn), User: nc.User, Password: nc.Password, ServerID: n.id ^ h.Sum32()&0xffff}, nil
}

// serverID is the replica id keyshard's binlog followers register with:
// high, unlikely to be a real server's, different per instance name and
// start.
func serverID(name string) uint32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s-%d", name, time.Now().UnixNano())
	return 0x7000_0000 | h.Sum32()&0x0fff_0000
}

// reshardSwitch is the cut-over's side of the data plane
// (reshard.Switcher).
type reshardSwitch struct {
	p       *Plane
	pending *config.Config
}

func (s *reshardSwitch) Hold(tables []string) *hold.Gate { return s.p.dp.Hold(tables) }
func (s *reshardSwitch) Unhold(g *hold.Gate)             { s.p.dp.Unhold(g) }

// Switch applies the pending config, forced: its rows are in place.
func (s *reshardSwitch) Switch() error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	warnings, err := s.p.reloadLocked(s.pending, s.p.dp.Blacklist(), true)
	if err != nil {
		return err
	}
	s.p.log.Info("reshard: switched to the new layout", zap.Strings("warnings", warnings))
	return nil
}
