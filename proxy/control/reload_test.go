package control

import (
	"errors"
	"strings"
	"testing"

	"github.com/keyshard/keyshard/proxy/blacklist"
	"github.com/keyshard/keyshard/proxy/config"
	"go.uber.org/zap"
)

const shardedYAML = `
user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:1
  - name: node2
    user: ks
    password: ks
    master: 127.0.0.1:2
schema_list:
  - user: ks
    nodes: [node1, node2]
    default: node1
    shard:
      - db: app
        table: t
        key: id
        type: hash
        nodes: [node1, node2]
        locations: [2, 2]
`

// Apply is the path a reload takes, with the placement check: a config
// that moves existing rows is refused unless forced; the blacklist in
// memory stays, and it is not counted as a reload.
func TestApply(t *testing.T) {
	cfg, _, err := config.Parse([]byte(shardedYAML), "")
	if err != nil {
		t.Fatal(err)
	}
	black := blacklist.New([]string{"select 1"})
	dp := &fakeData{cfg: cfg, black: black}
	p := New(t.Context(), dp, cfg, zap.NewNop(), nil)

	moved, _, err := config.Parse([]byte(strings.Replace(shardedYAML, "locations: [2, 2]", "locations: [1, 3]", 1)), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(PlacementChanges(cfg, moved)) == 0 {
		t.Fatal("PlacementChanges sees no change in the locations")
	}
	var pe *PlacementError
	if _, err := p.Apply(moved, false); !errors.As(err, &pe) || dp.Config() != cfg || dp.applied != 0 {
		t.Fatalf("unforced: %v (applied %d), want a *PlacementError and the config unchanged", err, dp.applied)
	}
	if _, err := p.Apply(moved, true); err != nil || dp.Config() != moved || dp.applied != 1 {
		t.Fatalf("forced: %v (applied %d), want it running", err, dp.applied)
	}
	if dp.Blacklist() != black {
		t.Error("Apply replaced the blacklist in memory")
	}
	if p.reloads.Load() != 0 || p.reloadErrors.Load() != 0 {
		t.Errorf("counted as a reload: %d reloads, %d errors", p.reloads.Load(), p.reloadErrors.Load())
	}
}

// A reload's warning of a setting that needs a restart says "not set" for
// an empty value, never a blank.
func TestPendingWarningEmptyValue(t *testing.T) {
	got := pendingWarning(Pending{Key: "tls_cert", Running: "", Configured: "/etc/ks.pem"})
	if want := "tls_cert changed (not set running, /etc/ks.pem in the config): takes effect after a restart"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	got = pendingWarning(Pending{Key: "web_addr", Running: "127.0.0.1:1", Configured: ""})
	if want := "web_addr changed (127.0.0.1:1 running, not set in the config): takes effect after a restart"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}
