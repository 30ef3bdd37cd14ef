package control

// Failover following. When the master of a node dies, something outside
// keyshard (an operator, MHA, orchestrator, MaxScale) promotes one of its
// replicas: it stops replicating and takes writes (read_only = 0).
// keyshard does not promote anything itself; for a node with
// failover_after set it notices the promotion and follows it:
//
//   - the master has been down by its health checks (never when an
//     operator took it down) for failover_after: each slave of the node is
//     asked, on a connection of its own, for @@read_only and SHOW SLAVE
//     STATUS, every second while this lasts;
//   - exactly one is writable and replicates nothing: it becomes the
//     master, by a config change like an operator's (Controls.Failover:
//     master set, the slave removed; the old master is not made a
//     slave), written back to the config file;
//   - none: keyshard waits for a promotion; two or more: keyshard never
//     chooses (both are logged, at most every 30 s).
//
// Never two masters: keyshard never puts a former master back. It keeps
// asking each one (a node's master it saw replaced) and reports it while
// it is writable; one an operator puts back into the node is forgotten.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

const (
	failoverTick     = time.Second      // how often the monitor looks
	failoverLogEvery = 30 * time.Second // a waiting or refusing node is logged at most this often
	formerEvery      = 3 * time.Second  // how often a former master is asked
)

// errFailoverDone is a failover edit finding the node's master already
// moved from the one it replaces: another keyshard instance sharing the
// config made the same change first (Plane.change may run an edit again
// on a newer config), or an operator did. Nothing is left to do.
var errFailoverDone = errors.New("keyshard: failover already made")

// failover makes to the master of node in place of from: to leaves the
// node's slaves; from is not added as one. made is false if the node's
// master was no longer from (the failover was made elsewhere: no error).
// It asks the servers nothing: the failover monitor decides when.
func (c Controls) failover(node, from, to string) (made bool, err error) {
	err = c.change(fmt.Sprintf("node %s: failover, master %s replaced by its slave %s", node, from, to), func(cfg *config.Config) error {
		return failoverEdit(cfg, node, from, to)
	})
	if errors.Is(err, errFailoverDone) {
		return false, nil
	}
	return err == nil, err
}

// failoverEdit makes the slave to node's master in cfg, in place of from.
func failoverEdit(cfg *config.Config, node, from, to string) error {
	nc, ok := cfg.Node(node)
	if !ok {
		return argErr("keyshard: no node %q", node)
	}
	if nc.Master != from {
		return errFailoverDone
	}
	have, _ := nc.Slaves()
	i := slices.IndexFunc(have, func(x config.Slave) bool { return x.Addr == to })
	if i < 0 {
		return argErr("keyshard: node %s has no slave %s to fail over to", node, to)
	}
	nc.Master = to
	nc.Slave = config.FormatSlaves(slices.Delete(have, i, i+1))
	return nil
}

// failoverDue reports whether a node's replicas are to be asked: its
// master has been down by its health checks for at least after (0: the
// node does not follow failovers). An operator's admin node down never
// counts.
func failoverDue(after time.Duration, h backend.Health, adminDown bool, downFor time.Duration) bool {
	return after > 0 && !adminDown && h == backend.Down && downFor >= after
}

// roleAnswer is what one server said when asked (or why it did not).
type roleAnswer struct {
	Addr string
	Role backend.ServerRole
	Err  error
	Down bool // an operator took it out (admin node down): never chosen
}

func (a roleAnswer) String() string {
	switch {
	case a.Err != nil:
		return a.Addr + ": not answering: " + a.Err.Error()
	case a.Role.Writable():
		return a.Addr + ": writable, not replicating"
	}
	var s []string
	if a.Role.ReadOnly {
		s = append(s, "read_only=1")
	} else {
		s = append(s, "read_only=0")
	}
	if a.Role.Replicating {
		s = append(s, "replicating from "+a.Role.Source)
	}
	return a.Addr + ": " + strings.Join(s, ", ")
}

type failoverAction uint8

const (
	failoverNone   failoverAction = iota // nothing to do: the master is up, taken down by an operator, or not down long enough
	failoverWait                         // no replica writable yet
	failoverFollow                       // exactly one writable and not replicating: follow it
	failoverRefuse                       // several writable: never choose
	failoverFailed                       // (a watch's state only) the config change to follow one failed
)

// failoverDecision is what to do about a node whose master is down.
type failoverDecision struct {
	Action   failoverAction
	To       string   // failoverFollow: the new master
	Writable []string // failoverRefuse: the writable replicas
	Unknown  []string // failoverWait: replicas that did not answer
}

