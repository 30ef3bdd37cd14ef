package control

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/hold"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// DataPlane is what the control plane drives: the running snapshot and
// what it is built from (proxy.Server implements it).
type DataPlane interface {
	// Config returns the running configuration (not to be modified).
	Config() *config.Config
	// Nodes returns the running backend nodes by name (not to be modified).
	Nodes() map[string]*backend.Node
	// Running returns the running configuration and its nodes, of one
	// snapshot (Config and Nodes, called one after the other, may see a
	// reload in between).
	Running() (*config.Config, map[string]*backend.Node)
	// Revision is the running config's: configs applied since start (1:
	// the first), and when it was.
	Revision() (rev int64, applied time.Time)
	// Blacklist returns the running SQL blacklist.
	Blacklist() *blacklist.List
	// SetBlacklist swaps in the SQL blacklist b.
	SetBlacklist(b *blacklist.List)
	// Apply builds a snapshot from the validated cfg and swaps it in with
	// the blacklist black; the nodes it no longer uses drain. The SQL log,
	// the digests and the result cache take cfg's settings. An error
	// changes nothing.
	Apply(cfg *config.Config, black *blacklist.List) (Applied, error)
	// Closed is the error a change gets once shutdown has begun (nil
	// before).
	Closed() error
	// PoolOptions are the pool options of node n in cfg (for the failover
	// monitor's own connections).
	PoolOptions(cfg *config.Config, n *config.NodeConfig) backend.Options
	// ResetDigests drops every statement digest.
	ResetDigests()
	// Conns is how many client connections are open; Sessions how many
	// of them are logged in.
	Conns() int64
	Sessions() int
	// ResolveXA finishes the XA transaction xid by hand (see
	// Controls.ResolveXA).
	ResolveXA(ctx context.Context, xid string, commit bool) (int, error)
	// Hold pauses the statements on tables ("db.table") for a layout
	// switch (proxy/hold); Unhold lets them go.
	Hold(tables []string) *hold.Gate
	Unhold(g *hold.Gate)
}

// Applied is what DataPlane.Apply did.
type Applied struct {
	Revision int64 // of the config now running
	Nodes    int   // nodes it runs
	Drained  int   // nodes (and backend users' views of them) left to drain
}

// Plane is the control plane of one server.
type Plane struct {
	dp  DataPlane
	log *zap.Logger
	ctx context.Context // the server's: done at shutdown

	mu           sync.Mutex // one reload or admin change at a time
	reloads      atomic.Int64
	reloadErrors atomic.Int64
	adminChanges atomic.Int64 // changes through admin SQL and REST (Controls)
	lastReload   atomic.Int64 // unix nanos
	started      time.Time
	startCfg     *config.Config // the config at start: what listeners and logs run with
	local        config.Local   // this instance's own settings (flags, environment), over every config loaded
	offline      atomic.Bool    // admin 'change proxy offline': new connections refused
	link         *clusterLink   // the shared config in etcd; nil: the config is a file
	// docRev is the etcd revision of the shared document being applied
	// (under mu; 0: none): the reload's log line names it, as SHOW
	// PROXIES does.
	docRev int64
	// savedSum is the hash of the config file as keyshard itself last
	// wrote it (admin save, a failover): the file watcher does not
	// reload what runs already.
	savedSum atomic.Pointer[string]
	reshard  reshards // the online reshard this instance runs (reshard.go)
}

// New is the control plane of dp, started on cfg. o is nil for a config
// read from a file; else the config is o.State's document, shared in etcd
// (o.Local is then this instance's settings). Nothing runs until Start.
// ctx ends when the server shuts down.
func New(ctx context.Context, dp DataPlane, cfg *config.Config, log *zap.Logger, o *ClusterOptions) *Plane {
	p := &Plane{dp: dp, log: log, ctx: ctx, started: time.Now(), startCfg: cfg}
	if o != nil {
		p.link = newClusterLink(*o)
		p.local = o.Local
	}
	return p
}

// Start registers the control plane's metrics with reg and starts its
// work: the failover monitor, and the file watcher or (on a shared
// config) the member entry and the following of the store. If it fails
// (etcd), the caller shuts the server down.
func (p *Plane) Start(reg prometheus.Registerer) error {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keyshard_online", Help: "1 while the proxy accepts new connections, 0 after admin 'change proxy offline'."},
			func() float64 { return boolFloat(!p.offline.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_config_reloads_total", Help: "Config reloads applied after start (SIGHUP, admin reload, REST, file change); admin changes are keyshard_admin_changes_total."},
			func() float64 { return float64(p.reloads.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_admin_changes_total", Help: "Changes made through admin SQL or the REST API (each logged with what changed, the user and the interface)."},
			func() float64 { return float64(p.adminChanges.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_config_reload_errors_total", Help: "Reloads refused (invalid file or blacklist); the running configuration stayed."},
			func() float64 { return float64(p.reloadErrors.Load()) }),
	)
	fm := newFailoverMonitor(p, reg) // its metrics are registered before Start returns
	go fm.run()
	if p.link == nil {
		if src := p.startCfg.Source(); src != "" {
			go p.watchConfig(fileSum(src))
		}
		return nil
	}
	return p.join(reg)
}

// Exclusive runs f with no reload or change in progress, and none
// starting until f returns (Shutdown: no reload starts a drain or swaps
// in nodes after it began).
func (p *Plane) Exclusive(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

// Online reports whether new connections are accepted.
func (p *Plane) Online() bool { return !p.offline.Load() }

// SetLocal records this instance's own settings (flags, environment),
// already applied to the config the server started with: each reload
// applies them again over the file.
func (p *Plane) SetLocal(l config.Local) { p.local = l }

// Name is the instance's name (-name, KEYSHARD_NAME; else the host name).
func (p *Plane) Name() string { return p.local.Name }

// Status is the proxy's state for SHOW PROXY STATUS and the REST API.
type Status struct {
	Name         string    `json:"name"`   // the instance's (-name)
	State        string    `json:"status"` // online | offline (kingshard's answer)
	Online       bool      `json:"online"`
	Started      time.Time `json:"started"`
	Uptime       string    `json:"uptime"`
	Connections  int64     `json:"connections"` // client connections open
	Sessions     int       `json:"sessions"`    // authenticated sessions
	Nodes        int       `json:"nodes"`
	Reloads      int64     `json:"reloads"`       // config reloads applied since start (SIGHUP, admin reload, REST, file change)
	AdminChanges int64     `json:"admin_changes"` // changes made through admin SQL or REST
	ReloadErrors int64     `json:"reload_errors"`
	LastReload   string    `json:"last_reload"` // RFC 3339, "" if none
	ConfigFile   string    `json:"config_file"`
	Goroutines   int       `json:"goroutines"`
}

// Status returns the proxy's state.
func (p *Plane) Status() Status {
	st := Status{
		Name: p.Name(), State: "online", Online: p.Online(), Started: p.started, Uptime: uptime(p.started),
		Connections: p.dp.Conns(), Nodes: len(p.dp.Nodes()), Reloads: p.reloads.Load(), AdminChanges: p.adminChanges.Load(),
		ReloadErrors: p.reloadErrors.Load(), ConfigFile: p.dp.Config().Source(), Goroutines: runtime.NumGoroutine(),
	}
	if !st.Online {
		st.State = "offline"
	}
	st.Sessions = p.dp.Sessions()
	if t := p.lastReload.Load(); t != 0 {
		st.LastReload = time.Unix(0, t).Format(time.RFC3339)
	}
	return st
}

func uptime(t time.Time) string { return time.Since(t).Round(time.Second).String() }

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
