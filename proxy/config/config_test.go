package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// minimal is the smallest valid config; tests append to it or replace lines.
const minimal = `user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    user: ks
    password: ks
    master: 127.0.0.1:3307
`

func mustParse(t *testing.T, src string) (*Config, []string) {
	t.Helper()
	cfg, warns, err := Parse([]byte(src), "test.yaml")
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, src)
	}
	return cfg, warns
}

func hasWarning(warns []string, sub string) bool {
	for _, w := range warns {
		if strings.Contains(w, sub) {
			return true
		}
	}
	return false
}

func TestKingshardSamples(t *testing.T) {
	type schema struct {
		user, def string
		nodes     []string
		rules     int
	}
	tests := []struct {
		file    string
		users   []string
		nodes   []string
		schemas []schema
		check   func(t *testing.T, c *Config)
		warns   []string
	}{
		{
			file:  "ks.yaml",
			users: []string{"root", "kingshard"},
			nodes: []string{"node1", "node2"},
			schemas: []schema{
				{"root", "node1", []string{"node1", "node2"}, 0},
				{"kingshard", "node1", []string{"node1", "node2"}, 6},
			},
			check: func(t *testing.T, c *Config) {
				if c.Addr != "0.0.0.0:9696" || c.PrometheusAddr != "0.0.0.0:7080" || c.WebAddr != "0.0.0.0:9797" {
					t.Errorf("addresses: %q %q %q", c.Addr, c.PrometheusAddr, c.WebAddr)
				}
				if c.LogLevel != "debug" || c.LogSQL != "on" {
					t.Errorf("log_level %q log_sql %q", c.LogLevel, c.LogSQL)
				}
				n, _ := c.Node("node1")
				if n.MaxConnsLimit != 32 || n.DownAfterNoAlive != 32 || n.User != "root" || n.Master != "127.0.0.1:3306" {
					t.Errorf("node1 = %+v", *n)
				}
				s, _ := c.SchemaFor("kingshard")
				want := ShardConfig{DB: "kingshard", Table: "test_shard_day", Key: "mtime", Type: "date_day",
					Nodes: []string{"node1", "node2"}, DateRange: []string{"20160306-20160307", "20160308-20160309"}}
				got := s.ShardRule[5]
				got.pos = pos{}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("shard[5] = %+v, want %+v", got, want)
				}
			},
		},
		{
			file:  "unshard.yaml",
			users: []string{"kingshard"},
			nodes: []string{"node1"},
			schemas: []schema{
				{"root", "node1", []string{"node1"}, 0},
				{"kingshard", "node1", []string{"node1"}, 0},
			},
			warns: []string{
				`unshard.yaml:19: user_list[1]: repeats user "kingshard" of line 16, ignored`,
				`unshard.yaml:77: schema_list[0].user: user "root" is not in user_list`,
			},
		},
		{
			file:    "ks-2016.yaml",
			users:   []string{"kingshard"},
			nodes:   []string{"node1", "node2"},
			schemas: []schema{{"kingshard", "node1", []string{"node1", "node2"}, 2}},
			check: func(t *testing.T, c *Config) {
				s, _ := c.SchemaFor("kingshard")
				for _, r := range s.ShardRule {
					if r.DB != "kingshard" {
						t.Errorf("rule %s: db %q, want the schema's db", r.Table, r.DB)
					}
				}
				if c.LogSQL != "off" {
					t.Errorf("log_sql %q", c.LogSQL)
				}
			},
			warns: []string{"ks-2016.yaml:11: user: old kingshard form", "ks-2016.yaml:74: schema: old kingshard form"},
		},
		{
			file:    "unshard-2016.yaml",
			users:   []string{"root", "kingshard"},
			nodes:   []string{"node1"},
			schemas: []schema{{"root", "node1", []string{"node1"}, 0}, {"kingshard", "node1", []string{"node1"}, 0}},
			check: func(t *testing.T, c *Config) {
				n, _ := c.Node("node1")
				if n.User != "root" || n.Password != "root" || n.Slave != "127.0.0.1:3309" {
					t.Errorf("node1 = %+v", *n)
				}
			},
			warns: []string{"ups: old kingshard form"},
		},
		{
			file:    "multi.yaml",
			users:   []string{"kingshard"},
			nodes:   []string{"node1", "node2"},
			schemas: []schema{{"kingshard", "node1", []string{"node1", "node2"}, 2}},
			check: func(t *testing.T, c *Config) {
				if n, _ := c.Node("node2"); n.MaxConnsLimit != 16 {
					t.Errorf("idle_conns not read as max_conns_limit: %d", n.MaxConnsLimit)
				}
			},
			warns: []string{"nodes[0].idle_conns: old kingshard key, read as max_conns_limit"},
		},
		{
			file:    "kingshard.yaml",
			users:   []string{"root"},
			nodes:   []string{"node1"},
			schemas: []schema{{"root", "node1", []string{"node1"}, 0}},
			check: func(t *testing.T, c *Config) {
				if u, _ := c.UserPassword("root"); u.Password != "" {
					t.Errorf("empty password read as %q", u.Password)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c, warns, err := Load(filepath.Join("testdata", "kingshard", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var users, nodes []string
			for _, u := range c.UserList {
				users = append(users, u.User)
			}
			for _, n := range c.Nodes {
				nodes = append(nodes, n.Name)
			}
			if !reflect.DeepEqual(users, tt.users) || !reflect.DeepEqual(nodes, tt.nodes) {
				t.Errorf("users %v nodes %v, want %v %v", users, nodes, tt.users, tt.nodes)
			}
			if len(c.SchemaList) != len(tt.schemas) {
				t.Fatalf("%d schemas, want %d", len(c.SchemaList), len(tt.schemas))
			}
			for i, want := range tt.schemas {
				s := c.SchemaList[i]
				if s.User != want.user || s.Default != want.def || !reflect.DeepEqual(s.Nodes, want.nodes) || len(s.ShardRule) != want.rules {
					t.Errorf("schema %d = %s %s %v %d rules, want %+v", i, s.User, s.Default, s.Nodes, len(s.ShardRule), want)
				}
			}
			if tt.check != nil {
				tt.check(t, c)
			}
			for _, w := range tt.warns {
				if !hasWarning(warns, w) {
					t.Errorf("no warning %q in\n%s", w, strings.Join(warns, "\n"))
				}
			}
		})
	}
}

func TestEtcFiles(t *testing.T) {
	c, warns, err := Load("../../etc/ks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("etc/ks.yaml warnings: %q", warns)
	}
	n1, ok1 := c.Node("node1")
	n2, ok2 := c.Node("node2")
	if !ok1 || !ok2 || n1.Master != "127.0.0.1:3307" || n2.Master != "127.0.0.1:3308" || n1.User != "ks" || n2.Password != "ks" {
		t.Errorf("nodes = %+v", c.Nodes)
	}
	if u, ok := c.UserPassword("root"); !ok || u.Password != "root" {
		t.Error("root/root missing")
	}
	s, ok := c.SchemaFor("ks")
	if !ok || s.Default != "node1" || len(s.ShardRule) != 2 {
		t.Fatalf("schema for ks = %+v", s)
	}
	if g := s.ShardRule[1]; g.Table != "demo_country" || g.Type != "global" || len(g.Nodes) != 2 {
		t.Errorf("global rule = %+v", g)
	}
	r := s.ShardRule[0]
	if r.DB != "kingshard" || r.Table != "test_shard_hash" || r.Key != "id" || r.Type != "hash" || !reflect.DeepEqual(r.Locations, []int{4, 4}) {
		t.Errorf("rule = %+v", r)
	}
	// The demo file spells out every default: parsing it must give the same
	// values as parsing a file that omits them all.
	d, _ := mustParse(t, minimal)
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"addr", c.Addr, d.Addr}, {"log_level", c.LogLevel, d.LogLevel}, {"log_sql", c.LogSQL, d.LogSQL},
		{"proxy_charset", c.ProxyCharset, d.ProxyCharset}, {"max_allowed_packet", c.MaxAllowedPacket, d.MaxAllowedPacket},
		{"tcp_nodelay", *c.TCPNoDelay, *d.TCPNoDelay}, {"backend_tcp_nodelay", *c.BackendTCPNoDelay, *d.BackendTCPNoDelay},
		{"client_write_buffer", c.ClientWriteBuffer, d.ClientWriteBuffer}, {"backend_write_buffer", c.BackendWriteBuffer, d.BackendWriteBuffer},
		{"read_buffer", c.ReadBuffer, d.ReadBuffer}, {"pool_wait_timeout", c.PoolWaitTimeout, d.PoolWaitTimeout},
		{"pool_idle_timeout", c.PoolIdleTimeout, d.PoolIdleTimeout}, {"pool_max_lifetime", c.PoolMaxLifetime, d.PoolMaxLifetime},
		{"pool_min_idle", c.PoolMinIdle, d.PoolMinIdle}, {"connect_timeout", c.ConnectTimeout, d.ConnectTimeout},
		{"shutdown_timeout", c.ShutdownTimeout, d.ShutdownTimeout}, {"default_auth_plugin", c.DefaultAuthPlugin, d.DefaultAuthPlugin},
		{"log_max_size_mb", c.LogMaxSizeMB, d.LogMaxSizeMB}, {"log_max_backups", c.LogMaxBackups, d.LogMaxBackups},
		{"log_max_age_days", c.LogMaxAgeDays, d.LogMaxAgeDays}, {"log_compress", *c.LogCompress, *d.LogCompress},
		{"max_conns_limit", n1.MaxConnsLimit, d.Nodes[0].MaxConnsLimit},
		{"max_connections", c.MaxConnections, d.MaxConnections}, {"slow_log_time", c.SlowLogTime, d.SlowLogTime},
	} {
		if f.got != f.want {
			t.Errorf("etc/ks.yaml %s = %v, but its default is %v", f.name, f.got, f.want)
		}
	}

	c, warns, err = Load("../../etc/unshard.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("etc/unshard.yaml warnings: %q", warns)
	}
	if s, ok := c.SchemaFor("ks"); !ok || len(s.ShardRule) != 0 || len(c.Nodes) != 1 {
		t.Errorf("unshard: schema %+v, nodes %d", s, len(c.Nodes))
	}
}

