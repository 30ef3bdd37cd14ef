package control

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/cluster"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// A server started from etcd (-config etcd://...) shares its config with
// every instance on the same prefix: it applies each new revision of the
// document through the same validated snapshot swap a file reload uses,
// writes admin and REST changes back with a compare-and-swap on the
// revision they started from, and lists itself as a member. If etcd is
// lost it keeps serving on the last config it applied, and catches up
// when etcd returns.

// ClusterOptions start a server on a shared config (proxy.NewClustered).
type ClusterOptions struct {
	Store   *cluster.Store // the server's from then on: Shutdown closes it (a failed NewClustered too)
	State   cluster.State  // as read at start; its Config parsed into the cfg given
	Local   config.Local   // already applied to the cfg given
	Version string         // of this binary, for the member list
}

// clusterLink is the plane's link to the shared config (Plane.link).
type clusterLink struct {
	store   *cluster.Store
	version string
	host    string

	// Under Plane.mu:
	doc       []byte // the config document at configRev: admin changes rewrite it
	configRev int64  // the document's etcd revision applied
	blackDoc  []byte // the blacklist at blackRev, as stored
	blackRev  int64  // the blacklist's etcd revision applied
	failedDoc []byte // the document at failedRev
	failedRev int64  // a newer revision that failed to apply (not retried until it changes)
	rev       int64  // the store revision of the newest state applied or written: older reads are stale
	cluster   uint64 // etcd's cluster id (another: etcd was replaced; start over)
	resetRev  int64  // the store revision when the bookkeeping last started over (a force mark older than it is history)
	empty     bool   // the last read found no config document (a wiped etcd): changes are refused

	// What the member entry says; mu because Register reads it.
	mu      sync.Mutex
	applied int64 // the config revision running
	at      time.Time
	err     string    // why the newest revision is not running
	readErr time.Time // when a failed read of the store was last logged
	update  chan struct{}
	left    chan struct{} // closed when the member entry is gone
	rewatch chan int64    // the store started over at this revision: followStore watches from it

	down     []cluster.Down // the backends down at start (join applies them)
	startRev int64          // the store revision read at start: followStore watches from it
}

// join starts following the shared config: this instance's member entry
// until shutdown, and the store's changes (Start on a shared config).
func (p *Plane) join(reg prometheus.Registerer) error {
	l := p.link
	reg.MustRegister(l.gauges()...)
	if f := p.startCfg.BlacklistSQLFile; f != "" {
		p.log.Warn("cluster: blacklist_sql_file is not read with a shared config: the SQL blacklist is the one in etcd "+
			"(admin black_sql changes, keyshard config push -blacklist FILE)", zap.String("blacklist_sql_file", f))
	}
	p.mu.Lock()
	p.applyDown(l.down)
	p.mu.Unlock()
	l.down = nil
	// Listed before it serves; if etcd fails just now, the entry comes
	// when it answers.
	run, err := l.store.Register(p.ctx, p.member, l.update, p.log)
	if err != nil {
		close(l.left) // never listed
		return err
	}
	go func() {
		defer close(l.left)
		run()
	}()
	go p.followStore(l.startRev)
	return nil
}

// newClusterLink is the link of a server started on o.State.
func newClusterLink(o ClusterOptions) *clusterLink {
	host, _ := os.Hostname()
	return &clusterLink{store: o.Store, version: o.Version, host: host, doc: o.State.Config,
		configRev: o.State.ConfigRev, blackDoc: o.State.Blacklist, blackRev: o.State.BlacklistRev, applied: o.State.ConfigRev, at: time.Now(),
		rev: o.State.Rev, cluster: o.State.Cluster,
		update: make(chan struct{}, 1), left: make(chan struct{}), rewatch: make(chan int64, 1),
		down: o.State.Down, startRev: o.State.Rev}
}

// gauges are the link's metrics: whether etcd answers, the config
// revision running, and whether a newer one was refused.
func (l *clusterLink) gauges() []prometheus.Collector {
	read := func(f func() float64) func() float64 {
		return func() float64 {
			l.mu.Lock()
			defer l.mu.Unlock()
			return f()
		}
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keyshard_cluster_etcd_up",
			Help: "1 while the shared config in etcd can be read (its last read succeeded), 0 while it cannot (the instance serves on its last config)."},
			read(func() float64 { return boolFloat(l.readErr.IsZero()) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keyshard_cluster_config_revision",
			Help: "The etcd revision of the shared config document this instance runs."},
			read(func() float64 { return float64(l.applied) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keyshard_cluster_config_refused",
			Help: "1 while the newest shared config document was refused by this instance (invalid, or it moves rows): it runs an older one."},
			read(func() float64 { return boolFloat(l.err != "") })),
	}
}

