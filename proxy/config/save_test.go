package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRewriteAndSave(t *testing.T) {
	src := `# top comment
addr: 127.0.0.1:9696
user_list:
  - user: ks
    password: ks
log_sql: off # keep this comment
nodes:
  - name: node1 # first
    user: ks
    master: 127.0.0.1:3307
  - name: node2
    user: ks
    master: 127.0.0.1:3308
    slave: 127.0.0.1:3309
schema_list:
  - user: ks
    nodes: [node1, node2]
    default: node1
    shard:
      -
`
	path := filepath.Join(t.TempDir(), "ks.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	e := c.Clone()
	e.LogSQL = "on"
	e.SlowLogTime = 80
	e.AllowIPs = "10.0.0.0/8"
	n1, _ := e.Node("node1")
	n1.Slave = FormatSlaves([]Slave{{Addr: "127.0.0.1:4000", Weight: 2}, {Addr: "127.0.0.1:4001", Weight: 1}})
	n2, _ := e.Node("node2")
	n2.Master, n2.Slave = "127.0.0.1:3309", "" // a failover to its replica
	if n, _ := c.Node("node1"); n.Slave != "" || c.LogSQL != "off" {
		t.Fatalf("editing the clone changed the original")
	}
	if err := e.Save(); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(path)
	for _, want := range []string{"# top comment", "log_sql: on # keep this comment", "# first", "slow_log_time: 80",
		"allow_ips: 10.0.0.0/8", "slave: 127.0.0.1:4000@2,127.0.0.1:4001",
		"master: 127.0.0.1:3307", "master: 127.0.0.1:3309"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("saved file lacks %q:\n%s", want, out)
		}
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600 kept", fi.Mode().Perm())
	}
	back, _, err := Load(path)
	if err != nil {
		t.Fatalf("saved file does not load: %v\n%s", err, out)
	}
	b1, _ := back.Node("node1")
	b2, _ := back.Node("node2")
	if back.LogSQL != "on" || back.SlowLogTime != 80 || back.AllowIPs != "10.0.0.0/8" || b1.Slave != n1.Slave || b2.Slave != "" {
		t.Errorf("reloaded: %q %d %q %q %q", back.LogSQL, back.SlowLogTime, back.AllowIPs, b1.Slave, b2.Slave)
	}
	if b1.Master != "127.0.0.1:3307" || b2.Master != "127.0.0.1:3309" {
		t.Errorf("reloaded masters: %q %q", b1.Master, b2.Master)
	}
	if strings.Contains(string(out), "3308") {
		t.Errorf("the old master of node2 is still in the file:\n%s", out)
	}
}