// chooseMaster decides from the answers of a node's replicas, its master
// being down for failover_after: a replica that is read-only or still
// replicates (its IO thread retrying the dead master) is no candidate. One
// that does not answer might be writable: while one does not, keyshard
// cannot tell that exactly one is, and waits.
//
// A replica an operator took down is never chosen, but one that is
// writable still counts: with another writable one, there would be two
// writers.
func chooseMaster(answers []roleAnswer) failoverDecision {
	var writable, unknown []string
	chosen := ""
	for _, a := range answers {
		switch {
		case a.Err != nil && !a.Down:
			unknown = append(unknown, a.Addr)
		case a.Err == nil && a.Role.Writable():
			writable = append(writable, a.Addr)
			if !a.Down {
				chosen = a.Addr
			}
		}
	}
	switch {
	case len(writable) > 1:
		return failoverDecision{Action: failoverRefuse, Writable: writable}
	case len(unknown) > 0 || chosen == "":
		return failoverDecision{Action: failoverWait, Unknown: unknown}
	}
	return failoverDecision{Action: failoverFollow, To: chosen}
}

// failoverMonitor follows the failovers of the nodes with failover_after
// set. Its state is run's goroutine's own.
type failoverMonitor struct {
	p         *Plane
	failovers *prometheus.CounterVec // by node
	refused   *prometheus.CounterVec // by node and reason
	former    *prometheus.GaugeVec   // by node and address: 1 while a former master is writable
	nodes     map[string]*failoverWatch
}

// failoverWatch is the monitor's memory of one node.
type failoverWatch struct {
	master  string         // as last seen
	state   failoverAction // while the master is down; failoverNone otherwise
	refusal string         // the reason counted for the refusal going on
	logged  time.Time      // when state was last logged
	formers map[string]*formerMaster
}

// formerMaster is a master the node had before.
type formerMaster struct {
	writable bool      // at the last answer
	next     time.Time // when to ask it again
}

// newFailoverMonitor registers the monitor's metrics; run starts it.
func newFailoverMonitor(p *Plane, reg prometheus.Registerer) *failoverMonitor {
	m := &failoverMonitor{p: p, nodes: map[string]*failoverWatch{},
		failovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyshard_failovers_total",
			Help: "Failovers followed: a node's master replaced by its one writable, not replicating slave (failover_after)."}, []string{"node"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyshard_failover_refused_total",
			Help: "Failovers keyshard would not follow, counted once per occurrence: several_writable (more than one slave writable), change_failed (the config change was refused)."},
			[]string{"node", "reason"}),
		former: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "keyshard_failover_former_master_writable",
			Help: "1 while a former master of a node (replaced by a failover or a config change) is writable (read_only=0); keyshard keeps it out."},
			[]string{"node", "addr"}),
	}
	reg.MustRegister(m.failovers, m.refused, m.former)
	return m
}

// run looks every failoverTick until the server shuts down.
func (m *failoverMonitor) run() {
	t := time.NewTicker(failoverTick)
	defer t.Stop()
	for {
		select {
		case <-m.p.ctx.Done():
			return
		case now := <-t.C:
			m.tick(now)
		}
	}
}

// roleAsk is one server to ask in a tick.
type roleAsk struct {
	node string
	opts backend.Options
	roleAnswer
}

// downNode is a node whose replicas are asked in a tick.
type downNode struct {
	name, master string
	downFor      time.Duration
	w            *failoverWatch
	asks         []*roleAsk
}

