package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/keyshard/keyshard/router/shard"
)

// Config is one ks.yaml. After Parse it is an immutable snapshot.
type Config struct {
	// kingshard keys
	Addr           string       `yaml:"addr"`
	PrometheusAddr string       `yaml:"prometheus_addr"`
	UserList       []UserConfig `yaml:"user_list"`
	WebAddr        string       `yaml:"web_addr"`
	WebUser        string       `yaml:"web_user"`
	WebPassword    string       `yaml:"web_password"`
	LogPath        string       `yaml:"log_path"`
	LogLevel       string       `yaml:"log_level"`     // debug|info|warn|error, default info
	LogSQL         string       `yaml:"log_sql"`       // on|off, default off
	SlowLogTime    int          `yaml:"slow_log_time"` // ms, 0 = off
	AllowIPs       string       `yaml:"allow_ips"`     // comma-separated IPs and CIDRs
	// WebAllowIPs: who may reach web_addr (REST, /metrics, pprof,
	// /healthz); empty: allow_ips.
	WebAllowIPs string `yaml:"web_allow_ips"`
	// WebMetricsAuth: /metrics asks for web_user/web_password (default
	// false: Prometheus scrapes without); WebPprofAuth: /debug/pprof/ does
	// (default true).
	WebMetricsAuth   *bool          `yaml:"web_metrics_auth"`
	WebPprofAuth     *bool          `yaml:"web_pprof_auth"`
	BlacklistSQLFile string         `yaml:"blacklist_sql_file"`
	ProxyCharset     string         `yaml:"proxy_charset"` // default utf8mb4
	Nodes            []NodeConfig   `yaml:"nodes"`
	SchemaList       []SchemaConfig `yaml:"schema_list"`

	// keyshard additions, all optional; etc/ks.yaml documents each.
	MaxConnections int `yaml:"max_connections"` // default 4096; 0 = unlimited; ER_CON_COUNT_ERROR past it
	// MaxUnauthPerHost caps one client address's connections that have
	// not logged in yet (default 32; 0 = no cap).
	MaxUnauthPerHost int `yaml:"max_unauthenticated_per_host"`
	// LoginLockoutFailures: an address with this many failed logins
	// within a minute is refused for login_lockout_time (0: never, the
	// default); failures are slowed and logged regardless.
	LoginLockoutFailures int      `yaml:"login_lockout_failures"`
	LoginLockoutTime     Duration `yaml:"login_lockout_time"`   // default 5m
	MaxProcs             int      `yaml:"max_procs"`            // GOMAXPROCS; 0 = GOMAXPROCS env or half the CPUs
	TCPNoDelay           *bool    `yaml:"tcp_nodelay"`          // client side; default true
	BackendTCPNoDelay    *bool    `yaml:"backend_tcp_nodelay"`  // default true
	ClientWriteBuffer    int      `yaml:"client_write_buffer"`  // bytes, default 16384
	BackendWriteBuffer   int      `yaml:"backend_write_buffer"` // bytes, default 16384
	ReadBuffer           int      `yaml:"read_buffer"`          // bytes, default 16384
	PoolWaitTimeout      Duration `yaml:"pool_wait_timeout"`    // default 5s
	PoolIdleTimeout      Duration `yaml:"pool_idle_timeout"`    // default 60s
	PoolMaxLifetime      Duration `yaml:"pool_max_lifetime"`    // default 1h
	PoolMinIdle          int      `yaml:"pool_min_idle"`        // warm set per node; omitted = 2; capped per node at max_conns_limit
	ConnectTimeout       Duration `yaml:"connect_timeout"`      // backend dial+handshake, default 3s
	// BackendSilence: a statement's backend that sends nothing for this
	// long is checked for life (a new connection must log in within
	// connect_timeout); a frozen one fails the statement. Default 5s;
	// 0 turns the check off.
	BackendSilence   Duration `yaml:"backend_silence"`
	ShutdownTimeout  Duration `yaml:"shutdown_timeout"`   // default 10s
	MaxAllowedPacket int      `yaml:"max_allowed_packet"` // default 64 MiB
	StmtCacheSize    int      `yaml:"stmt_cache_size"`    // prepared statements kept per backend connection, default 64
	// BackendPipelineDepth: autocommit statements of sessions with the
	// same backend state in flight at once on one backend connection
	// (etc/ks.yaml); 1 or 0 = off.
	BackendPipelineDepth int    `yaml:"backend_pipeline_depth"`
	MaxMergeRows         int    `yaml:"max_merge_rows"` // groups a cross-shard merge may hold to re-sort, default 100000
	ServerVersion        string `yaml:"server_version"` // the version clients see; default: the backends' own (see proxy/identity.go)

	// Writes over several nodes (XA two-phase commit; etc/ks.yaml).
	XALogNode         string   `yaml:"xa_log_node"`         // node keeping the sequences (and older versions' commit decisions); default: the first schema's default node
	XALogDB           string   `yaml:"xa_log_db"`           // database of the decision table there, default keyshard
	XARecoverInterval Duration `yaml:"xa_recover_interval"` // how often prepared branches are recovered, default 30s
	XAPreparedTimeout Duration `yaml:"xa_prepared_timeout"` // a prepared branch with no decision this old is rolled back, default 60s

	// Online resharding (ADMIN RESHARD; README "Growing a sharded table").
	ReshardCutoverTimeout Duration `yaml:"reshard_cutover_timeout"` // statements held at most this long for the switch, default 5s

	// Read/write splitting and health checks (etc/ks.yaml documents each).
	HealthCheckInterval  Duration `yaml:"health_check_interval"`   // default 1s
	HealthCheckTimeout   Duration `yaml:"health_check_timeout"`    // default 1s
	MaxReplicationLag    int      `yaml:"max_replication_lag"`     // seconds; 0 = off
	MasterReads          *bool    `yaml:"master_reads"`            // master serves reads when no replica can; default true
	ReadYourWrites       string   `yaml:"read_your_writes"`        // master | off; default master
	ReadYourWritesWindow Duration `yaml:"read_your_writes_window"` // default 1s
	TLSCert              string   `yaml:"tls_cert"`                // PEM paths; both or neither
	TLSKey               string   `yaml:"tls_key"`
	RSAKey               string   `yaml:"rsa_key"`             // PEM private key for caching_sha2 full auth; empty = generated at start
	DefaultAuthPlugin    string   `yaml:"default_auth_plugin"` // mysql_native_password (default) | caching_sha2_password
	AdminUsers           []string `yaml:"admin_users"`
	ConfigWatchInterval  Duration `yaml:"config_watch_interval"` // reload when the file changes, checked this often; 0 = off
	LogMaxSizeMB         int      `yaml:"log_max_size_mb"`       // lumberjack, default 100
	LogMaxBackups        int      `yaml:"log_max_backups"`       // omitted = 5; 0 = keep all
	LogMaxAgeDays        int      `yaml:"log_max_age_days"`      // omitted = 7; 0 = no age limit
	LogCompress          *bool    `yaml:"log_compress"`          // default true
	DigestSize           int      `yaml:"digest_size"`           // statement digests kept; omitted = 1000; 0 = off
	DigestMetricsTop     int      `yaml:"digest_metrics_top"`    // digests on /metrics (top by total time); omitted = 20; 0 = none
	// The result cache: memory for cached results (0 = off), the largest
	// result cached, and which statements are cached for how long.
	ResultCacheMB      int               `yaml:"result_cache_mb"`
	ResultCacheEntryKB int               `yaml:"result_cache_entry_kb"` // omitted = 256
	ResultCacheRules   []ResultCacheRule `yaml:"result_cache_rules"`
	// BackendAccounts: clients may also log in as the backend's own
	// accounts (accounts.go); nil: off.
	BackendAccounts *BackendAccounts `yaml:"backend_accounts"`

	src string // Source given to Parse, for Validate's messages
	pos `yaml:"-"`
}

