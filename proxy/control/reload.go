package control

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
)

// restartKeys are the settings a reload cannot change in a running
// process: listeners, TLS and RSA keys, the log files, the proxy charset.
var restartKeys = []struct {
	key string
	get func(*config.Config) any
}{
	{"addr", func(c *config.Config) any { return c.Addr }},
	{"web_addr", func(c *config.Config) any { return c.WebAddr }},
	{"prometheus_addr", func(c *config.Config) any { return c.PrometheusAddr }},
	{"tls_cert", func(c *config.Config) any { return c.TLSCert }},
	{"tls_key", func(c *config.Config) any { return c.TLSKey }},
	{"rsa_key", func(c *config.Config) any { return c.RSAKey }},
	{"proxy_charset", func(c *config.Config) any { return c.ProxyCharset }},
	{"log_path", func(c *config.Config) any { return c.LogPath }},
	{"log_level", func(c *config.Config) any { return c.LogLevel }},
	{"max_procs", func(c *config.Config) any { return c.MaxProcs }},
	{"xa_log_db", func(c *config.Config) any { return c.XALogDB }},
}

// Pending is a setting whose running value is not the config's: it takes
// effect after a restart.
type Pending struct {
	Key        string `json:"key"`
	Running    string `json:"running"`
	Configured string `json:"configured"`
}

// PendingRestart lists the settings whose value in the running config is
// not the one running: they need a restart (restartKeys). Each reload
// warns of them.
func (p *Plane) PendingRestart() []Pending {
	return p.pendingIn(p.dp.Config())
}

// pendingIn lists the settings of cfg that differ from those running and
// need a restart.
func (p *Plane) pendingIn(cfg *config.Config) []Pending {
	var out []Pending
	for _, k := range restartKeys {
		if a, b := k.get(p.startCfg), k.get(cfg); a != b {
			out = append(out, Pending{Key: k.key, Running: fmt.Sprint(a), Configured: fmt.Sprint(b)})
		}
	}
	return out
}

// Reload swaps in cfg (from config.Parse, which validated it): new
// sessions and the next statement of every session outside a transaction
// use it. Nodes that changed or were removed are drained: their
// statements in flight finish, then their pools close. The SQL blacklist
// is read again from blacklist_sql_file. It returns warnings for settings
// that need a restart.
//
// A config that changes where the rows of an existing sharded table are
// looked for (its key, type, nodes, sub-tables, limits) is refused with a
// *PlacementError unless force is set: rows already written would look
// lost.
func (p *Plane) Reload(cfg *config.Config, force bool) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reloadLocked(cfg, nil, force)
}