// tick looks at every node once: asks the replicas of the nodes whose
// master is down (and the former masters due), all at once, then acts.
func (m *failoverMonitor) tick(now time.Time) {
	cfg, nodes := m.p.dp.Running()
	timeout := cfg.ConnectTimeout.D() + cfg.HealthCheckTimeout.D()
	var down []*downNode
	var all []*roleAsk
	formers := map[*roleAsk]*formerMaster{}
	seen := map[string]bool{}
	for i := range cfg.Nodes {
		nc := &cfg.Nodes[i]
		n := nodes[nc.Name]
		if nc.FailoverAfter <= 0 || n == nil {
			continue
		}
		seen[nc.Name] = true
		w := m.watch(nc)
		opts := m.p.dp.PoolOptions(cfg, nc)
		for addr, f := range w.formers {
			if now.Before(f.next) {
				continue
			}
			a := &roleAsk{node: nc.Name, opts: opts, roleAnswer: roleAnswer{Addr: addr}}
			a.opts.Role = backend.RoleMaster
			formers[a] = f
			all = append(all, a)
		}
		mp := n.Master
		downFor := now.Sub(mp.StateSince())
		if !failoverDue(nc.FailoverAfter.D(), mp.Health(), mp.AdminDown(), downFor) {
			w.state, w.refusal = failoverNone, ""
			continue
		}
		d := &downNode{name: nc.Name, master: nc.Master, downFor: downFor, w: w}
		slaves, _ := nc.Slaves()
		for _, sl := range slaves {
			down := slices.ContainsFunc(n.Replicas(), func(r *backend.Replica) bool { return r.Pool.Addr() == sl.Addr && r.Pool.AdminDown() })
			a := &roleAsk{node: nc.Name, opts: opts, roleAnswer: roleAnswer{Addr: sl.Addr, Down: down}}
			a.opts.Role = backend.RoleReplica
			d.asks = append(d.asks, a)
			all = append(all, a)
		}
		down = append(down, d)
	}
	for name, w := range m.nodes {
		if !seen[name] {
			for addr := range w.formers {
				m.former.DeleteLabelValues(name, addr)
			}
			delete(m.nodes, name)
		}
	}
	var wg sync.WaitGroup
	for _, a := range all {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(m.p.ctx, timeout)
			a.Role, a.Err = backend.AskRole(ctx, a.node, a.Addr, a.opts)
			cancel()
		})
	}
	wg.Wait()
	if m.p.ctx.Err() != nil {
		return
	}
	for a, f := range formers {
		m.formerAnswered(a, f, now)
	}
	for _, d := range down {
		m.decide(d, now)
	}
}

// watch returns the monitor's memory of node nc, noting a change of its
// master (the old one becomes a former master) and forgetting the former
// masters that are in the node again.
func (m *failoverMonitor) watch(nc *config.NodeConfig) *failoverWatch {
	w := m.nodes[nc.Name]
	if w == nil {
		w = &failoverWatch{master: nc.Master, formers: map[string]*formerMaster{}}
		m.nodes[nc.Name] = w
	}
	if w.master != nc.Master {
		m.addFormer(nc.Name, w, w.master)
		w.master = nc.Master
	}
	slaves, _ := nc.Slaves()
	for addr := range w.formers {
		if addr == nc.Master || slices.ContainsFunc(slaves, func(s config.Slave) bool { return s.Addr == addr }) {
			delete(w.formers, addr)
			m.former.DeleteLabelValues(nc.Name, addr)
			m.p.log.Info("failover: node "+nc.Name+": former master "+addr+" is in the config again; no longer watched",
				zap.String("node", nc.Name), zap.String("addr", addr))
		}
	}
	return w
}

func (m *failoverMonitor) addFormer(node string, w *failoverWatch, addr string) {
	if _, ok := w.formers[addr]; ok || addr == "" {
		return
	}
	w.formers[addr] = &formerMaster{}
	m.former.WithLabelValues(node, addr).Set(0)
}

// formerAnswered records what former master a said: its being writable
// is logged once per change.
func (m *failoverMonitor) formerAnswered(a *roleAsk, f *formerMaster, now time.Time) {
	f.next = now.Add(formerEvery)
	writable := a.Err == nil && !a.Role.ReadOnly
	if writable == f.writable {
		return
	}
	f.writable = writable
	m.former.WithLabelValues(a.node, a.Addr).Set(boolFloat(writable))
	fields := []zap.Field{zap.String("node", a.node), zap.String("addr", a.Addr)}
	if writable {
		m.p.log.Error(fmt.Sprintf("node %s: former master %s is back and writable (read_only=0); keyshard keeps it out: it is not in the config; "+
			"make it a replica or set read_only=1", a.node, a.Addr), fields...)
		return
	}
	m.p.log.Info(fmt.Sprintf("node %s: former master %s is no longer writable (%s)", a.node, a.Addr, a.roleAnswer), fields...)
}