func TestDefaults(t *testing.T) {
	c, warns := mustParse(t, minimal)
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"addr", c.Addr, "127.0.0.1:9696"},
		{"log_level", c.LogLevel, "info"},
		{"log_sql", c.LogSQL, "off"},
		{"proxy_charset", c.ProxyCharset, "utf8mb4"},
		{"max_connections", c.MaxConnections, 4096},
		{"max_unauthenticated_per_host", c.MaxUnauthPerHost, 256},
		{"tcp_nodelay", *c.TCPNoDelay, true},
		{"backend_tcp_nodelay", *c.BackendTCPNoDelay, true},
		{"client_write_buffer", c.ClientWriteBuffer, 16384},
		{"backend_write_buffer", c.BackendWriteBuffer, 16384},
		{"read_buffer", c.ReadBuffer, 16384},
		{"pool_wait_timeout", c.PoolWaitTimeout.D(), 5 * time.Second},
		{"pool_idle_timeout", c.PoolIdleTimeout.D(), 60 * time.Second},
		{"pool_max_lifetime", c.PoolMaxLifetime.D(), time.Hour},
		{"pool_min_idle", c.PoolMinIdle, 2},
		{"connect_timeout", c.ConnectTimeout.D(), 3 * time.Second},
		{"shutdown_timeout", c.ShutdownTimeout.D(), 10 * time.Second},
		{"max_allowed_packet", c.MaxAllowedPacket, 64 << 20},
		{"default_auth_plugin", c.DefaultAuthPlugin, "mysql_native_password"},
		{"log_max_size_mb", c.LogMaxSizeMB, 100},
		{"log_max_backups", c.LogMaxBackups, 5},
		{"log_max_age_days", c.LogMaxAgeDays, 7},
		{"log_compress", *c.LogCompress, true},
		{"max_conns_limit", c.Nodes[0].MaxConnsLimit, 16},
		{"health_check_interval", c.HealthCheckInterval.D(), time.Second},
		{"health_check_timeout", c.HealthCheckTimeout.D(), time.Second},
		{"max_replication_lag", c.MaxReplicationLag, 0},
		{"master_reads", *c.MasterReads, true},
		{"read_your_writes", c.ReadYourWrites, "master"},
		{"read_your_writes_window", c.ReadYourWritesWindow.D(), time.Second},
		{"nodes[0] rw_split", c.Nodes[0].RWSplit(), true},
	} {
		if f.got != f.want {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}

	// Explicit values survive; an explicit 0 keeps its meaning where 0 is
	// meaningful, and means "default" where it is not.
	c, _ = mustParse(t, minimal+`addr: 0.0.0.0:3306
log_level: DEBUG
log_sql: ON
tcp_nodelay: false
log_compress: false
pool_min_idle: 0
log_max_backups: 0
log_max_age_days: 0
read_buffer: 0
pool_wait_timeout: 250
max_connections: 100
`)
	if c.Addr != "0.0.0.0:3306" || c.LogLevel != "debug" || c.LogSQL != "on" || *c.TCPNoDelay || *c.LogCompress {
		t.Errorf("explicit values lost: %q %q %q %v %v", c.Addr, c.LogLevel, c.LogSQL, *c.TCPNoDelay, *c.LogCompress)
	}
	if c.PoolMinIdle != 0 || c.LogMaxBackups != 0 || c.LogMaxAgeDays != 0 {
		t.Errorf("explicit 0 replaced: pool_min_idle %d log_max_backups %d log_max_age_days %d", c.PoolMinIdle, c.LogMaxBackups, c.LogMaxAgeDays)
	}
	if c.ReadBuffer != 16384 || c.PoolWaitTimeout.D() != 250*time.Millisecond || c.MaxConnections != 100 {
		t.Errorf("read_buffer %d pool_wait_timeout %s max_connections %d", c.ReadBuffer, c.PoolWaitTimeout, c.MaxConnections)
	}
}