// Apply swaps in cfg (validated) as an admin change does: the path of
// Reload (the placement check, refused with a *PlacementError unless
// force; the drain of the nodes no longer used), keeping the SQL
// blacklist as it is in memory. It is not counted or logged as a reload:
// the caller says what it changed. It returns warnings for settings that
// need a restart. On a shared config it is refused: the instances apply
// what the etcd document says (keyshard config push writes it), and one
// that ran another config would differ from the others unseen.
func (p *Plane) Apply(cfg *config.Config, force bool) ([]string, error) {
	if p.link != nil {
		return nil, argErr("keyshard: this instance runs the shared config %s; apply a config there (keyshard config push), "+
			"not to one instance", p.link.store.Source())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reloadLocked(cfg, p.dp.Blacklist(), force)
}

// PlacementError refuses a config that would move existing rows out of
// reach (see Reload).
type PlacementError struct{ Changes []string }

func (e *PlacementError) Error() string {
	return "keyshard: the new config changes where the rows of existing sharded tables are looked for, and was not applied: " +
		strings.Join(e.Changes, "; ") + ". Rows already written would be looked for in other sub-tables and seem lost. " +
		"To move them while they serve, run ADMIN RESHARD START: it copies them to the new layout and switches to it. " +
		"Or move them yourself first, then apply the config deliberately: ADMIN RELOAD FORCE, or PUT /api/v1/proxy/config/reload?force=1 " +
		"(a SIGHUP or the file watcher never forces)"
}

// PlacementChanges describes how next would move the rows of the sharded
// tables of old: a config Reload refuses unless forced (for keyshard
// config push).
func PlacementChanges(old, next *config.Config) []string {
	var out []string
	for i := range next.SchemaList {
		sc := &next.SchemaList[i]
		prev, ok := old.SchemaFor(sc.User)
		if !ok {
			continue
		}
		for _, c := range router.PlacementChanges(prev.RouteConfig(), sc.RouteConfig()) {
			out = append(out, "user "+sc.User+", "+c)
		}
	}
	return out
}

// change applies edit to a copy of the running config, validates the
// result and swaps it in (keeping the SQL blacklist as it is in memory).
// If edit or validation fails, nothing changes. It is not a reload: the
// caller (Controls) logs and counts it.
func (p *Plane) change(edit func(*config.Config) error) error {
	if p.link != nil {
		return p.changeShared(edit)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cfg := p.dp.Config().Clone()
	if err := edit(cfg); err != nil {
		return err
	}
	if err := cfg.Validate(); err != nil {
		return argErr("keyshard: the change would make the config invalid, nothing changed: %v", err)
	}
	_, err := p.reloadLocked(cfg, p.dp.Blacklist(), false)
	return err
}

// reloadLocked applies cfg with the SQL blacklist black (nil: read from
// blacklist_sql_file: a reload, counted and logged as such; else an admin
// change).
func (p *Plane) reloadLocked(cfg *config.Config, black *blacklist.List, force bool) ([]string, error) {
	reload := black == nil
	if err := p.dp.Closed(); err != nil {
		return nil, err
	}
	changes := PlacementChanges(p.dp.Config(), cfg)
	if len(changes) > 0 {
		if !force {
			p.failedReload(reload)
			err := &PlacementError{Changes: changes}
			p.log.Warn("config not applied; the running config is unchanged", zap.String("source", cfg.Source()), zap.Error(err))
			return nil, err
		}
		p.log.Warn("config forced: existing rows of sharded tables may now be looked for elsewhere",
			zap.String("source", cfg.Source()), zap.Strings("changes", changes))
	}
	var warnings []string
	if force {
		// What the force strands, for the client too (SHOW WARNINGS).
		for _, c := range changes {
			warnings = append(warnings, "forced: "+c+": rows already written are now looked for in other sub-tables and may seem lost until moved")
		}
	}
	var err error
	if black == nil && p.link != nil {
		black = p.dp.Blacklist() // the shared one, applied apart (applyStoreLocked)
	}
	if black == nil {
		if black, err = blacklist.Load(cfg.BlacklistSQLFile); err != nil {
			p.failedReload(reload)
			return nil, fmt.Errorf("blacklist_sql_file: %w", err)
		}
	}
	for _, pd := range p.pendingIn(cfg) {
		warnings = append(warnings, pendingWarning(pd))
	}
	a, err := p.dp.Apply(cfg, black)
	if err != nil {
		p.failedReload(reload)
		p.log.Warn("config not applied; the running config is unchanged", zap.String("source", cfg.Source()), zap.Error(err))
		return nil, err
	}
	if reload {
		p.reloads.Add(1)
		p.lastReload.Store(time.Now().UnixNano())
		// revision: what SHOW PROXIES says (the shared document's etcd
		// revision, or the configs applied since start for a file).
		rev := zap.Int64("revision", a.Revision)
		if p.docRev != 0 {
			rev = zap.Int64("revision", p.docRev)
		}
		p.log.Info("config reloaded", zap.String("source", cfg.Source()), rev, zap.Int64("applied", a.Revision), zap.Int("nodes", a.Nodes),
			zap.Int("drained", a.Drained), zap.Strings("warnings", warnings))
	}
	return warnings, nil
}

// pendingWarning is a reload's warning of a setting that needs a restart;
// an empty value says "not set" (not a blank).
func pendingWarning(pd Pending) string {
	shown := func(v string) string {
		if v == "" {
			return "not set"
		}
		return v
	}
	return fmt.Sprintf("%s changed (%s running, %s in the config): takes effect after a restart", pd.Key, shown(pd.Running), shown(pd.Configured))
}

// failedReload counts a reload refused (not an admin change: its caller
// gets the error).
func (p *Plane) failedReload(reload bool) {
	if reload {
		p.reloadErrors.Add(1)
	}
}

// ReloadFile reads, parses and validates the config file the running
// config came from, and reloads it. An invalid file changes nothing.
// force applies a config that moves existing rows (see Reload). On a
// shared config, the newest document in etcd is read and applied.
func (p *Plane) ReloadFile(force bool) ([]string, error) {
	if p.link != nil {
		return p.reloadShared(force)
	}
	path := p.dp.Config().Source()
	cfg, warnings, err := config.Load(path)
	if err == nil {
		err = p.local.Apply(cfg) // this instance's own addresses stay
	}
	if err != nil {
		p.reloadErrors.Add(1)
		p.log.Warn("config reload failed; the running config is unchanged", zap.String("source", path), zap.Error(err))
		return warnings, err
	}
	more, err := p.Reload(cfg, force)
	return append(warnings, more...), err
}

// watchConfig reloads the config file when its content changes, checked
// every config_watch_interval (read from the running config, so a reload
// can turn it on or off). It runs until the server shuts down.
// lastSum is the hash of the file as loaded.
func (p *Plane) watchConfig(lastSum string) {
	var lastMod time.Time
	var lastSize int64
	for {
		d := p.dp.Config().ConfigWatchInterval.D()
		on := d > 0
		if !on {
			d = time.Second
		}
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(d):
		}
		path := p.dp.Config().Source()
		fi, err := os.Stat(path)
		if err != nil || !on || fi.ModTime().Equal(lastMod) && fi.Size() == lastSize {
			continue
		}
		lastMod, lastSize = fi.ModTime(), fi.Size()
		sum := fileSum(path)
		if saved := p.savedSum.Load(); sum == lastSum || saved != nil && *saved == sum {
			lastSum = sum // keyshard's own write: what runs
			continue
		}
		lastSum = sum
		p.log.Info("config file changed; reloading", zap.String("source", path))
		_, _ = p.ReloadFile(false)
	}
}

// fileSum is a hash of the file's content ("" if unreadable).
func fileSum(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	h := sha256.Sum256(b)
	return string(h[:])
}

// wroteConfig records the config file at path as keyshard wrote it, so
// that the file watcher does not reload it.
func (p *Plane) wroteConfig(path string) {
	sum := fileSum(path)
	p.savedSum.Store(&sum)
}