// decide acts on the answers of the replicas of d, whose master is down.
func (m *failoverMonitor) decide(d *downNode, now time.Time) {
	answers := make([]roleAnswer, len(d.asks))
	said := make([]string, len(d.asks))
	for i, a := range d.asks {
		answers[i], said[i] = a.roleAnswer, a.roleAnswer.String()
	}
	dec := chooseMaster(answers)
	down := d.downFor.Round(time.Second)
	fields := []zap.Field{zap.String("node", d.name), zap.String("master", d.master), zap.Duration("down_for", down), zap.Strings("replicas", said)}
	// Logged when the state changes, then every failoverLogEvery.
	again := dec.Action != d.w.state || now.Sub(d.w.logged) >= failoverLogEvery
	if dec.Action != failoverFollow {
		d.w.state = dec.Action
		if again {
			d.w.logged = now
		}
	}
	switch dec.Action {
	case failoverWait:
		if again && len(d.asks) == 0 {
			m.p.log.Warn(fmt.Sprintf("node %s: master %s down for %v; the node has no slave to fail over to",
				d.name, d.master, down), fields...)
		} else if again && len(dec.Unknown) > 0 {
			m.p.log.Warn(fmt.Sprintf("node %s: master %s down for %v; %s do not answer: keyshard cannot tell that only one replica is writable, "+
				"and waits (a dead replica: take it out of the node with admin node del slave)", d.name, d.master, down,
				strings.Join(dec.Unknown, ", ")), fields...)
		} else if again {
			m.p.log.Warn(fmt.Sprintf("node %s: master %s down for %v; no replica is writable yet; waiting for a promotion (one an operator took down is never chosen)", d.name, d.master, down), fields...)
		}
	case failoverRefuse:
		m.refuse(d, "several_writable")
		if again {
			m.p.log.Error(fmt.Sprintf("node %s: master %s down for %v; several replicas are writable (%s): keyshard will not choose; "+
				"make all but the new master read-only (read_only=1)", d.name, d.master, down, strings.Join(dec.Writable, ", ")), fields...)
		}
	case failoverFollow:
		m.follow(d, dec.To, now, fields)
	}
}

// refuse counts a refusal once while it goes on.
func (m *failoverMonitor) refuse(d *downNode, reason string) {
	if d.w.refusal != reason {
		d.w.refusal = reason
		m.refused.WithLabelValues(d.name, reason).Inc()
	}
}

// follow makes to the master of d through the operator's controls, and
// writes the config back to its file.
func (m *failoverMonitor) follow(d *downNode, to string, now time.Time, fields []zap.Field) {
	p := m.p
	made, err := p.By(Actor{User: "keyshard", Via: "failover", From: p.Name()}).failover(d.name, d.master, to)
	if err != nil {
		m.refuse(d, "change_failed")
		if d.w.state != failoverFailed || now.Sub(d.w.logged) >= failoverLogEvery {
			d.w.state, d.w.logged = failoverFailed, now
			p.log.Error(fmt.Sprintf("node %s: master %s down; %s is writable and not replicating, but the config change failed", d.name, d.master, to),
				append(fields, zap.Error(err))...)
		}
		return
	}
	// The next tick sees the master change in the running config (watch)
	// and watches the old master from then on. (In cluster mode the
	// change may reach this instance's config after a while.)
	d.w.state, d.w.refusal = failoverNone, ""
	if !made {
		p.log.Info(fmt.Sprintf("failover: node %s already writes to another master than %s (another keyshard instance or an operator changed it)", d.name, d.master), fields...)
		return
	}
	m.failovers.WithLabelValues(d.name).Inc()
	p.log.Warn(fmt.Sprintf("failover: node %s now writes to %s (master %s down for %v; %s is writable and not replicating)",
		d.name, to, d.master, d.downFor.Round(time.Second), to), append(fields, zap.String("to", to))...)
	if cfg := p.dp.Config(); p.link == nil && cfg.Source() != "" {
		// So that a restart does not go back to the dead master. Only the
		// config: the blacklist did not change. (A shared config has the
		// change in etcd already.)
		p.mu.Lock()
		err := saveFailover(cfg.Source(), d.name, d.master, to)
		if err == nil {
			p.wroteConfig(cfg.Source())
		}
		p.mu.Unlock()
		if err != nil {
			p.log.Error(fmt.Sprintf("failover: node %s: the config file was not updated; a restart would go back to %s: fix the file", d.name, d.master),
				zap.String("source", cfg.Source()), zap.Error(err))
		}
	}
}

// saveFailover writes a failover into the config file at path: the node's
// master and slaves only, as the file has them now (run-time changes an
// operator did not save, and edits not reloaded yet, stay as they are).
func saveFailover(path, node, from, to string) error {
	disk, _, err := config.Load(path)
	if err != nil {
		return err
	}
	if n, ok := disk.Node(node); ok && n.Master != from && n.Master != to {
		return fmt.Errorf("the file names %s as node %s's master, neither the old master nor the new one: left as it is", n.Master, node)
	}
	if err := failoverEdit(disk, node, from, to); err != nil && !errors.Is(err, errFailoverDone) {
		return err
	}
	return disk.Save()
}