// member is this instance's entry in the member list.
func (p *Plane) member() cluster.Member {
	l := p.link
	l.mu.Lock()
	defer l.mu.Unlock()
	m := p.self(l.host)
	m.Version, m.ConfigRev, m.Applied, m.Error = l.version, l.applied, l.at, l.err
	return m
}

// self is what an entry of this instance says whatever the config's
// source.
func (p *Plane) self(host string) cluster.Member {
	return cluster.Member{Name: p.Name(), Addr: p.startCfg.Addr, WebAddr: p.startCfg.WebAddr, Host: host, PID: os.Getpid(), Started: p.started,
		Version: p.local.Version}
}

// noted records the outcome of applying revision rev (err nil: it runs)
// in the member entry.
func (l *clusterLink) noted(rev int64, err error) {
	l.mu.Lock()
	if err == nil {
		l.applied, l.at, l.err = rev, time.Now(), ""
	} else {
		l.err = fmt.Sprintf("revision %d not applied: %v", rev, err)
	}
	l.mu.Unlock()
	select {
	case l.update <- struct{}{}:
	default:
	}
}

// followStore applies the shared state each time it changes, and reads
// it every resyncEvery in case a change was missed (a watch over a
// connection that broke resumes silently, and on a wiped etcd waits for
// revisions the new one reaches only later): every second while etcd
// cannot be read or has no document. Until the server stops.
func (p *Plane) followStore(rev int64) {
	l := p.link
	wctx, stop := context.WithCancel(p.ctx)
	changed := l.store.Watch(wctx, rev)
	every := resyncEvery
	for {
		select {
		case <-p.ctx.Done():
			stop()
			return
		case rev := <-l.rewatch:
			// The store started over: the watch waits for revisions it
			// will only reach later; watch from where it is now.
			stop()
			wctx, stop = context.WithCancel(p.ctx)
			changed = l.store.Watch(wctx, rev)
		case <-changed:
		case <-time.After(every):
		}
		_, err := p.syncStore(false)
		every = resyncEvery
		if err != nil {
			every = time.Second // etcd lost, or empty: look again soon
		}
	}
}

// resyncEvery: how often an instance reads the shared state whatever
// the watch says (one small read transaction).
const resyncEvery = 5 * time.Second

// syncStore reads the shared state and applies what changed: the config
// document (force: even if unchanged, as forced), the blacklist, the
// backends taken down. If etcd cannot be read the running config stays.
func (p *Plane) syncStore(force bool) ([]string, error) {
	l := p.link
	p.mu.Lock()
	before := l.rev
	p.mu.Unlock()
	st, err := l.store.Read(p.ctx)
	l.mu.Lock()
	switch {
	case err != nil && p.ctx.Err() == nil && time.Since(l.readErr) > 10*time.Second:
		l.readErr = time.Now()
		p.log.Warn("cluster: cannot read the shared config; serving on the last one applied", zap.Error(err))
	case err == nil && !l.readErr.IsZero():
		l.readErr = time.Time{}
		p.log.Info("cluster: the shared config can be read again", zap.String("source", l.store.Source()))
	}
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applyStoreLocked(st, before, force)
}