// UserConfig is one client account of user_list.
type UserConfig struct {
	User     string `yaml:"user"`
	Password string `yaml:"password"`
	// AuthPlugin is a keyshard addition: if set and the client starts with
	// another plugin, the proxy sends an auth switch.
	AuthPlugin string `yaml:"auth_plugin"`
	// RWSplit false keeps all of this user's reads on the masters.
	RWSplit *bool `yaml:"rw_split"`
	// ServerAdmin lets this user run server-administration statements
	// (SHUTDOWN, SET GLOBAL, GRANT, CREATE USER, INSTALL PLUGIN,
	// server-side file access); others get 1227. Admin users have it.
	ServerAdmin bool `yaml:"server_admin"`
	// ReadOnly refuses (1227) every statement that could change data or
	// schema: reads, SET, USE, SHOW, transactions and the like run.
	ReadOnly bool `yaml:"read_only"`
	// NoDDL refuses (1227) CREATE, ALTER, DROP, RENAME, TRUNCATE.
	NoDDL bool `yaml:"no_ddl"`
	// BackendUser and BackendPassword, if set, are the backend account
	// keyshard uses on this user's behalf on every node (its own pools),
	// so that the server's grants apply as well; else the node's.
	BackendUser     string `yaml:"backend_user"`
	BackendPassword string `yaml:"backend_password"`
	// MaxConnections caps this user's open sessions (0 = no cap).
	MaxConnections int `yaml:"max_connections"`
	// MaxExecutionTime is this user's statement time limit in
	// milliseconds (0: the schema's, if any); see SchemaConfig.
	MaxExecutionTime int `yaml:"max_execution_time"`

	pos `yaml:"-"`
}