// TestErrors covers every error class: each case asserts the file, line and
// key path in the message.
func TestErrors(t *testing.T) {
	node := func(extra string) string {
		return `user_list:
  - user: ks
    password: ks
nodes:
  - name: node1
    user: ks
    master: 127.0.0.1:3307
` + extra
	}
	schema := func(s string) string {
		return minimal + `  - name: node2
    user: ks
    master: 127.0.0.1:3308
schema_list:
  - user: ks
` + s
	}
	tests := []struct {
		name, src string
		want      string // "test.yaml:LINE: ..." prefix or substring
	}{
		// decoding
		{"unknown top key", "adr: 127.0.0.1:1\n" + minimal, `test.yaml:1: unknown key "adr"`},
		{"unknown node key", node("    adr: x\n"), `test.yaml:8: unknown key "adr" in nodes[0]`},
		{"unknown user key", "user_list:\n  - user: ks\n    pasword: x\n", `test.yaml:3: unknown key "pasword" in user_list[0]`},
		{"unknown shard key", schema("    nodes: [node1]\n    default: node1\n    shard:\n      - db: d\n        tabel: t\n"), `test.yaml:18: unknown key "tabel" in schema_list[0].shard[0]`},
		{"duplicate key", minimal + "log_level: info\nlog_level: warn\n", `test.yaml:10: duplicate key "log_level" (first at line 9)`},
		{"duplicate key in node", node("    master: 127.0.0.1:1\n"), `test.yaml:8: duplicate key "master" in nodes[0] (first at line 7)`},
		{"int wrong type", minimal + "max_connections: lots\n", `test.yaml:9: max_connections: want an integer, got "lots"`},
		{"int given a string", minimal + "slow_log_time: \"100\"\n", `test.yaml:9: slow_log_time: want an integer, got "100"`},
		{"int given a list", node("    max_conns_limit: [1]\n"), `test.yaml:8: nodes[0].max_conns_limit: want an integer, got a list`},
		{"bool wrong type", minimal + "tcp_nodelay: sometimes\n", `test.yaml:9: tcp_nodelay: want true or false, got "sometimes"`},
		{"list wrong type", "nodes: node1\n", `test.yaml:1: nodes: want a list, got "node1"`},
		{"mapping wrong type", "user_list:\n  - ks\n", `test.yaml:2: user_list[0]: want a mapping, got "ks"`},
		{"string wrong type", minimal + "addr: {host: x}\n", `test.yaml:9: addr: want a string, got a mapping`},
		{"top level not a mapping", "- a\n- b\n", `test.yaml:1: top level: want a mapping, got a list`},
		{"locations wrong type", schema("    nodes: [node1]\n    default: node1\n    shard:\n      - locations: [a]\n"), `test.yaml:17: schema_list[0].shard[0].locations[0]: want an integer, got "a"`},
		{"bad duration", minimal + "pool_wait_timeout: 5 seconds\n", `test.yaml:9: pool_wait_timeout: bad duration "5 seconds"`},
		{"yaml syntax", minimal + "addr: [\n", `test.yaml:9: did not find expected node content`},
		{"yaml syntax tab", "addr: x\n\tlog_level: y\n", `test.yaml:2: found a tab character that violates indentation`},
		{"two documents", minimal + "---\naddr: x\n", `test.yaml:9: more than one YAML document`},
		{"non-scalar key", minimal + "? [a]\n: b\n", `test.yaml:9: keys must be plain strings, got a list`},

		// users
		{"no users", "nodes:\n  - name: n\n    user: u\n    master: h:1\n", `test.yaml: user_list: at least one user is required`},
		{"duplicate user", rep(minimal, "nodes:", "  - user: ks\n    password: other\nnodes:"), `test.yaml:4: user_list[1].user: duplicate user "ks" with a different password or auth_plugin (first at line 2)`},
		{"user missing name", rep(minimal, "nodes:", "  - password: x\nnodes:"), `test.yaml:4: user_list[1].user: required`},
		{"bad auth_plugin", "user_list:\n  - user: ks\n    auth_plugin: sha256_password\n" + minimal[len("user_list:\n  - user: ks\n    password: ks\n"):], `test.yaml:3: user_list[0].auth_plugin: want mysql_native_password or caching_sha2_password, got "sha256_password"`},
		{"bad default_auth_plugin", minimal + "default_auth_plugin: pam\n", `test.yaml:9: default_auth_plugin: want mysql_native_password`},
		{"unknown admin", minimal + "admin_users: [ks, bob]\n", `test.yaml:9: admin_users[1]: user "bob" is not in user_list`},

		// nodes
		{"no nodes", "user_list:\n  - user: ks\n", `test.yaml: nodes: at least one node is required`},
		{"duplicate node", minimal + "  - name: node1\n    user: ks\n    master: 127.0.0.1:3308\n", `test.yaml:9: nodes[1].name: duplicate node "node1" (first at line 5)`},
		{"node without name", minimal + "  - user: ks\n    master: 127.0.0.1:3308\n", `test.yaml:9: nodes[1].name: required`},
		{"node without master", "user_list:\n  - user: ks\nnodes:\n  - name: n\n    user: ks\n", `test.yaml:4: nodes[0].master: required`},
		{"node without user", "user_list:\n  - user: ks\nnodes:\n  - name: n\n    master: h:1\n", `test.yaml:4: nodes[0].user: required`},
		{"negative max_conns_limit", node("    max_conns_limit: -1\n"), `test.yaml:8: nodes[0].max_conns_limit: must not be negative`},

		// addresses
		{"addr without port", minimal + "addr: localhost\n", `test.yaml:9: addr: bad address "localhost": want host:port`},
		{"web_addr port 0", minimal + "web_addr: 127.0.0.1:0\n", `test.yaml:9: web_addr: bad address "127.0.0.1:0": port must be 1..65535`},
		{"prometheus_addr port too big", minimal + "prometheus_addr: :70000\n", `test.yaml:9: prometheus_addr: bad address ":70000": port must be 1..65535`},
		{"master port not a number", rep(node(""), "127.0.0.1:3307", "127.0.0.1:mysql"), `test.yaml:7: nodes[0].master: bad address "127.0.0.1:mysql": port must be 1..65535`},
		{"master without host", rep(node(""), "127.0.0.1:3307", ":3307"), `test.yaml:7: nodes[0].master: bad address ":3307": host is missing`},
		{"master with weight", rep(node(""), "127.0.0.1:3307", "127.0.0.1:3307@2"), `test.yaml:7: nodes[0].master: "127.0.0.1:3307@2": a weight suffix is only allowed on slaves`},
		{"bad slave address", node("    slave: 127.0.0.1:3309@2,127.0.0.1\n"), `test.yaml:8: nodes[0].slave: slave "127.0.0.1": bad address "127.0.0.1": want host:port`},
		{"bad slave weight", node("    slave: 127.0.0.1:3309@x\n"), `test.yaml:8: nodes[0].slave: slave "127.0.0.1:3309@x": bad weight "x"`},
		{"zero slave weight", node("    slave: 127.0.0.1:3309@0\n"), `test.yaml:8: nodes[0].slave: slave "127.0.0.1:3309@0": bad weight "0"`},
		{"bad allow_ips", minimal + "allow_ips: 127.0.0.1,10.0.0.0/33\n", `test.yaml:9: allow_ips: bad CIDR "10.0.0.0/33"`},
		{"bad allow_ips ip", minimal + "allow_ips: localhost\n", `test.yaml:9: allow_ips: bad IP "localhost"`},

		// enumerations and ranges
		{"bad log_level", minimal + "log_level: verbose\n", `test.yaml:9: log_level: want debug, info, warn or error, got "verbose"`},
		{"bad log_sql", minimal + "log_sql: yes\n", `test.yaml:9: log_sql: want on or off, got "yes"`},
		{"negative slow_log_time", minimal + "slow_log_time: -1\n", `test.yaml:9: slow_log_time: must not be negative`},
		{"negative max_procs", minimal + "max_procs: -2\n", `test.yaml:9: max_procs: must not be negative, got -2`},
		{"bad read_your_writes", minimal + "read_your_writes: always\n", `test.yaml:9: read_your_writes: want master or off, got "always"`},
		{"negative max_replication_lag", minimal + "max_replication_lag: -1\n", `test.yaml:9: max_replication_lag: must not be negative`},
		{"negative health_check_interval", minimal + "health_check_interval: -1s\n", `test.yaml:9: health_check_interval: must not be negative`},
		{"negative duration", minimal + "connect_timeout: -1s\n", `test.yaml:9: connect_timeout: must not be negative, got -1s`},
		{"max_allowed_packet too small", minimal + "max_allowed_packet: 100\n", `test.yaml:9: max_allowed_packet: want 1024..1073741824 bytes, got 100`},
		{"tls cert without key", minimal + "tls_cert: /x.pem\n", `test.yaml:9: tls_cert: set without tls_key: set both or neither`},
		{"tls key without cert", minimal + "tls_key: /x.key\n", `test.yaml:9: tls_key: set without tls_cert: set both or neither`},

		// schemas and shard rules
		{"schema unknown node", schema("    nodes: [node1, node9]\n    default: node1\n"), `test.yaml:14: schema_list[0].nodes: unknown node "node9"`},
		{"schema node twice", schema("    nodes: [node1, node1]\n    default: node1\n"), `test.yaml:14: schema_list[0].nodes: node "node1" listed twice`},
		{"schema without nodes", schema("    default: node1\n"), `test.yaml:13: schema_list[0].nodes: at least one node is required`},
		{"default not in schema nodes", schema("    nodes: [node1]\n    default: node2\n"), `test.yaml:15: schema_list[0].default: node "node2" is not in this schema's nodes`},
		{"default missing", schema("    nodes: [node1]\n"), `test.yaml:13: schema_list[0].default: required`},
		{"schema without user", rep(schema("    nodes: [node1]\n    default: node1\n"), "  - user: ks\n    nodes", "  - nodes"), `test.yaml:13: schema_list[0].user: required`},
		{"two schemas for a user", schema("    nodes: [node1]\n    default: node1\n  - user: ks\n    nodes: [node1]\n    default: node1\n"), `test.yaml:16: schema_list[1].user: second schema for user "ks" (first at line 13)`},
		{"shard unknown node", schema("    nodes: [node1, node2]\n    default: node1\n    shard:\n      - {db: d, table: t, key: id, type: hash, nodes: [node1, node7], locations: [1, 1]}\n"), `test.yaml:17: schema_list[0].shard[0].nodes: unknown node "node7"`},
		{"shard node outside schema", schema("    nodes: [node1]\n    default: node1\n    shard:\n      - {db: d, table: t, key: id, type: hash, nodes: [node1, node2], locations: [1, 1]}\n"), `test.yaml:17: schema_list[0].shard[0].nodes: node "node2" is not in the schema's nodes`},
		{"bad shard type", schema("    nodes: [node1]\n    default: node1\n    shard:\n      - db: d\n        table: t\n        key: id\n        nodes: [node1]\n        type: modulo\n"), `test.yaml:21: schema_list[0].shard[0].type: unknown shard type "modulo"`},
		{"shard type missing", schema("    nodes: [node1]\n    default: node1\n    shard:\n      - {db: d, table: t, key: id, nodes: [node1]}\n"), `test.yaml:17: schema_list[0].shard[0].type: required`},
		{"locations mismatch", schema("    nodes: [node1, node2]\n    default: node1\n    shard:\n      - db: d\n        table: t\n        key: id\n        nodes: [node1, node2]\n        type: hash\n        locations: [4]\n"), `test.yaml:22: schema_list[0].shard[0].locations: has 1 entries but nodes has 2`},
		{"locations missing for hash", schema("    nodes: [node1]\n    default: node1\n    shard:\n      - {db: d, table: t, key: id, type: hash, nodes: [node1]}\n"), `schema_list[0].shard[0].locations: has 0 entries but nodes has 1`},
		{"location zero", schema("    nodes: [node1]\n    default: node1\n    shard:\n      - {db: d, table: t, key: id, type: hash, nodes: [node1], locations: [0]}\n"), `schema_list[0].shard[0].locations: each entry must be >= 1`},
		{"date_range mismatch", schema("    nodes: [node1, node2]\n    default: node1\n    shard:\n      - {db: d, table: t, key: k, type: date_month, nodes: [node1, node2], date_range: [201601-201612]}\n"), `schema_list[0].shard[0].date_range: has 1 entries but nodes has 2`},
		{"range without row limit", schema("    nodes: [node1]\n    default: node1\n    shard:\n      - {db: d, table: t, key: id, type: range, nodes: [node1], locations: [2]}\n"), `schema_list[0].shard[0].table_row_limit: required for a range rule`},
		{"global with a key", schema("    nodes: [node1]\n    default: node1\n    shard:\n      - {db: d, table: t, key: id, type: global, nodes: [node1]}\n"), `schema_list[0].shard[0].key: a global table is copied whole on every node of its rule: it takes no key`},
		{"shard without table", schema("    nodes: [node1]\n    default: node1\n    shard:\n      - {db: d, key: id, type: hash, nodes: [node1], locations: [2]}\n"), `test.yaml:17: schema_list[0].shard[0].table: required`},
		{"duplicate shard table", schema("    nodes: [node1]\n    default: node1\n    shard:\n      - {db: d, table: t, key: id, type: hash, nodes: [node1], locations: [2]}\n      - {db: d, table: t, key: id, type: hash, nodes: [node1], locations: [2]}\n"), `test.yaml:18: schema_list[0].shard[1].table: second rule for d.t (first at line 17)`},

		// old kingshard forms
		{"schema and schema_list", schema("    nodes: [node1]\n    default: node1\nschema:\n  nodes: [node1]\n  default: node1\n"), `test.yaml:16: schema: use either schema_list or schema, not both`},
		{"two old schemas", minimal + "schemas:\n  - {nodes: [node1], rules: {default: node1}}\n  - {nodes: [node1], rules: {default: node1}}\n", `test.yaml:9: schemas: more than one old-style schema`},
		{"bad ups item", "ups: root\n" + minimal, `test.yaml:1: ups: item "root": want user:password`},
		{"bad idle_conns", node("    idle_conns: many\n"), `test.yaml:8: nodes[0].idle_conns: want an integer, got "many"`},
		{"bad rw_split", node("    rw_split: maybe\n"), `test.yaml:8: nodes[0].rw_split: want true or false, got "maybe"`},
		{"password without user", "password: x\n" + minimal, `test.yaml:1: user: required with the old top-level password key`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse([]byte(tt.src), "test.yaml")
			if err == nil {
				t.Fatalf("no error for\n%s", tt.src)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("%T is not an *Error: %v", err, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error\n  %v\nwant it to contain\n  %s\nsource:\n%s", err, tt.want, tt.src)
			}
		})
	}
}

