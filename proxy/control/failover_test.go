package control

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/hold"
	"go.uber.org/zap"
)

func TestFailoverDue(t *testing.T) {
	const after = 10 * time.Second
	for _, c := range []struct {
		name      string
		after     time.Duration
		h         backend.Health
		adminDown bool
		downFor   time.Duration
		want      bool
	}{
		{"down long enough", after, backend.Down, false, after, true},
		{"down longer", after, backend.Down, false, time.Hour, true},
		{"down shorter than failover_after", after, backend.Down, false, after - time.Millisecond, false},
		{"up", after, backend.Up, false, time.Hour, false},
		// An operator's admin node down never triggers a failover.
		{"admin down", after, backend.Down, true, time.Hour, false},
		{"failover_after off", 0, backend.Down, false, time.Hour, false},
	} {
		if got := failoverDue(c.after, c.h, c.adminDown, c.downFor); got != c.want {
			t.Errorf("%s: due %v, want %v", c.name, got, c.want)
		}
	}
}

func TestChooseMaster(t *testing.T) {
	readOnly := backend.ServerRole{ReadOnly: true, Replicating: true, Source: "10.0.0.1:3306"}
	promoted := backend.ServerRole{}
	// read_only forgotten on a replica that still replicates (its IO
	// thread retrying the dead master): not promoted.
	replicating := backend.ServerRole{Replicating: true, Source: "10.0.0.1:3306"}
	// Stopped but still read-only: the promotion is not finished.
	stopped := backend.ServerRole{ReadOnly: true}
	gone := errors.New("connection refused")
	for _, c := range []struct {
		name     string
		answers  []roleAnswer
		action   failoverAction
		to       string
		writable []string
	}{
		{"no replica", nil, failoverWait, "", nil},
		{"none writable", []roleAnswer{{Addr: "b", Role: readOnly}, {Addr: "c", Role: stopped}}, failoverWait, "", nil},
		{"one writable", []roleAnswer{{Addr: "b", Role: readOnly}, {Addr: "c", Role: promoted}}, failoverFollow, "c", nil},
		{"two writable", []roleAnswer{{Addr: "b", Role: promoted}, {Addr: "c", Role: promoted}, {Addr: "d", Role: readOnly}},
			failoverRefuse, "", []string{"b", "c"}},
		{"writable but replicating", []roleAnswer{{Addr: "b", Role: replicating}}, failoverWait, "", nil},
		{"writable but replicating, and one promoted", []roleAnswer{{Addr: "b", Role: replicating}, {Addr: "c", Role: promoted}},
			failoverFollow, "c", nil},
		// A replica that does not answer is no candidate, whatever its
		// role was before.
		{"unreachable", []roleAnswer{{Addr: "b", Role: promoted, Err: gone}}, failoverWait, "", nil},
		// One that does not answer might be writable too: no choice.
		{"unreachable and one promoted", []roleAnswer{{Addr: "b", Err: gone}, {Addr: "c", Role: promoted}}, failoverWait, "", nil},
		// One an operator took down is never chosen; dead, it holds
		// nothing back; writable, it is still a second writer.
		{"the promoted one taken down", []roleAnswer{{Addr: "b", Role: promoted, Down: true}}, failoverWait, "", nil},
		{"a down one dead, one promoted", []roleAnswer{{Addr: "b", Err: gone, Down: true}, {Addr: "c", Role: promoted}}, failoverFollow, "c", nil},
		{"a down one writable, one promoted", []roleAnswer{{Addr: "b", Role: promoted, Down: true}, {Addr: "c", Role: promoted}},
			failoverRefuse, "", []string{"b", "c"}},
	} {
		d := chooseMaster(c.answers)
		if d.Action != c.action || d.To != c.to || !slices.Equal(d.Writable, c.writable) {
			t.Errorf("%s: %+v, want action %d to %q writable %q", c.name, d, c.action, c.to, c.writable)
		}
	}
}

const failoverYAML = `
user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:1
    slave: 127.0.0.1:2@2,127.0.0.1:3
    failover_after: 5s
schema_list:
  - user: ks
    nodes: [node1]
    default: node1
`