// ResultCacheRule caches the results of the read-only statements of a
// digest (its id, as SHOW DIGESTS gives it) or of those that read a table
// (db.table), for TTL.
type ResultCacheRule struct {
	Digest string   `yaml:"digest"`
	Table  string   `yaml:"table"`
	TTL    Duration `yaml:"ttl"`

	pos `yaml:"-"`
}

// NodeConfig is one backend node: a master and optional weighted slaves.
type NodeConfig struct {
	Name             string `yaml:"name"`
	DownAfterNoAlive int    `yaml:"down_after_noalive"` // seconds
	MaxConnsLimit    int    `yaml:"max_conns_limit"`    // default 16 if 0
	User             string `yaml:"user"`
	Password         string `yaml:"password"`
	Master           string `yaml:"master"` // host:port (weight suffix not allowed on master)
	Slave            string `yaml:"slave"`  // "host:port@weight,host:port@weight", weight default 1
	// FailoverAfter: once the master has been down this long, keyshard
	// follows a replica that was promoted (the one writable, not
	// replicating one; see proxy/control/failover.go). 0, the default: never.
	FailoverAfter Duration `yaml:"failover_after"`

	// kingshard 2015 keys, read by legacy.go only
	idleConns int
	rwSplit   *bool // false: this node's reads stay on its master

	pos `yaml:"-"`
}

// SchemaConfig says which nodes a user's queries may reach and how its
// sharded tables are split.
type SchemaConfig struct {
	User      string        `yaml:"user"`
	Nodes     []string      `yaml:"nodes"`
	Default   string        `yaml:"default"`
	ShardRule []ShardConfig `yaml:"shard"`
	// RWSplit false keeps the schema's reads on the masters.
	RWSplit *bool `yaml:"rw_split"`
	// TransactionMode: xa (default) lets a transaction reach several
	// nodes, committed in two phases; single keeps it on its first node
	// (a statement for another node is refused).
	TransactionMode string `yaml:"transaction_mode"`
	// MaxExecutionTime is the time limit of the schema's statements in
	// milliseconds (0: none): past it keyshard stops the statement on
	// every backend it runs on (KILL QUERY) and answers with the server's
	// timeout error. Pool waits count.
	MaxExecutionTime int `yaml:"max_execution_time"`

	pos `yaml:"-"`
}

