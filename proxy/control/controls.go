package control

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/frontend"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
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

// Controls are the operator's controls as an actor uses them (Plane.By):
// each change that is made is logged with what changed, who changed it
// and through which interface, and counted in keyshard_admin_changes_total
// (apart from reloads).
type Controls struct {
	p  *Plane
	by Actor
}

// By returns the controls for changes asked for by a.
func (p *Plane) By(a Actor) Controls { return Controls{p: p, by: a} }

// done logs and counts the change what once it is made (err nil).
func (c Controls) done(what string, err error) error {
	if err != nil {
		return err
	}
	c.p.adminChanges.Add(1)
	c.p.log.Info("admin change", zap.String("change", what), zap.String("user", c.by.User),
		zap.String("via", c.by.Via), zap.String("from", c.by.From))
	return nil
}

// change makes the config change what with edit (see Plane.change).
func (c Controls) change(what string, edit func(*config.Config) error) error {
	return c.done(what, c.p.change(edit))
}

// SetOnline puts the proxy online (true) or offline: offline, new client
// connections are refused with ER_SERVER_OFFLINE_MODE; sessions already
// open go on.
func (c Controls) SetOnline(on bool) error {
	c.p.offline.Store(!on)
	return c.done(map[bool]string{true: "proxy online", false: "proxy offline"}[on], nil)
}

// pool finds the backend of node with role (master|slave) at addr.
func (p *Plane) pool(node, role, addr string) (*backend.Pool, error) {
	n := p.dp.Nodes()[node]
	if n == nil {
		return nil, argErr("keyshard: no node %q", node)
	}
	switch strings.ToLower(role) {
	case "master":
		if addr != "" && addr != n.Master.Addr() {
			return nil, argErr("keyshard: node %s: master is %s, not %s", node, n.Master.Addr(), addr)
		}
		return n.Master, nil
	case "slave", "replica":
		for _, r := range n.Replicas() {
			if r.Pool.Addr() == addr {
				return r.Pool, nil
			}
		}
		return nil, argErr("keyshard: node %s has no slave %s", node, addr)
	}
	return nil, argErr("keyshard: role %q: want master or slave", role)
}

// SetBackendDown takes a backend out of service (down) or puts it back.
// Down, a master refuses statements at once and a replica gets no reads;
// it stays so until put up (health checks do not override it). Run-time
// state only: a reload keeps it for a node it keeps.
func (c Controls) SetBackendDown(node, role, addr string, down bool) error {
	p := c.p
	p.mu.Lock() // not onto a node a reload is replacing
	defer p.mu.Unlock()
	bp, err := p.pool(node, role, addr)
	if err != nil {
		return err
	}
	if p.link != nil {
		if err := p.setDownShared(node, bp.Role().String(), bp.Addr(), down, c.by); err != nil {
			return err
		}
	}
	bp.SetAdminDown(down)
	return c.done(fmt.Sprintf("node %s: %s %s %s", node, bp.Role(), bp.Addr(), map[bool]string{true: "down", false: "up"}[down]), nil)
}

// AddSlave adds a replica (host:port[@weight]) to node.
func (c Controls) AddSlave(node, addr string) error {
	return c.change(fmt.Sprintf("node %s: add slave %s", node, addr), func(c *config.Config) error {
		nc, ok := c.Node(node)
		if !ok {
			return argErr("keyshard: no node %q", node)
		}
		want, err := config.ParseSlaves(addr)
		if err != nil || len(want) != 1 {
			return argErr("keyshard: slave address %q: want host:port[@weight]", addr)
		}
		have, _ := nc.Slaves()
		if slices.ContainsFunc(have, func(x config.Slave) bool { return x.Addr == want[0].Addr }) {
			return argErr("keyshard: node %s already has slave %s", node, want[0].Addr)
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
			return argErr("keyshard: no node %q", node)
		}
		addr, _, _ = strings.Cut(addr, "@")
		have, _ := nc.Slaves()
		i := slices.IndexFunc(have, func(x config.Slave) bool { return x.Addr == addr })
		if i < 0 {
			return argErr("keyshard: node %s has no slave %s", node, addr)
		}
		nc.Slave = config.FormatSlaves(slices.Delete(have, i, i+1))
		return nil
	})
}

// AddAllowIP adds an address or CIDR network to allow_ips. Note that an
// empty allow_ips allows everyone: the first entry restricts access.
func (c Controls) AddAllowIP(ip string) error {
	ip = strings.TrimSpace(ip)
	return c.change("allow_ips: add "+ip, func(c *config.Config) error {
		list := config.SplitList(c.AllowIPs)
		if slices.Contains(list, ip) {
			return argErr("keyshard: %s is already in allow_ips", ip)
		}
		if _, err := frontend.ParseAllowIPs(ip); err != nil || ip == "" {
			return argErr("keyshard: allow_ips: bad address or network %q", ip)
		}
		c.AllowIPs = strings.Join(append(list, ip), ",")
		return nil
	})
}

