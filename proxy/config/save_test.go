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

// A run-time change rewrites only the values that change: blank lines,
// comments and quoting stay byte for byte; a key the file lacks gets a
// line of its own; a flow-style node falls back to re-encoding.
func TestRewriteKeepsLayout(t *testing.T) {
	src := "# top\n\naddr: 127.0.0.1:9696   # aligned\n\nslow_log_time: 0        # ms\nallow_ips: \"127.0.0.1\"\n\n" +
		"user_list:\n  - user: ks\n    password: ks\n\nnodes:\n  - name: node1\n    user: ks\n\n    password: ks\n    master: '127.0.0.1:3307'  # m\n" +
		"schema_list:\n  - user: ks\n    nodes: [node1]\n    default: node1\n"
	c, _, err := Parse([]byte(src), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := c.Clone()
	e.SlowLogTime, e.AllowIPs = 250, "127.0.0.1,10.0.0.0/8"
	n, _ := e.Node("node1")
	n.Master, n.Slave = "127.0.0.1:3308", "127.0.0.1:3309@2"
	out, err := e.Rewrite([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("slow_log_time: 0        # ms", "slow_log_time: 250        # ms",
		`allow_ips: "127.0.0.1"`, "allow_ips: 127.0.0.1,10.0.0.0/8",
		"  - name: node1\n", "  - name: node1\n    slave: 127.0.0.1:3309@2\n",
		"master: '127.0.0.1:3307'  # m", "master: 127.0.0.1:3308  # m").Replace(src)
	if string(out) != want {
		t.Errorf("rewrite:\n%s\nwant:\n%s", out, want)
	}
	// A key added at the end of a file that ends in a newline: no blank
	// line before it; one that does not: a newline first.
	e2 := c.Clone()
	e2.LogSQL = "on"
	for in, want := range map[string]string{src: src + "log_sql: on\n", strings.TrimSuffix(src, "\n"): src + "log_sql: on\n"} {
		if out, _ := e2.Rewrite([]byte(in)); string(out) != want {
			t.Errorf("key added at the end:\n%q\nwant\n%q", out, want)
		}
	}
	if same, _ := c.Rewrite([]byte(src)); string(same) != src {
		t.Errorf("nothing changed, yet the file did:\n%s", same)
	}
	flow := strings.Replace(src, "  - name: node1\n    user: ks\n\n    password: ks\n    master: '127.0.0.1:3307'  # m\n",
		"  - {name: node1, user: ks, password: ks, master: 127.0.0.1:3307}\n", 1)
	out, err = e.Rewrite([]byte(flow))
	if err != nil {
		t.Fatal(err)
	}
	back, _, err := Parse(out, "t.yaml")
	if err != nil {
		t.Fatalf("re-encoded flow file: %v\n%s", err, out)
	}
	if bn, _ := back.Node("node1"); bn.Master != "127.0.0.1:3308" || bn.Slave != "127.0.0.1:3309@2" || back.SlowLogTime != 250 {
		t.Errorf("flow file rewritten: %+v %d\n%s", bn, back.SlowLogTime, out)
	}
}

// The unusual shapes a hand-written (or kingshard) file has: an empty
// value, a tab before a comment, CRLF line ends, keys added in the order
// made, and a slave list inherited through a merge key (written out
// explicitly when the failover empties it).
func TestRewriteShapes(t *testing.T) {
	base := "user_list:\n  - user: ks\n    password: ks\nschema_list:\n  - user: ks\n    nodes: [node1]\n    default: node1\n"
	for _, c := range []struct {
		name, src string
		edit      func(*Config)
		want      string // "" : only check that it reads back
	}{
		{"empty value", "slow_log_time:\nnodes:\n  - name: node1\n    user: ks\n    master: 127.0.0.1:3307\n    slave:\n" + base,
			func(c *Config) { c.SlowLogTime = 9; n, _ := c.Node("node1"); n.Slave = "127.0.0.1:3308" },
			"slow_log_time: 9\nnodes:\n  - name: node1\n    user: ks\n    master: 127.0.0.1:3307\n    slave: 127.0.0.1:3308\n" + base},
		{"tab before a comment", "slow_log_time: 5\t# ms\nnodes:\n  - name: node1\n    user: ks\n    master: 127.0.0.1:3307\n" + base,
			func(c *Config) { c.SlowLogTime = 7 },
			"slow_log_time: 7\t# ms\nnodes:\n  - name: node1\n    user: ks\n    master: 127.0.0.1:3307\n" + base},
		{"CRLF", strings.ReplaceAll("nodes:\n  - name: node1\n    user: ks\n    master: 127.0.0.1:3307\n"+base, "\n", "\r\n"),
			func(c *Config) { c.SlowLogTime, c.LogSQL = 3, "on" },
			strings.ReplaceAll("nodes:\n  - name: node1\n    user: ks\n    master: 127.0.0.1:3307\n"+base+"log_sql: on\nslow_log_time: 3\n", "\n", "\r\n")},
		{"merge key", "nodes:\n  - &n0\n    name: node0\n    user: ks\n    master: 127.0.0.1:3309\n    slave: 127.0.0.1:3308\n" +
			"  - <<: *n0\n    name: node1\n    master: 127.0.0.1:3307\n" + strings.Replace(base, "[node1]", "[node0, node1]", 1),
			func(c *Config) { n, _ := c.Node("node1"); n.Master, n.Slave = "127.0.0.1:3308", "" }, ""},
	} {
		cfg, _, err := Parse([]byte(c.src), "t.yaml")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n, ok := cfg.Node("node1"); c.name == "merge key" && (!ok || n.Slave != "127.0.0.1:3308") {
			t.Fatalf("merge key: node1 does not inherit the slave: %+v", n)
		}
		e := cfg.Clone()
		c.edit(e)
		out, err := e.Rewrite([]byte(c.src))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if c.want != "" && string(out) != c.want {
			t.Errorf("%s:\n%q\nwant\n%q", c.name, out, c.want)
		}
		if err := e.writtenIn(out); err != nil {
			t.Errorf("%s: %v\n%s", c.name, err, out)
		}
	}
}