// rep replaces the first old in s.
func rep(s, old, new string) string { return strings.Replace(s, old, new, 1) }

func TestAllErrorsReportedInLineOrder(t *testing.T) {
	_, _, err := Parse([]byte(`log_level: loud
user_list:
  - user: ks
nodes:
  - name: n1
    user: ks
    master: nowhere
    colour: blue
log_sql: maybe
`), "f.yaml")
	if err == nil {
		t.Fatal("no error")
	}
	// Decoding errors come first: Validate only runs on a cleanly decoded file.
	if got, want := err.Error(), `f.yaml:8: unknown key "colour" in nodes[0]`; got != want {
		t.Errorf("decode stage: got\n%s\nwant\n%s", got, want)
	}
	_, _, err = Parse([]byte(`log_level: loud
user_list:
  - user: ks
nodes:
  - name: n1
    user: ks
    master: nowhere
log_sql: maybe
`), "f.yaml")
	want := `f.yaml:1: log_level: want debug, info, warn or error, got "loud"
f.yaml:7: nodes[0].master: bad address "nowhere": want host:port
f.yaml:8: log_sql: want on or off, got "maybe"`
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

func TestValidateWithoutLines(t *testing.T) {
	c := &Config{
		UserList: []UserConfig{{User: "ks", Password: "ks"}},
		Nodes:    []NodeConfig{{Name: "n1", User: "ks", Master: "127.0.0.1:3306"}},
		SchemaList: []SchemaConfig{{User: "ks", Nodes: []string{"n1"}, Default: "n1",
			ShardRule: []ShardConfig{{DB: "d", Table: "t", Key: "id", Type: "hash", Nodes: []string{"n1"}, Locations: []int{2}}}}},
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid config built in code: %v", err)
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil || c.PoolMinIdle != 2 || c.Nodes[0].MaxConnsLimit != 16 {
		t.Fatalf("after ApplyDefaults: %v, pool_min_idle %d", err, c.PoolMinIdle)
	}
	c.Nodes = append(c.Nodes, NodeConfig{Name: "n1", User: "ks", Master: "127.0.0.1:3307"})
	c.SchemaList[0].Default = "n2"
	err := c.Validate()
	want := `nodes[1].name: duplicate node "n1" (first at an earlier entry)
schema_list[0].default: node "n2" is not in this schema's nodes`
	if err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

func TestSlaves(t *testing.T) {
	tests := []struct {
		in      string
		want    []Slave
		wantErr string
	}{
		{"", nil, ""},
		{"   ", nil, ""},
		{"127.0.0.1:3309", []Slave{{"127.0.0.1:3309", 1}}, ""},
		{"192.168.59.101:3307@2,192.168.59.102:3307@3", []Slave{{"192.168.59.101:3307", 2}, {"192.168.59.102:3307", 3}}, ""},
		{" a:1 @ 2 , b:2 ", []Slave{{"a:1", 2}, {"b:2", 1}}, ""},
		{"a:1,b:2,", []Slave{{"a:1", 1}, {"b:2", 1}}, ""}, // consul-template style trailing comma
		{"[::1]:3306@5", []Slave{{"[::1]:3306", 5}}, ""},
		{"a:1@", nil, `bad weight ""`},
		{"a:1@-1", nil, `bad weight "-1"`},
		{"a:1@1.5", nil, `bad weight "1.5"`},
		{"a:1@2@3", nil, `bad weight "2@3"`},
		{"a", nil, `bad address "a"`},
		{"a:0", nil, `port must be 1..65535`},
		{":3306", nil, `host is missing`},
		{"a:1,a:1@2", nil, `slave "a:1" listed twice`},
	}
	for _, tt := range tests {
		got, err := NodeConfig{Slave: tt.in}.Slaves()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Slaves(%q) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Slaves(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"5s", 5 * time.Second, false},
		{"100ms", 100 * time.Millisecond, false},
		{"1m30s", 90 * time.Second, false},
		{"1h", time.Hour, false},
		{"250", 250 * time.Millisecond, false},
		{"0", 0, false},
		{"-5", -5 * time.Millisecond, false}, // parses; Validate rejects negatives
		{"1.5", 0, true},
		{"5 s", 0, true},
		{"fast", 0, true},
		{"9223372036854775807", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err != nil) != tt.wantErr || got.D() != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}

	// Through Parse, with YAML ints and strings.
	c, _ := mustParse(t, minimal+"pool_idle_timeout: 1500\npool_max_lifetime: \"2h\"\nconnect_timeout: 750ms\nshutdown_timeout: ~\n")
	if c.PoolIdleTimeout.D() != 1500*time.Millisecond || c.PoolMaxLifetime.D() != 2*time.Hour || c.ConnectTimeout.D() != 750*time.Millisecond || c.ShutdownTimeout.D() != 10*time.Second {
		t.Errorf("got %s %s %s %s", c.PoolIdleTimeout, c.PoolMaxLifetime, c.ConnectTimeout, c.ShutdownTimeout)
	}

	// Through plain yaml.v3, for code that embeds Duration elsewhere.
	var v struct {
		D Duration `yaml:"d"`
	}
	if err := yaml.Unmarshal([]byte("d: 42\n"), &v); err != nil || v.D.D() != 42*time.Millisecond {
		t.Errorf("yaml.Unmarshal: %v %v", v.D, err)
	}
	if err := yaml.Unmarshal([]byte("d: soon\n"), &v); err == nil {
		t.Error("yaml.Unmarshal accepted a bad duration")
	}
	out, err := yaml.Marshal(v)
	if err != nil || string(out) != "d: 42ms\n" {
		t.Errorf("yaml.Marshal = %q, %v", out, err)
	}
}

func TestAccessors(t *testing.T) {
	c, _ := mustParse(t, `user_list:
  - {user: root, password: r}
  - {user: ks, password: k, auth_plugin: caching_sha2_password}
  - {user: ops, password: o}
admin_users: [ops]
nodes:
  - {name: node1, user: ks, master: "127.0.0.1:3307"}
  - {name: node2, user: ks, master: "127.0.0.1:3308", max_conns_limit: 4}
schema_list:
  - {user: ks, nodes: [node1, node2], default: node2}
`)
	if u, ok := c.UserPassword("ks"); !ok || u.Password != "k" || u.AuthPlugin != AuthCachingSHA2 {
		t.Errorf("UserPassword(ks) = %+v, %v", u, ok)
	}
	if _, ok := c.UserPassword("nobody"); ok {
		t.Error("UserPassword(nobody) found")
	}
	if s, ok := c.SchemaFor("ks"); !ok || s.Default != "node2" {
		t.Errorf("SchemaFor(ks) = %+v, %v", s, ok)
	}
	if _, ok := c.SchemaFor("root"); ok {
		t.Error("SchemaFor(root) found")
	}
	if n, ok := c.Node("node2"); !ok || n.MaxConnsLimit != 4 || n != &c.Nodes[1] {
		t.Errorf("Node(node2) = %+v, %v", n, ok)
	}
	if _, ok := c.Node("node3"); ok {
		t.Error("Node(node3) found")
	}
	for user, want := range map[string]bool{"root": true, "ops": true, "ks": false, "": false} {
		if got := c.IsAdmin(user); got != want {
			t.Errorf("IsAdmin(%q) = %v", user, got)
		}
	}
	if c.Source() != "test.yaml" {
		t.Errorf("Source() = %q", c.Source())
	}
}

func TestProcs(t *testing.T) {
	for _, tc := range []struct {
		maxProcs int
		env      string
		cpus     int
		want     int
	}{
		{0, "", 2, 1},    // half the CPUs: the measured default on 2 CPUs
		{0, "", 1, 1},    // never 0
		{0, "", 16, 8},   // half again
		{0, "3", 2, 3},   // the environment when max_procs is unset
		{0, " 4 ", 2, 4}, // spaces tolerated, like the runtime
		{0, "x", 8, 4},   // a bad environment value falls back to half
		{0, "0", 8, 4},   // and so does 0
		{6, "3", 2, 6},   // max_procs wins over the environment
	} {
		c := &Config{MaxProcs: tc.maxProcs}
		if got := c.Procs(tc.env, tc.cpus); got != tc.want {
			t.Errorf("Procs(max_procs=%d, env=%q, cpus=%d) = %d, want %d", tc.maxProcs, tc.env, tc.cpus, got, tc.want)
		}
	}
}

func TestYAMLFeatures(t *testing.T) {
	// Anchors, aliases and merge keys work as in any YAML file.
	c, _ := mustParse(t, `user_list:
  - {user: ks, password: ks}
nodes:
  - &n1
    name: node1
    user: ks
    password: secret
    max_conns_limit: 8
    master: 127.0.0.1:3307
  - <<: *n1
    name: node2
    master: 127.0.0.1:3308
`)
	if n, _ := c.Node("node2"); n.User != "ks" || n.Password != "secret" || n.MaxConnsLimit != 8 || n.Master != "127.0.0.1:3308" {
		t.Errorf("merged node2 = %+v", *n)
	}

	// A self-referencing anchor, a merge cycle and an alias bomb end with an
	// error, not a hang. The bomb reaches the walker: 100 schemas x 100 shard
	// rules x 2000 locations, all aliases of one list.
	bomb := "l: &L [" + strings.Repeat("1,", 2000) + "1]\nr: &r {locations: *L}\nschema_list: [" +
		strings.Repeat("{shard: ["+strings.Repeat("*r,", 100)+"*r]},", 100) + "{}]\n"
	for _, tt := range []struct{ src, want string }{
		{"admin_users: &a [*a]\n", "t.yaml:1: admin_users[0]: want a string, got a list"},
		{"nodes:\n  - &x {<<: [*x, *x, *x]}\n", "t.yaml:2: nodes[0].<<: merges a mapping into itself"},
		{bomb, "document too large: more than 262144 values after expanding aliases"},
	} {
		done := make(chan error, 1)
		go func() { _, _, err := Parse([]byte(tt.src), "t.yaml"); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("Parse hangs on %.60q", tt.src)
		}
	}

	// Problems are capped so a huge broken file gives a readable error.
	_, _, err := Parse([]byte(minimal+"admin_users: ["+strings.Repeat("x,", 1000)+"x]\n"), "t.yaml")
	if err == nil || !strings.HasSuffix(err.Error(), "t.yaml: ... and 951 more problems") || strings.Count(err.Error(), "\n") != maxProblems {
		t.Errorf("uncapped or miscounted: %d lines, ends %q", strings.Count(fmt.Sprint(err), "\n"), fmt.Sprint(err)[max(0, len(fmt.Sprint(err))-60):])
	}

	// Empty and comment-only files report what is missing.
	for _, s := range []string{"", "# nothing\n", "~\n"} {
		_, _, err := Parse([]byte(s), "t.yaml")
		if err == nil || !strings.Contains(err.Error(), "user_list: at least one user is required") {
			t.Errorf("Parse(%q) = %v", s, err)
		}
	}

	// Scalars keep their literal text in string fields.
	c, _ = mustParse(t, rep(minimal, "password: ks\nnodes", "password: 0123\nnodes")+"proxy_charset: utf8\n")
	if u, _ := c.UserPassword("ks"); u.Password != "0123" {
		t.Errorf("password = %q", u.Password)
	}
	// Empty list items outside shard are ignored with a warning.
	_, warns := mustParse(t, minimal+"  -\n")
	if !hasWarning(warns, "test.yaml:9: nodes[1]: empty item ignored") {
		t.Errorf("warnings %q", warns)
	}
}

// Every key kingshard defines is supported now: a file using all of them
// loads without a "not yet supported" warning.
func TestNoNotYetSupportedWarnings(t *testing.T) {
	_, warns := mustParse(t, `user_list:
  - {user: ks, password: ks}
blacklist_sql_file: /etc/bl
web_user: admin
web_password: admin
nodes:
  - name: node1
    user: ks
    master: 127.0.0.1:3307
    slave: 127.0.0.1:3309@2
    down_after_noalive: 30
  - name: node2
    user: ks
    master: 127.0.0.1:3308
    slave:
    down_after_noalive: 30
    rw_split: true
schema_list:
  - user: ks
    nodes: [node1]
    default: node1
    shard:
      - {db: d, table: t, key: id, type: hash, nodes: [node1], locations: [2]}
`)
	if len(warns) != 0 {
		t.Errorf("warnings\n%s", strings.Join(warns, "\n"))
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, _, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load = %v", err)
	}
}

func TestRWSplitKeys(t *testing.T) {
	c, warns := mustParse(t, `user_list:
  - {user: ks, password: ks, rw_split: false}
read_your_writes: OFF
master_reads: false
max_replication_lag: 10
nodes:
  - name: node1
    user: ks
    master: 127.0.0.1:3307
    slave: 127.0.0.1:3309@2,127.0.0.1:3310
    rw_split: false
    down_after_noalive: 30
schema_list:
  - {user: ks, nodes: [node1], default: node1, rw_split: true}
`)
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
	if c.ReadYourWrites != "off" || *c.MasterReads || c.MaxReplicationLag != 10 {
		t.Errorf("read_your_writes %q master_reads %v max_replication_lag %d", c.ReadYourWrites, *c.MasterReads, c.MaxReplicationLag)
	}
	if u, _ := c.UserPassword("ks"); u.RWSplit == nil || *u.RWSplit {
		t.Errorf("user rw_split = %v", u.RWSplit)
	}
	if s := c.SchemaList[0]; s.RWSplit == nil || !*s.RWSplit {
		t.Errorf("schema rw_split = %v", s.RWSplit)
	}
	// kingshard's old node key: false keeps the node's reads on its master.
	if n := c.Nodes[0]; n.RWSplit() || n.DownAfterNoAlive != 30 {
		t.Errorf("node rw_split %v down_after_noalive %d", n.RWSplit(), n.DownAfterNoAlive)
	}
}

// Node names go into XA transaction ids and SQL as they are: plain and
// short only. transaction_mode is xa or single.
func TestValidateNodeNamesAndTransactionMode(t *testing.T) {
	c := &Config{
		UserList:   []UserConfig{{User: "ks", Password: "ks"}},
		Nodes:      []NodeConfig{{Name: "node-1.a", User: "ks", Master: "127.0.0.1:3306"}},
		SchemaList: []SchemaConfig{{User: "ks", Nodes: []string{"node-1.a"}, Default: "node-1.a", TransactionMode: "xa"}},
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("valid: %v", err)
	}
	c.Nodes[0].Name = "it's"
	c.SchemaList[0].Nodes, c.SchemaList[0].Default, c.SchemaList[0].TransactionMode = []string{"it's"}, "it's", "multi"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), `"it's": a node name is 1-16 letters`) ||
		!strings.Contains(err.Error(), `transaction_mode: want xa or single, got "multi"`) {
		t.Fatalf("bad node name and mode: %v", err)
	}
}

// A config encodes as YAML (the status page's config digest hashes it),
// and the encoding holds its settings, not the positions kept for errors.
func TestConfigMarshals(t *testing.T) {
	c, _, err := Load("../../etc/ks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "master: 127.0.0.1:3307") || regexp.MustCompile(`(?m)^\s*-?\s*line:`).Match(b) {
		t.Fatalf("encoded config:\n%s", b)
	}
}