// applyStoreLocked applies state st (under Plane.mu), read when the
// newest revision this instance knew was before.
func (p *Plane) applyStoreLocked(st cluster.State, before int64, force bool) ([]string, error) {
	l := p.link
	if why := l.replacedBy(st, before); why != "" {
		// etcd was replaced (wiped, restored from a backup): its
		// revisions start over.
		p.log.Warn("cluster: etcd went back in time or is another cluster (wiped or restored?); following it from scratch",
			zap.String("why", why), zap.Uint64("cluster_was", l.cluster), zap.Uint64("cluster", st.Cluster),
			zap.Int64("revision_was", before), zap.Int64("revision", st.Rev),
			zap.Int64("config_revision_was", l.configRev), zap.Int64("config_revision", st.ConfigRev))
		l.cluster, l.rev, l.configRev, l.failedRev, l.blackRev, l.resetRev = st.Cluster, 0, 0, 0, -1, st.Rev
		select { // the newest reset only
		case <-l.rewatch:
		default:
		}
		l.rewatch <- st.Rev
	}
	if st.Rev < l.rev && !force {
		return nil, nil // read before a change this instance wrote or applied since: stale
	}
	l.rev = st.Rev
	l.empty = st.ConfigRev == 0
	if st.ConfigRev == 0 {
		// An empty store (wiped etcd): nothing in it is the operators'
		// word, not even an empty blacklist.
		return nil, fmt.Errorf("%s: %w (keyshard config push FILE URL writes one); the running config stays", l.store.Source(), cluster.ErrNoConfig)
	}
	if st.BlacklistRev != l.blackRev {
		if black, err := blacklist.Parse(st.Blacklist); err != nil {
			p.log.Warn("cluster: the shared blacklist was not applied", zap.Error(err))
		} else {
			p.dp.SetBlacklist(black)
			l.blackDoc, l.blackRev = st.Blacklist, st.BlacklistRev
			p.log.Info("cluster: blacklist applied", zap.Int64("etcd_revision", st.BlacklistRev), zap.Int("entries", len(black.SQLs())))
		}
	}
	var warnings []string
	var err error
	if st.ConfigRev != l.configRev && st.ConfigRev != l.failedRev || force {
		// A document written forced after the one running forces the
		// ones after it too (an admin change may land on top of it
		// before this instance reads it).
		// (A force mark from before a reset, a restored backup's, is
		// history.)
		forced := (st.Forced || l.configRev != 0 && st.ForceRev > l.configRev) && st.ForceRev > l.resetRev
		warnings, err = p.applyDocLocked(st.Config, st.ConfigRev, force || forced)
	}
	p.applyDown(st.Down)
	return warnings, err
}

// applyDocLocked parses and applies the config document doc at etcd
// revision rev (under Plane.mu).
func (p *Plane) applyDocLocked(doc []byte, rev int64, force bool) ([]string, error) {
	l := p.link
	cfg, warnings, err := config.Parse(doc, l.store.Source())
	if err == nil {
		err = p.local.Apply(cfg)
	}
	if err == nil {
		var more []string
		p.docRev = rev
		more, err = p.reloadLocked(cfg, nil, force)
		p.docRev = 0
		warnings = append(warnings, more...)
	} else {
		p.reloadErrors.Add(1)
		p.log.Warn("cluster: the shared config is not valid and was not applied; the running config stays",
			zap.Int64("etcd_revision", rev), zap.Error(err))
	}
	l.noted(rev, err)
	if err != nil {
		l.failedDoc, l.failedRev = doc, rev
		return warnings, err
	}
	l.doc, l.configRev, l.failedDoc, l.failedRev = doc, rev, nil, 0
	return warnings, nil
}

// replacedBy says what in st, read when the newest revision this instance
// knew was before, shows that etcd is no longer the one it followed
// (wiped, or restored from a backup): "" if nothing does.
//
// A wiped etcd on the same addresses keeps its cluster id, and its
// revision going back tells only if this instance had seen more
// revisions than the new etcd has made by the time it reads it: one that
// started (or lagged) just before the wipe may not have. Then the
// documents tell: in the history of one etcd a key's modification
// revision never goes back, and one revision holds one value. Without
// this, a document pushed to the new etcd at the revision of the one
// this instance runs (the first write of a fresh etcd is revision 2 on
// both) would be taken for it, and never applied.
func (l *clusterLink) replacedBy(st cluster.State, before int64) string {
	switch {
	case st.Cluster != l.cluster:
		return "another cluster id"
	case st.Rev < before:
		return "the store's revision went back"
	case st.Rev < l.rev:
		return "" // read before a change this instance made since: stale, it proves nothing
	case otherValue(st.ConfigRev, st.Config, l.configRev, l.doc) || otherValue(st.ConfigRev, st.Config, l.failedRev, l.failedDoc):
		return "the config document's revision went back, or the same revision holds another document"
	case otherValue(st.BlacklistRev, st.Blacklist, l.blackRev, l.blackDoc):
		return "the blacklist's revision went back, or the same revision holds another blacklist"
	}
	return ""
}

// otherValue reports whether a key read (not stale) at modification
// revision rev with value v cannot be, in the same etcd history, the key
// this instance knew at revision known with value was: it is older, or
// as old with another value. Revision 0 is no key (or none known): a
// deleted key proves nothing.
func otherValue(rev int64, v []byte, known int64, was []byte) bool {
	return rev > 0 && known > 0 && (rev < known || rev == known && !bytes.Equal(v, was))
}