// ShardConfig is one sharded table. The shard functions live in
// router/shard; here only the shape is checked.
type ShardConfig struct {
	DB            string   `yaml:"db"`
	Table         string   `yaml:"table"`
	Key           string   `yaml:"key"`
	Nodes         []string `yaml:"nodes"`
	Locations     []int    `yaml:"locations"`
	Type          string   `yaml:"type"` // see ShardTypes
	TableRowLimit int      `yaml:"table_row_limit"`
	DateRange     []string `yaml:"date_range"`
	// ListValues (keyshard, type list): entry i lists the key values,
	// comma-separated, that live in sub-table i.
	ListValues []string `yaml:"list_values"`
	// AutoIncrement (keyshard) names the column an INSERT that omits it
	// (or gives NULL) fills from a sequence: ids unique across the
	// sub-tables and every keyshard instance sharing the backends.
	AutoIncrement string `yaml:"auto_increment"`
	// Sequence names the sequence (its row in <xa_log_db>.ks_sequence on
	// xa_log_node); default "<db>.<table>". Rules naming one sequence
	// share its ids.
	Sequence string `yaml:"sequence"`
	// SequenceCache is how many ids one block takes (one round trip to
	// the sequence's node); default 1000.
	SequenceCache int `yaml:"sequence_cache"`

	pos `yaml:"-"`
}

// SequenceName is the name of the rule's sequence: sequence, else
// "<db>.<table>".
func (r *ShardConfig) SequenceName() string {
	if r.Sequence != "" {
		return r.Sequence
	}
	return r.DB + "." + r.Table
}

// ShardTypes are the shard rule type names accepted in ShardConfig.Type.
var ShardTypes = shard.Types

// ShardRule builds the shard.Config of a rule (validated by Validate).
func (r *ShardConfig) ShardRule() shard.Config {
	c := shard.Config{Type: r.Type, Nodes: len(r.Nodes), Locations: r.Locations,
		TableRowLimit: r.TableRowLimit, DateRange: r.DateRange}
	if len(r.ListValues) > 0 {
		c.ListValues = map[string]int{}
		for i, vals := range r.ListValues {
			for v := range strings.SplitSeq(vals, ",") {
				if v = strings.TrimSpace(v); v != "" {
					c.ListValues[v] = i
				}
			}
		}
	}
	return c
}

// Slave is one read replica of a node.
type Slave struct {
	Addr   string // host:port
	Weight int    // >= 1
}

// pos remembers where a struct came from so that Validate, which runs after
// decoding, can still name the line. It is zero for structs built in code.
type pos struct {
	path string         // "nodes[1]"; empty at top level
	line int            // line of the mapping
	keys map[string]int // key -> line of that key
}

func (p *pos) setPos(q pos) { *p = q }

// lineOf returns the line of key, else of the mapping, else 0.
func (p pos) lineOf(key string) int {
	if l, ok := p.keys[key]; ok {
		return l
	}
	return p.line
}

// has reports whether key was written in the file.
func (p pos) has(key string) bool {
	_, ok := p.keys[key]
	return ok
}

// pathOr returns the recorded path, or def for a struct built in code.
func (p pos) pathOr(def string) string {
	if p.path != "" {
		return p.path
	}
	return def
}

// Load reads and parses a config file. Error messages name the file as path.
func Load(path string) (*Config, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return Parse(data, path)
}

// Parse decodes data strictly, maps kingshard's older forms, applies the
// defaults and validates. source names the file in messages. The warnings
// are meant to be logged once at startup; they are returned even with an
// error.
func Parse(data []byte, source string) (*Config, []string, error) {
	d := newDecoder(source)
	cfg := &Config{src: source}
	d.decodeFile(data, cfg)
	d.applyLegacy(cfg)
	if err := d.err(); err != nil {
		return nil, d.warnings(), err
	}
	d.dedupeUsers(cfg)
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, d.warnings(), err
	}
	d.lint(cfg)
	d.notYetSupported(cfg)
	return cfg, d.warnings(), nil
}

