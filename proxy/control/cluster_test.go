package control

import (
	"slices"
	"testing"

	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/cluster"
	"github.com/keyshard/keyshard/proxy/config"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// linkedPlane is the control plane of a server on a shared config
// started on st, without its member entry and without following the
// store (no etcd: the test hands it the states it reads).
func linkedPlane(t *testing.T, st cluster.State) (*Plane, *fakeData, *observer.ObservedLogs) {
	t.Helper()
	store, err := cluster.Open("etcd://127.0.0.1:1/unit", cluster.Options{}) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Parse(st.Config, store.Source())
	if err != nil {
		t.Fatal(err)
	}
	black, err := blacklist.Parse(st.Blacklist)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	dp := &fakeData{cfg: cfg, black: black}
	p := New(t.Context(), dp, cfg, zap.New(core), &ClusterOptions{Store: store, State: st})
	close(p.link.left) // never listed
	t.Cleanup(p.Leave)
	return p, dp, logs
}

// An instance tells a replaced etcd (wiped, or restored from a backup) by
// its revision going back, or, when it had seen fewer revisions than the
// new etcd has made by the time it reads it, by a document that cannot be
// the one it knew at that revision; then it applies what the new etcd
// holds even if the revision numbers match what it ran. A read from before
// a change it made itself is stale, not a replaced etcd.
func TestClusterReplacedStore(t *testing.T) {
	const id = 7
	d0 := []byte(failoverYAML)
	d1 := []byte(failoverYAML + "slow_log_time: 321\n")
	d2 := []byte(failoverYAML + "slow_log_time: 50\n")
	// Each instance starts on the first document of a fresh etcd
	// (revision 2), read at revision 3 after another instance registered.
	start := cluster.State{Rev: 3, Cluster: id, Config: d0, ConfigRev: 2, Blacklist: []byte("select 1\n"), BlacklistRev: 2}
	for _, c := range []struct {
		name   string
		setup  func(l *clusterLink) // what it did since it started
		st     cluster.State        // what it reads
		before int64                // the newest revision it knew when it read (0: l.rev)
		reset  bool                 // it starts over
		slow   int                  // the slow_log_time it runs after
		black  []string
	}{
		{name: "the new etcd's first document, at the revision of the one it runs (the flaky e2e)",
			st: cluster.State{Rev: 4, Cluster: id, Config: d1, ConfigRev: 2}, reset: true, slow: 321},
		{name: "the same, the blacklist pushed with it",
			st:    cluster.State{Rev: 4, Cluster: id, Config: d1, ConfigRev: 2, Blacklist: []byte("select 2\n"), BlacklistRev: 2},
			reset: true, slow: 321, black: []string{"select 2"}},
		{name: "a document older than the one it runs",
			setup: func(l *clusterLink) { l.doc, l.configRev, l.rev = d2, 5, 6 },
			st:    cluster.State{Rev: 6, Cluster: id, Config: d1, ConfigRev: 3}, reset: true, slow: 321},
		{name: "a document older than the one it refused",
			setup: func(l *clusterLink) { l.failedDoc, l.failedRev, l.rev = d2, 5, 6 },
			st:    cluster.State{Rev: 6, Cluster: id, Config: d1, ConfigRev: 3}, reset: true, slow: 321},
		{name: "another document at the revision it refused",
			setup: func(l *clusterLink) { l.failedDoc, l.failedRev, l.rev = d2, 5, 6 },
			st:    cluster.State{Rev: 6, Cluster: id, Config: d1, ConfigRev: 5}, reset: true, slow: 321},
		{name: "the same document, another blacklist at the revision of its own",
			st:    cluster.State{Rev: 4, Cluster: id, Config: d0, ConfigRev: 2, Blacklist: []byte("select 2\n"), BlacklistRev: 2},
			reset: true, black: []string{"select 2"}},
		{name: "the store's revision gone back",
			setup: func(l *clusterLink) { l.rev = 40 },
			st:    cluster.State{Rev: 4, Cluster: id, Config: d0, ConfigRev: 2}, reset: true},
		{name: "another cluster",
			st: cluster.State{Rev: 4, Cluster: id + 1, Config: d0, ConfigRev: 2}, reset: true},
		{name: "no document (wiped, not pushed yet): nothing proved",
			st: cluster.State{Rev: 4, Cluster: id}, black: []string{"select 1"}},
		{name: "the same document and blacklist, read again",
			st:    cluster.State{Rev: 9, Cluster: id, Config: d0, ConfigRev: 2, Blacklist: []byte("select 1\n"), BlacklistRev: 2},
			black: []string{"select 1"}},
		{name: "a newer document",
			st:   cluster.State{Rev: 9, Cluster: id, Config: d1, ConfigRev: 8, Blacklist: []byte("select 1\n"), BlacklistRev: 2},
			slow: 321, black: []string{"select 1"}},
		// It wrote d2 at revision 8 while reading: the read shows the
		// document before it.
		{name: "a read from before its own change",
			setup:  func(l *clusterLink) { l.doc, l.configRev, l.rev = d2, 8, 8 },
			st:     cluster.State{Rev: 5, Cluster: id, Config: d0, ConfigRev: 2, Blacklist: []byte("select 1\n"), BlacklistRev: 2},
			before: 3, black: []string{"select 1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, dp, logs := linkedPlane(t, start)
			l := p.link
			p.mu.Lock()
			defer p.mu.Unlock()
			if c.setup != nil {
				c.setup(l)
			}
			before := c.before
			if before == 0 {
				before = l.rev
			}
			_, _ = p.applyStoreLocked(c.st, before, false)
			warned := logs.FilterMessageSnippet("following it from scratch").Len() > 0
			var rewatch int64
			select {
			case rewatch = <-l.rewatch:
			default:
			}
			if warned != c.reset || (rewatch != 0) != c.reset || c.reset && (rewatch != c.st.Rev || l.resetRev != c.st.Rev) {
				t.Errorf("started over: warned %v, watch from %d, reset revision %d; want %v (at %d)", warned, rewatch, l.resetRev, c.reset, c.st.Rev)
			}
			if got := dp.Config().SlowLogTime; got != c.slow {
				t.Errorf("slow_log_time %d, want %d", got, c.slow)
			}
			if c.slow == 321 && l.configRev != c.st.ConfigRev {
				t.Errorf("config revision %d, want %d", l.configRev, c.st.ConfigRev)
			}
			if c.black != nil && !slices.Equal(dp.Blacklist().SQLs(), c.black) {
				t.Errorf("blacklist %q, want %q", dp.Blacklist().SQLs(), c.black)
			}
			if t.Failed() {
				for _, e := range logs.All() {
					t.Logf("%s %v", e.Message, e.ContextMap())
				}
			}
		})
	}
}