// applyDown puts the backends in marks out of service and every other
// one back (under Plane.mu): in a cluster, the marks in etcd are the
// operators' word. A mark for a backend the config lacks is ignored.
func (p *Plane) applyDown(marks []cluster.Down) {
	want := map[string]bool{}
	for _, d := range marks {
		want[d.Node+"\x00"+d.Role+"\x00"+d.Addr] = true
	}
	for name, n := range p.dp.Nodes() {
		for _, bp := range n.Pools() {
			if down := want[name+"\x00"+bp.Role().String()+"\x00"+bp.Addr()]; down != bp.AdminDown() {
				bp.SetAdminDown(down)
			}
		}
	}
}

// SharedError is a change the shared config did not take. Busy: it
// conflicts with the shared state (a race lost again and again, this
// instance behind the newest document, no document at all): the REST API
// answers 409. Else etcd could not be reached: 503.
type SharedError struct {
	Busy bool
	msg  string
	err  error
}

func (e *SharedError) Error() string { return e.msg }
func (e *SharedError) Unwrap() error { return e.err }

// noDocument is the refusal of a change while the store has no document.
func (l *clusterLink) noDocument() error {
	return &SharedError{Busy: true, msg: fmt.Sprintf("keyshard: nothing changed: %s has no config document (wiped?): "+
		"push one first (keyshard config push)", l.store.Source())}
}

// sharedTries: a change that lost the compare-and-swap this many
// times is reported instead of tried again.
const sharedTries = 10

// shared runs try, which writes one change to the shared store with a
// compare-and-swap, until it does not lose to another writer: after a
// lost race the newest state is applied and try runs again on it.
func (p *Plane) shared(try func() error) error {
	for i := 1; ; i++ {
		err := try()
		if !errors.Is(err, cluster.ErrConflict) {
			return err
		}
		if i == sharedTries {
			return &SharedError{Busy: true, msg: fmt.Sprintf("keyshard: nothing changed: the shared config at %s changed under this change %d times in a row "+
				"(other instances or operators writing); try again", p.link.store.Source(), sharedTries)}
		}
		if _, err := p.syncStore(false); err != nil && errors.Is(err, cluster.ErrNoConfig) {
			return p.link.noDocument()
		}
		// Writers that keep colliding (each instance's edits are one at
		// a time, so these are other instances') draw apart.
		time.Sleep(time.Duration(1+rand.IntN(10*i)) * time.Millisecond)
	}
}

// storeErr is an etcd failure while making a change: nothing changed
// here (a request that timed out may still have reached etcd: then every
// instance applies it when it sees it).
func (p *Plane) storeErr(err error) error {
	if errors.Is(err, cluster.ErrConflict) {
		return err
	}
	return &SharedError{err: err, msg: "keyshard: nothing changed here: the shared config cannot be written (if etcd took the write after all, " +
		"every instance applies it when it can read it): " + err.Error()}
}

// changeShared is change for a server on a shared config: edit is applied
// to the running config, the result written into the document at the
// revision it came from (compare-and-swap), then applied here; the other
// instances apply it when they see it.
func (p *Plane) changeShared(edit func(*config.Config) error) error {
	l := p.link
	return p.shared(func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if l.empty {
			return l.noDocument()
		}
		if l.failedRev != 0 {
			// Its compare-and-swap would lose to the newer document for
			// ever: say why instead.
			l.mu.Lock()
			why := l.err
			l.mu.Unlock()
			return &SharedError{Busy: true, msg: fmt.Sprintf("keyshard: nothing changed: this instance runs revision %d of the shared config, "+
				"and the newest, %d, was not applied (%s). Fix the document (keyshard config push) or apply it (ADMIN RELOAD FORCE) first",
				l.configRev, l.failedRev, why)}
		}
		cfg := p.dp.Config().Clone()
		if err := edit(cfg); err != nil {
			return err
		}
		if err := cfg.Validate(); err != nil {
			return argErr("keyshard: the change would make the config invalid, nothing changed: %v", err)
		}
		doc, err := cfg.Rewrite(l.doc)
		var next *config.Config
		if err == nil {
			next, _, err = config.Parse(doc, l.store.Source()) // as every instance will read it
		}
		if err == nil {
			err = p.local.Apply(next)
		}
		if err != nil {
			return argErr("keyshard: the change would make the shared config invalid, nothing changed: %v", err)
		}
		rev, err := l.store.PutConfig(p.ctx, doc, l.configRev, l.doc, false)
		if err != nil {
			return p.storeErr(err)
		}
		l.rev = rev
		_, err = p.reloadLocked(next, p.dp.Blacklist(), false)
		l.noted(rev, err)
		if err != nil {
			l.failedDoc, l.failedRev = doc, rev
			return fmt.Errorf("keyshard: the change is in the shared config (revision %d), but this instance did not apply it: %w", rev, err)
		}
		l.doc, l.configRev = doc, rev
		return nil
	})
}