// DelAllowIP removes an entry of allow_ips.
func (c Controls) DelAllowIP(ip string) error {
	ip = strings.TrimSpace(ip)
	return c.change("allow_ips: remove "+ip, func(c *config.Config) error {
		list := config.SplitList(c.AllowIPs)
		i := slices.Index(list, ip)
		if i < 0 {
			return argErr("keyshard: %s is not in allow_ips", ip)
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
		return argErr("keyshard: slow_log_time %d: want milliseconds >= 0", ms)
	}
	return c.change(fmt.Sprintf("slow_log_time: %d ms", ms), func(cfg *config.Config) error {
		cfg.SlowLogTime = ms
		return nil
	})
}

// AddBlackSQL adds a statement to the SQL blacklist: statements of the
// same canonical form (any literal values, spelling of names...) are
// refused from the next statement on.
func (c Controls) AddBlackSQL(sql string) error {
	if strings.TrimSpace(sql) == "" {
		return argErr("keyshard: empty blacklist entry")
	}
	if router.Classify(sql).Flags&router.FlagMulti != 0 {
		return argErr("keyshard: a blacklist entry is one statement; add %q as one entry per statement", sql)
	}
	return c.done("blacklist: add "+strconv.Quote(sql), c.p.setBlack(func(b *blacklist.List) (*blacklist.List, error) {
		nb, ok := b.With(sql)
		if !ok {
			return nil, argErr("keyshard: %q is already in the blacklist", sql)
		}
		return nb, nil
	}))
}

// DelBlackSQL removes the blacklist entry of sql's shape.
func (c Controls) DelBlackSQL(sql string) error {
	return c.done("blacklist: remove "+strconv.Quote(sql), c.p.setBlack(func(b *blacklist.List) (*blacklist.List, error) {
		nb, ok := b.Without(sql)
		if !ok {
			return nil, &ArgError{Missing: true, msg: fmt.Sprintf("keyshard: %q is not in the blacklist", sql)}
		}
		return nb, nil
	}))
}

func (p *Plane) setBlack(edit func(*blacklist.List) (*blacklist.List, error)) error {
	if p.link != nil {
		return p.setBlackShared(edit)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	nb, err := edit(p.dp.Blacklist())
	if err != nil {
		return err
	}
	p.dp.SetBlacklist(nb)
	return nil
}

// SaveConfig writes the running settings that admin commands change
// (allow_ips, log_sql, slow_log_time, slaves) into the config file,
// keeping its comments, and the blacklist into blacklist_sql_file.
// On a shared config there is nothing to save: every change was
// written to etcd when it was made.
func (c Controls) SaveConfig() error {
	if c.p.link != nil {
		return c.done("config save (nothing to do: changes are written to "+c.p.link.store.Source()+" as they are made)", nil)
	}
	return c.done("config saved to "+c.p.dp.Config().Source(), c.p.saveConfig())
}

func (p *Plane) saveConfig() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cfg, black := p.dp.Config(), p.dp.Blacklist()
	if err := cfg.Save(); err != nil {
		return fmt.Errorf("keyshard: save %s: %w", cfg.Source(), err)
	}
	p.wroteConfig(cfg.Source())
	if f := cfg.BlacklistSQLFile; f != "" {
		if err := config.WriteFileAtomic(f, black.File()); err != nil {
			return fmt.Errorf("keyshard: save blacklist_sql_file: %w", err)
		}
	} else if !black.Empty() {
		return argErr("keyshard: %s saved, but the SQL blacklist was not: blacklist_sql_file is not set", cfg.Source())
	}
	return nil
}

// ResetDigests drops every digest.
func (c Controls) ResetDigests() error {
	c.p.dp.ResetDigests()
	return c.done("digests reset", nil)
}

// Reload reloads the config file (Plane.ReloadFile), logging who asked.
func (c Controls) Reload(force bool) ([]string, error) {
	c.p.log.Info("config reload asked for", zap.Bool("force", force), zap.String("user", c.by.User),
		zap.String("via", c.by.Via), zap.String("from", c.by.From))
	return c.p.ReloadFile(force)
}

// ResolveXA finishes transaction xid by hand: it records the decision
// (commit true, else rollback; a decision already recorded stands, and a
// different one is an error), then commits or rolls back its prepared
// branches on every node. It returns how many it finished.
func (c Controls) ResolveXA(ctx context.Context, xid string, commit bool) (int, error) {
	n, err := c.p.dp.ResolveXA(ctx, xid, commit)
	if n > 0 || err == nil {
		_ = c.done(fmt.Sprintf("XA %s %s by hand: %d branches finished", map[bool]string{true: "commit", false: "rollback"}[commit], xid, n), nil)
	}
	return n, err
}