// UserPassword returns the user_list entry for user.
func (c *Config) UserPassword(user string) (UserConfig, bool) {
	for _, u := range c.UserList {
		if u.User == user {
			return u, true
		}
	}
	return UserConfig{}, false
}

// SchemaFor returns the schema of user.
func (c *Config) SchemaFor(user string) (*SchemaConfig, bool) {
	for i := range c.SchemaList {
		if c.SchemaList[i].User == user {
			return &c.SchemaList[i], true
		}
	}
	return nil, false
}

// Node returns the node called name.
func (c *Config) Node(name string) (*NodeConfig, bool) {
	for i := range c.Nodes {
		if c.Nodes[i].Name == name {
			return &c.Nodes[i], true
		}
	}
	return nil, false
}

// IsAdmin reports whether user may run admin commands and kill other users'
// connections: "root", as in kingshard, or anyone listed in admin_users.
func (c *Config) IsAdmin(user string) bool {
	if user == "root" {
		return true
	}
	for _, a := range c.AdminUsers {
		if a == user {
			return true
		}
	}
	return false
}

// Source is the file name the config was parsed from.
func (c *Config) Source() string { return c.src }

// Slaves parses the slave string: comma-separated host:port, each with an
// optional @weight (default 1). Empty items are skipped so that generated
// lists with a trailing comma load.
func (n NodeConfig) Slaves() ([]Slave, error) { return ParseSlaves(n.Slave) }

// ParseSlaves parses a slave list (see NodeConfig.Slaves).
func ParseSlaves(list string) ([]Slave, error) {
	var out []Slave
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		s := Slave{Addr: item, Weight: 1}
		if addr, w, ok := strings.Cut(item, "@"); ok {
			s.Addr = strings.TrimSpace(addr)
			weight, err := strconv.Atoi(strings.TrimSpace(w))
			if err != nil || weight < 1 {
				return nil, fmt.Errorf("slave %q: bad weight %q: want an integer >= 1", item, w)
			}
			s.Weight = weight
		}
		if err := checkHostPort(s.Addr, true); err != nil {
			return nil, fmt.Errorf("slave %q: %v", item, err)
		}
		for _, prev := range out {
			if prev.Addr == s.Addr {
				return nil, fmt.Errorf("slave %q listed twice", s.Addr)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// FormatSlaves is the slave string of a list: host:port, with @weight
// when it is not 1.
func FormatSlaves(list []Slave) string {
	parts := make([]string, len(list))
	for i, sl := range list {
		parts[i] = sl.Addr
		if sl.Weight > 1 {
			parts[i] += "@" + strconv.Itoa(sl.Weight)
		}
	}
	return strings.Join(parts, ",")
}

// Procs is the GOMAXPROCS keyshard runs with: max_procs when set, else the
// GOMAXPROCS environment variable (env) when it holds a positive number,
// else half of cpus (the CPUs Go would use by itself), at least 1. Halving
// is the measured default: a relay spends most of its time in the kernel,
// waking its peers, and a second P mostly adds runtime wake-ups and
// speculative reads that find nothing (bench/RESULTS.md, 2026-11-23).
func (c *Config) Procs(env string, cpus int) int {
	if c.MaxProcs > 0 {
		return c.MaxProcs
	}
	if n, err := strconv.Atoi(strings.TrimSpace(env)); err == nil && n > 0 {
		return n
	}
	return max(1, cpus/2)
}

// RWSplit reports whether reads may go to this node's replicas (false only
// when kingshard's old node key rw_split says so).
func (n *NodeConfig) RWSplit() bool { return n.rwSplit == nil || *n.rwSplit }