// setBlackShared is setBlack for a server on a shared config.
func (p *Plane) setBlackShared(edit func(*blacklist.List) (*blacklist.List, error)) error {
	l := p.link
	return p.shared(func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if l.empty {
			return l.noDocument()
		}
		nb, err := edit(p.dp.Blacklist())
		if err != nil {
			return err
		}
		data := nb.File()
		rev, err := l.store.PutBlacklist(p.ctx, data, l.blackRev, l.blackDoc)
		if err != nil {
			return p.storeErr(err)
		}
		p.dp.SetBlacklist(nb)
		l.blackDoc, l.blackRev, l.rev = data, rev, rev
		return nil
	})
}

// setDownShared records an operator's down/up of a backend in the shared
// store (under Plane.mu), for every instance.
func (p *Plane) setDownShared(node, role, addr string, down bool, by Actor) error {
	if p.link.empty {
		return p.link.noDocument()
	}
	d := cluster.Down{Node: node, Role: role, Addr: addr, By: by.User + " via " + by.Via + " on " + p.Name(), At: time.Now()}
	rev, err := p.link.store.SetDown(p.ctx, d, down)
	if err != nil {
		return p.storeErr(err)
	}
	p.link.rev = max(p.link.rev, rev)
	return nil
}

// reloadShared is ReloadFile for a server on a shared config: the newest
// document is read and applied. force writes it back marked as forced,
// so that every instance applies it even if it moves existing rows.
func (p *Plane) reloadShared(force bool) ([]string, error) {
	l := p.link
	if force {
		st, err := l.store.Read(p.ctx)
		if err != nil {
			return nil, p.storeErr(err)
		}
		if st.ConfigRev == 0 {
			return nil, fmt.Errorf("%s: %w", l.store.Source(), cluster.ErrNoConfig)
		}
		if _, err := l.store.PutConfig(p.ctx, st.Config, st.ConfigRev, st.Config, true); err != nil {
			return nil, p.storeErr(err)
		}
	}
	// A document refused before is tried again (and its error returned).
	p.mu.Lock()
	l.failedRev = 0
	p.mu.Unlock()
	return p.syncStore(force)
}

// Leave removes this instance from the member list (Shutdown, once the
// server's context is done), waiting at most a second, and closes the
// store. Nothing on a config read from a file.
func (p *Plane) Leave() {
	if p.link == nil {
		return
	}
	select {
	case <-p.link.left:
	case <-time.After(time.Second):
	}
	_ = p.link.store.Close()
}

// Proxy is one keyshard instance of the cluster for SHOW PROXIES and the
// REST API.
type Proxy struct {
	cluster.Member
	Self bool `json:"self"` // the instance answering
	// Current: it runs the newest config document; false flags an
	// instance behind (its config_error says why, if it refused it).
	Current bool   `json:"current"`
	Latest  int64  `json:"latest_revision"` // the newest document's revision
	Uptime  string `json:"uptime"`
}

// Proxies lists the live instances sharing this one's config (only this
// one when the config is a file).
func (p *Plane) Proxies(ctx context.Context) ([]Proxy, error) {
	if p.link == nil {
		rev, applied := p.dp.Revision()
		host, _ := os.Hostname()
		m := p.self(host)
		m.ConfigRev, m.Applied = rev, applied
		return []Proxy{{Member: m, Self: true, Current: true, Latest: rev, Uptime: uptime(p.started)}}, nil
	}
	members, latest, err := p.link.store.Members(ctx)
	if err != nil {
		return nil, &SharedError{err: err, msg: "keyshard: the member list cannot be read: " + err.Error()}
	}
	out := make([]Proxy, 0, len(members))
	for _, m := range members {
		out = append(out, Proxy{Member: m, Self: m.Name == p.Name() && m.PID == os.Getpid(), Current: m.ConfigRev == latest,
			Latest: latest, Uptime: uptime(m.Started)})
	}
	return out, nil
}