func TestFailoverEdit(t *testing.T) {
	cfg, _, err := config.Parse([]byte(failoverYAML), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := failoverEdit(cfg, "node1", "127.0.0.1:1", "127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	n, _ := cfg.Node("node1")
	// The old master is not made a slave.
	if n.Master != "127.0.0.1:2" || n.Slave != "127.0.0.1:3" {
		t.Fatalf("after the failover: master %q, slave %q", n.Master, n.Slave)
	}
	// Run again on the new config (a lost compare-and-swap in cluster
	// mode): nothing to do.
	if err := failoverEdit(cfg, "node1", "127.0.0.1:1", "127.0.0.1:2"); !errors.Is(err, errFailoverDone) {
		t.Fatalf("second run: %v, want errFailoverDone", err)
	}
	if err := failoverEdit(cfg, "node1", "127.0.0.1:2", "127.0.0.1:9"); !IsArgError(err) {
		t.Errorf("to a server that is not a slave: %v", err)
	}
	if err := failoverEdit(cfg, "node9", "127.0.0.1:2", "127.0.0.1:3"); !IsArgError(err) {
		t.Errorf("unknown node: %v", err)
	}
}

// Controls.Failover changes the running config once; a second call for
// the same failover (made elsewhere) is a success that changes nothing.
func TestControlsFailover(t *testing.T) {
	cfg, _, err := config.Parse([]byte(failoverYAML), "")
	if err != nil {
		t.Fatal(err)
	}
	dp := &fakeData{cfg: cfg}
	p := New(t.Context(), dp, cfg, zap.NewNop(), nil)
	c := p.By(Actor{User: "keyshard", Via: "failover"})
	if err := failed(c.failover("node1", "127.0.0.1:1", "127.0.0.1:3")); err != nil {
		t.Fatal(err)
	}
	n, _ := dp.Config().Node("node1")
	if n.Master != "127.0.0.1:3" || n.Slave != "127.0.0.1:2@2" {
		t.Fatalf("running config: master %q, slave %q", n.Master, n.Slave)
	}
	if err := failed(c.failover("node1", "127.0.0.1:1", "127.0.0.1:3")); err != nil {
		t.Fatalf("the same failover again: %v", err)
	}
	if got := p.adminChanges.Load(); got != 1 {
		t.Errorf("admin changes %d, want 1", got)
	}
	if dp.applied != 1 {
		t.Errorf("configs applied %d, want 1", dp.applied)
	}
	if err := failed(c.failover("node1", "127.0.0.1:3", "127.0.0.1:7")); !IsArgError(err) {
		t.Errorf("to a server that is not a slave: %v", err)
	}
}

// failed is failover's error alone.
func failed(_ bool, err error) error { return err }

// fakeData is a DataPlane with no backends: what it runs is what it was
// given last.
type fakeData struct {
	mu      sync.Mutex
	cfg     *config.Config
	black   *blacklist.List
	applied int64
}

func (d *fakeData) Config() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}
func (d *fakeData) Nodes() map[string]*backend.Node { return nil }
func (d *fakeData) Running() (*config.Config, map[string]*backend.Node) {
	return d.Config(), nil
}
func (d *fakeData) Revision() (int64, time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.applied + 1, time.Time{}
}
func (d *fakeData) Blacklist() *blacklist.List {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.black == nil {
		return blacklist.New(nil)
	}
	return d.black
}
func (d *fakeData) SetBlacklist(b *blacklist.List) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.black = b
}
func (d *fakeData) Apply(cfg *config.Config, black *blacklist.List) (Applied, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cfg, d.black = cfg, black
	d.applied++
	return Applied{Revision: d.applied + 1, Nodes: len(cfg.Nodes)}, nil
}
func (d *fakeData) Closed() error { return nil }
func (d *fakeData) PoolOptions(*config.Config, *config.NodeConfig) backend.Options {
	return backend.Options{}
}
func (d *fakeData) ResetDigests() {}
func (d *fakeData) Conns() int64  { return 0 }
func (d *fakeData) Sessions() int { return 0 }
func (d *fakeData) ResolveXA(context.Context, string, bool) (int, error) {
	return 0, errors.New("no XA here")
}
func (d *fakeData) Hold(tables []string) *hold.Gate { return hold.Close(tables, nil) }
func (d *fakeData) Unhold(g *hold.Gate)             { g.Open() }
