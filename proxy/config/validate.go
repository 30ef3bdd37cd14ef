package config

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keyshard/keyshard/router/shard"
)

// Defaults, documented in etc/ks.yaml.
const (
	defaultAddr          = "127.0.0.1:9696"
	defaultLogLevel      = "info"
	defaultLogSQL        = "off"
	defaultCharset       = "utf8mb4"
	defaultBuffer        = 16 << 10
	defaultPoolWait      = 5 * time.Second
	defaultPoolIdle      = 60 * time.Second
	defaultPoolLifetime  = time.Hour
	defaultPoolMinIdle   = 2
	defaultConnect       = 3 * time.Second
	defaultShutdown      = 10 * time.Second
	defaultMaxPacket     = 64 << 20
	defaultAuthPlugin    = AuthNativePassword
	defaultLogMaxSizeMB  = 100
	defaultLogMaxBackups = 5
	defaultDigestSize    = 1000
	// defaultResultCacheEntryKB: a result bigger than this is never cached.
	defaultResultCacheEntryKB = 256
	defaultDigestTop          = 20
	defaultLogMaxAgeDays      = 7
	defaultMaxConnsLimit      = 16
	defaultStmtCache          = 64
	defaultMaxMergeRows       = 100000
	defaultHealthCheck        = time.Second
	defaultRYWWindow          = time.Second
	defaultReadYourWrite      = "master"
	defaultXALogDB            = "keyshard"
	defaultSequenceCache      = 1000
	// A backend silent this long while a statement waits is checked for
	// life.
	defaultBackendSilence = 5 * time.Second
	defaultPipelineDepth  = 1
	maxPipelineDepth      = 64
	// Pre-login bounds: a default max_connections, and a cap on one
	// address's connections still logging in.
	defaultMaxConnections   = 4096
	defaultMaxUnauthPerHost = 256
	defaultXARecover        = 30 * time.Second
	defaultXATimeout        = 60 * time.Second

	minMaxPacket = 1 << 10 // MySQL's own bounds for max_allowed_packet
	maxMaxPacket = 1 << 30
)

// Auth plugin names accepted by default_auth_plugin and auth_plugin.
const (
	AuthNativePassword = "mysql_native_password"
	AuthCachingSHA2    = "caching_sha2_password"
)

// ApplyDefaults fills every unset field with its default and lower-cases
// log_level and log_sql. Parse calls it; code that builds a Config by hand
// may too. Most keys treat 0 as unset; pool_min_idle, log_max_backups and
// log_max_age_days treat an explicit 0 in the file as meaningful ("no warm
// set", "keep all", "no age limit") and default only when omitted.
func (c *Config) ApplyDefaults() {
	str := func(p *string, def string) {
		if *p == "" {
			*p = def
		}
	}
	num := func(p *int, def int) {
		if *p == 0 {
			*p = def
		}
	}
	omitted := func(p *int, key string, def int) {
		if *p == 0 && !c.has(key) {
			*p = def
		}
	}
	dur := func(p *Duration, def time.Duration) {
		if *p == 0 {
			*p = Duration(def)
		}
	}
	boolean := func(p **bool, def bool) {
		if *p == nil {
			*p = &def
		}
	}
	str(&c.Addr, defaultAddr)
	c.LogLevel = strings.ToLower(c.LogLevel)
	str(&c.LogLevel, defaultLogLevel)
	c.LogSQL = strings.ToLower(c.LogSQL)
	str(&c.LogSQL, defaultLogSQL)
	str(&c.ProxyCharset, defaultCharset)
	boolean(&c.TCPNoDelay, true)
	boolean(&c.BackendTCPNoDelay, true)
	num(&c.ClientWriteBuffer, defaultBuffer)
	num(&c.BackendWriteBuffer, defaultBuffer)
	num(&c.ReadBuffer, defaultBuffer)
	dur(&c.PoolWaitTimeout, defaultPoolWait)
	dur(&c.PoolIdleTimeout, defaultPoolIdle)
	dur(&c.PoolMaxLifetime, defaultPoolLifetime)
	omitted(&c.PoolMinIdle, "pool_min_idle", defaultPoolMinIdle)
	dur(&c.ConnectTimeout, defaultConnect)
	if !c.has("backend_silence") {
		c.BackendSilence = Duration(defaultBackendSilence)
	}
	dur(&c.ShutdownTimeout, defaultShutdown)
	num(&c.MaxAllowedPacket, defaultMaxPacket)
	num(&c.StmtCacheSize, defaultStmtCache)
	omitted(&c.BackendPipelineDepth, "backend_pipeline_depth", defaultPipelineDepth)
	num(&c.MaxMergeRows, defaultMaxMergeRows)
	dur(&c.HealthCheckInterval, defaultHealthCheck)
	dur(&c.HealthCheckTimeout, defaultHealthCheck)
	boolean(&c.MasterReads, true)
	c.ReadYourWrites = strings.ToLower(c.ReadYourWrites)
	str(&c.ReadYourWrites, defaultReadYourWrite)
	dur(&c.ReadYourWritesWindow, defaultRYWWindow)
	str(&c.XALogDB, defaultXALogDB)
	omitted(&c.MaxConnections, "max_connections", defaultMaxConnections)
	omitted(&c.MaxUnauthPerHost, "max_unauthenticated_per_host", defaultMaxUnauthPerHost)
	dur(&c.LoginLockoutTime, 5*time.Minute)
	dur(&c.XARecoverInterval, defaultXARecover)
	dur(&c.XAPreparedTimeout, defaultXATimeout)
	dur(&c.ReshardCutoverTimeout, 5*time.Second)
	if c.XALogNode == "" && len(c.SchemaList) > 0 {
		c.XALogNode = c.SchemaList[0].Default
	}
	for i := range c.SchemaList {
		for j := range c.SchemaList[i].ShardRule {
			if r := &c.SchemaList[i].ShardRule[j]; r.AutoIncrement != "" {
				num(&r.SequenceCache, defaultSequenceCache)
			}
		}
	}
	str(&c.DefaultAuthPlugin, defaultAuthPlugin)
	num(&c.LogMaxSizeMB, defaultLogMaxSizeMB)
	omitted(&c.LogMaxBackups, "log_max_backups", defaultLogMaxBackups)
	omitted(&c.LogMaxAgeDays, "log_max_age_days", defaultLogMaxAgeDays)
	boolean(&c.LogCompress, true)
	omitted(&c.DigestSize, "digest_size", defaultDigestSize)
	omitted(&c.DigestMetricsTop, "digest_metrics_top", defaultDigestTop)
	omitted(&c.ResultCacheEntryKB, "result_cache_entry_kb", defaultResultCacheEntryKB)
	for i := range c.Nodes {
		num(&c.Nodes[i].MaxConnsLimit, defaultMaxConnsLimit)
	}
}

// Validate checks c as a whole: addresses, enumerations, ranges and every
// cross reference (schema -> user, schema and shard rule -> node). Zero
// values that have a default are accepted, so it may run before or after
// ApplyDefaults. The error joins one *Error per problem, with the line when
// c came from Parse.
func (c *Config) Validate() error {
	p := &problems{src: c.src}
	c.validateTop(p)
	users := c.validateUsers(p)
	nodes := c.validateNodes(p)
	c.validateSchemas(p, users, nodes)
	c.validateAccounts(p, users, nodes)
	if c.XALogNode != "" && nodes[c.XALogNode] == nil {
		p.add(c.lineOf("xa_log_node"), "xa_log_node", "unknown node %q", c.XALogNode)
	}
	return p.err()
}

// validateCacheRules checks result_cache_rules: each a digest id or a
// db.table, with a TTL.
func (c *Config) validateCacheRules(p *problems) {
	for i := range c.ResultCacheRules {
		r := &c.ResultCacheRules[i]
		rp := r.pathOr(fmt.Sprintf("result_cache_rules[%d]", i))
		switch {
		case (r.Digest == "") == (r.Table == ""):
			p.add(r.lineOf("digest"), rp, "want one of digest (a digest id, as SHOW DIGESTS shows it) or table (db.table)")
		case r.Digest != "" && (len(r.Digest) != 16 || strings.Trim(strings.ToLower(r.Digest), "0123456789abcdef") != ""):
			p.add(r.lineOf("digest"), join(rp, "digest"), "want a digest id of 16 hex digits, as SHOW DIGESTS shows it, got %q", r.Digest)
		case r.Table != "" && strings.Count(r.Table, ".") != 1:
			p.add(r.lineOf("table"), join(rp, "table"), "want db.table, got %q", r.Table)
		}
		if r.TTL <= 0 {
			p.add(r.lineOf("ttl"), join(rp, "ttl"), "want how long a result is kept (e.g. 1s), more than 0")
		}
	}
}

func (c *Config) validateTop(p *problems) {
	c.validateCacheRules(p)
	at := func(key string) int { return c.lineOf(key) }
	for _, a := range []struct{ key, val string }{
		{"addr", c.Addr}, {"web_addr", c.WebAddr}, {"prometheus_addr", c.PrometheusAddr},
	} {
		if a.val == "" {
			continue
		}
		if err := checkHostPort(a.val, false); err != nil {
			p.add(at(a.key), a.key, "%v", err)
		}
	}
	if !oneOf(strings.ToLower(c.LogLevel), "", "debug", "info", "warn", "error") {
		p.add(at("log_level"), "log_level", "want debug, info, warn or error, got %q", c.LogLevel)
	}
	if !oneOf(strings.ToLower(c.ReadYourWrites), "", "master", "off") {
		p.add(at("read_your_writes"), "read_your_writes", "want master or off, got %q", c.ReadYourWrites)
	}
	if !oneOf(strings.ToLower(c.LogSQL), "", "on", "off") {
		p.add(at("log_sql"), "log_sql", "want on or off, got %q", c.LogSQL)
	}
	if err := checkAllowIPs(c.WebAllowIPs); err != nil {
		p.add(at("web_allow_ips"), "web_allow_ips", "%v", err)
	}
	if err := checkAllowIPs(c.AllowIPs); err != nil {
		p.add(at("allow_ips"), "allow_ips", "%v", err)
	}
	for _, n := range []struct {
		key string
		val int
	}{
		{"slow_log_time", c.SlowLogTime}, {"max_connections", c.MaxConnections}, {"max_unauthenticated_per_host", c.MaxUnauthPerHost}, {"login_lockout_failures", c.LoginLockoutFailures}, {"max_procs", c.MaxProcs},
		{"client_write_buffer", c.ClientWriteBuffer}, {"backend_write_buffer", c.BackendWriteBuffer},
		{"read_buffer", c.ReadBuffer}, {"pool_min_idle", c.PoolMinIdle},
		{"log_max_size_mb", c.LogMaxSizeMB}, {"log_max_backups", c.LogMaxBackups}, {"log_max_age_days", c.LogMaxAgeDays},
		{"stmt_cache_size", c.StmtCacheSize}, {"backend_pipeline_depth", c.BackendPipelineDepth}, {"max_merge_rows", c.MaxMergeRows}, {"max_replication_lag", c.MaxReplicationLag},
		{"digest_size", c.DigestSize}, {"digest_metrics_top", c.DigestMetricsTop},
		{"result_cache_mb", c.ResultCacheMB}, {"result_cache_entry_kb", c.ResultCacheEntryKB},
	} {
		if n.val < 0 {
			p.add(at(n.key), n.key, "must not be negative, got %d", n.val)
		}
	}
	if c.BackendPipelineDepth > maxPipelineDepth {
		p.add(at("backend_pipeline_depth"), "backend_pipeline_depth", "must be at most %d statements in flight on one connection, got %d",
			maxPipelineDepth, c.BackendPipelineDepth)
	}
	for _, d := range []struct {
		key string
		val Duration
	}{
		{"pool_wait_timeout", c.PoolWaitTimeout}, {"pool_idle_timeout", c.PoolIdleTimeout},
		{"pool_max_lifetime", c.PoolMaxLifetime}, {"connect_timeout", c.ConnectTimeout}, {"backend_silence", c.BackendSilence},
		{"login_lockout_time", c.LoginLockoutTime},
		{"health_check_interval", c.HealthCheckInterval}, {"health_check_timeout", c.HealthCheckTimeout},
		{"read_your_writes_window", c.ReadYourWritesWindow},
		{"shutdown_timeout", c.ShutdownTimeout},
		{"xa_recover_interval", c.XARecoverInterval}, {"xa_prepared_timeout", c.XAPreparedTimeout},
		{"reshard_cutover_timeout", c.ReshardCutoverTimeout},
	} {
		if d.val < 0 {
			p.add(at(d.key), d.key, "must not be negative, got %s", d.val)
		}
	}
	if m := c.MaxAllowedPacket; m != 0 && (m < minMaxPacket || m > maxMaxPacket) {
		p.add(at("max_allowed_packet"), "max_allowed_packet", "want %d..%d bytes, got %d", minMaxPacket, maxMaxPacket, m)
	}
	switch {
	case c.TLSCert != "" && c.TLSKey == "":
		p.add(at("tls_cert"), "tls_cert", "set without tls_key: set both or neither")
	case c.TLSCert == "" && c.TLSKey != "":
		p.add(at("tls_key"), "tls_key", "set without tls_cert: set both or neither")
	}
	if !oneOf(c.DefaultAuthPlugin, "", AuthNativePassword, AuthCachingSHA2) {
		p.add(at("default_auth_plugin"), "default_auth_plugin", "want %s or %s, got %q", AuthNativePassword, AuthCachingSHA2, c.DefaultAuthPlugin)
	}
}

// validateUsers checks user_list and admin_users and returns the users by
// name.
func (c *Config) validateUsers(p *problems) map[string]*UserConfig {
	users := map[string]*UserConfig{}
	backendUsers := map[string]*UserConfig{}
	if len(c.UserList) == 0 {
		p.add(c.lineOf("user_list"), "user_list", "at least one user is required")
	}
	for i := range c.UserList {
		u := &c.UserList[i]
		up := u.pathOr(fmt.Sprintf("user_list[%d]", i))
		if u.User == "" {
			p.add(u.lineOf("user"), join(up, "user"), "required")
			continue
		}
		if f, dup := users[u.User]; dup {
			p.add(u.lineOf("user"), join(up, "user"), "duplicate user %q with a different password or auth_plugin (first at %s)", u.User, where(f.pos, "user"))
			continue
		}
		users[u.User] = u
		if u.MaxConnections < 0 {
			p.add(u.lineOf("max_connections"), join(up, "max_connections"), "want 0 (no cap) or more, got %d", u.MaxConnections)
		}
		if u.MaxExecutionTime < 0 {
			p.add(u.lineOf("max_execution_time"), join(up, "max_execution_time"), "want milliseconds, 0 (none) or more, got %d", u.MaxExecutionTime)
		}
		if !oneOf(u.AuthPlugin, "", AuthNativePassword, AuthCachingSHA2) {
			p.add(u.lineOf("auth_plugin"), join(up, "auth_plugin"), "want %s or %s, got %q", AuthNativePassword, AuthCachingSHA2, u.AuthPlugin)
		}
		if u.ReadOnly && u.ServerAdmin {
			p.add(u.lineOf("read_only"), join(up, "read_only"), "a read_only user cannot be server_admin")
		}
		if u.BackendPassword != "" && u.BackendUser == "" {
			p.add(u.lineOf("backend_password"), join(up, "backend_password"), "set without backend_user")
		}
		if u.BackendUser != "" {
			if f, ok := backendUsers[u.BackendUser]; ok && f.BackendPassword != u.BackendPassword {
				p.add(u.lineOf("backend_password"), join(up, "backend_password"), "backend_user %q has another backend_password at %s", u.BackendUser, where(f.pos, "backend_password"))
			}
			backendUsers[u.BackendUser] = u
		}
	}
	for i, a := range c.AdminUsers {
		if _, ok := users[a]; !ok {
			p.add(c.lineOf("admin_users"), fmt.Sprintf("admin_users[%d]", i), "user %q is not in user_list", a)
		}
	}
	return users
}

// validateNodes checks nodes and returns them by name.
func (c *Config) validateNodes(p *problems) map[string]*NodeConfig {
	nodes := map[string]*NodeConfig{}
	if len(c.Nodes) == 0 {
		p.add(c.lineOf("nodes"), "nodes", "at least one node is required")
	}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		np := n.pathOr(fmt.Sprintf("nodes[%d]", i))
		if n.Name != "" && !nodeNameOK(n.Name) {
			p.add(n.lineOf("name"), join(np, "name"), "%q: a node name is 1-16 letters, digits, '_', '-' or '.' (it goes into XA transaction ids)", n.Name)
		}
		switch f, dup := nodes[n.Name]; {
		case n.Name == "":
			p.add(n.lineOf("name"), join(np, "name"), "required")
		case dup:
			p.add(n.lineOf("name"), join(np, "name"), "duplicate node %q (first at %s)", n.Name, where(f.pos, "name"))
		default:
			nodes[n.Name] = n
		}
		switch {
		case n.Master == "":
			p.add(n.lineOf("master"), join(np, "master"), "required")
		case strings.Contains(n.Master, "@"):
			p.add(n.lineOf("master"), join(np, "master"), "%q: a weight suffix is only allowed on slaves", n.Master)
		default:
			if err := checkHostPort(n.Master, true); err != nil {
				p.add(n.lineOf("master"), join(np, "master"), "%v", err)
			}
		}
		if _, err := n.Slaves(); err != nil {
			p.add(n.lineOf("slave"), join(np, "slave"), "%v", err)
		}
		if n.User == "" {
			p.add(n.lineOf("user"), join(np, "user"), "required")
		}
		if n.MaxConnsLimit < 0 {
			p.add(n.lineOf("max_conns_limit"), join(np, "max_conns_limit"), "must not be negative, got %d", n.MaxConnsLimit)
		}
		if n.DownAfterNoAlive < 0 {
			p.add(n.lineOf("down_after_noalive"), join(np, "down_after_noalive"), "must not be negative, got %d", n.DownAfterNoAlive)
		}
		if n.FailoverAfter != 0 && n.FailoverAfter.D() < time.Second {
			p.add(n.lineOf("failover_after"), join(np, "failover_after"), "want 0 (off) or at least 1s, got %v", n.FailoverAfter)
		}
	}
	return nodes
}

func (c *Config) validateSchemas(p *problems, users map[string]*UserConfig, nodes map[string]*NodeConfig) {
	seen := map[string]*SchemaConfig{}
	for i := range c.SchemaList {
		s := &c.SchemaList[i]
		sp := s.pathOr(fmt.Sprintf("schema_list[%d]", i))
		// A user missing from user_list is only a warning (see lint):
		// kingshard's own unshard.yaml has a schema for such a user.
		switch f, dup := seen[s.User]; {
		case s.User == "":
			p.add(s.lineOf("user"), join(sp, "user"), "required")
		case dup:
			p.add(s.lineOf("user"), join(sp, "user"), "second schema for user %q (first at %s)", s.User, where(f.pos, "user"))
		default:
			seen[s.User] = s
		}
		if s.MaxExecutionTime < 0 {
			p.add(s.lineOf("max_execution_time"), join(sp, "max_execution_time"), "want milliseconds, 0 (none) or more, got %d", s.MaxExecutionTime)
		}
		member := map[string]bool{}
		if len(s.Nodes) == 0 {
			p.add(s.lineOf("nodes"), join(sp, "nodes"), "at least one node is required")
		}
		for _, name := range s.Nodes {
			switch {
			case nodes[name] == nil:
				p.add(s.lineOf("nodes"), join(sp, "nodes"), "unknown node %q", name)
			case member[name]:
				p.add(s.lineOf("nodes"), join(sp, "nodes"), "node %q listed twice", name)
			}
			member[name] = true
		}
		switch {
		case s.Default == "":
			p.add(s.lineOf("default"), join(sp, "default"), "required: the node for tables without a shard rule")
		case !member[s.Default]:
			p.add(s.lineOf("default"), join(sp, "default"), "node %q is not in this schema's nodes", s.Default)
		}
		if !oneOf(s.TransactionMode, "", "xa", "single") {
			p.add(s.lineOf("transaction_mode"), join(sp, "transaction_mode"), "want xa or single, got %q", s.TransactionMode)
		}
		tables := map[[2]string]*ShardConfig{}
		for j := range s.ShardRule {
			r := &s.ShardRule[j]
			validateShard(p, r, r.pathOr(fmt.Sprintf("%s.shard[%d]", sp, j)), member, nodes)
			k := [2]string{r.DB, r.Table}
			if f, dup := tables[k]; dup && r.Table != "" {
				p.add(r.lineOf("table"), join(r.pathOr(fmt.Sprintf("%s.shard[%d]", sp, j)), "table"),
					"second rule for %s.%s (first at %s)", r.DB, r.Table, where(f.pos, "table"))
			} else {
				tables[k] = r
			}
		}
	}
}

func validateShard(p *problems, r *ShardConfig, rp string, schemaNodes map[string]bool, nodes map[string]*NodeConfig) {
	before := len(p.errs) + p.dropped
	global := r.Type == shard.TypeGlobal
	for _, k := range []struct{ key, val string }{{"db", r.DB}, {"table", r.Table}, {"key", r.Key}} {
		if k.val == "" && !(global && k.key == "key") {
			p.add(r.lineOf(k.key), join(rp, k.key), "required")
		}
	}
	if global {
		// A copy of the whole table on every node: nothing splits it.
		for _, k := range []struct {
			key string
			set bool
		}{{"key", r.Key != ""}, {"locations", len(r.Locations) > 0}, {"date_range", len(r.DateRange) > 0},
			{"list_values", len(r.ListValues) > 0}, {"table_row_limit", r.TableRowLimit != 0}} {
			if k.set {
				p.add(r.lineOf(k.key), join(rp, k.key), "a global table is copied whole on every node of its rule: it takes no %s", k.key)
			}
		}
	}
	switch {
	case r.Type == "":
		p.add(r.lineOf("type"), join(rp, "type"), "required: one of %s", strings.Join(ShardTypes, ", "))
	case !slices.Contains(ShardTypes, r.Type):
		p.add(r.lineOf("type"), join(rp, "type"), "unknown shard type %q: want one of %s", r.Type, strings.Join(ShardTypes, ", "))
	}
	if len(r.Nodes) == 0 {
		p.add(r.lineOf("nodes"), join(rp, "nodes"), "at least one node is required")
	}
	listed := map[string]bool{}
	for _, name := range r.Nodes {
		switch {
		case nodes[name] == nil:
			p.add(r.lineOf("nodes"), join(rp, "nodes"), "unknown node %q", name)
		case !schemaNodes[name]:
			p.add(r.lineOf("nodes"), join(rp, "nodes"), "node %q is not in the schema's nodes", name)
		case listed[name]:
			p.add(r.lineOf("nodes"), join(rp, "nodes"), "node %q listed twice", name)
		}
		listed[name] = true
	}
	// hash and range give each node locations[i] sub-tables, so the two lists
	// pair up; for the other types locations is optional but, if given, must
	// pair up too.
	needLocations := r.Type == "hash" || r.Type == "range"
	if (needLocations || len(r.Locations) > 0) && len(r.Locations) != len(r.Nodes) {
		p.add(r.lineOf("locations"), join(rp, "locations"), "has %d entries but nodes has %d: want one per node", len(r.Locations), len(r.Nodes))
	}
	for _, l := range r.Locations {
		if l < 1 {
			p.add(r.lineOf("locations"), join(rp, "locations"), "each entry must be >= 1, got %d", l)
			break
		}
	}
	if strings.HasPrefix(r.Type, "date_") && len(r.DateRange) != len(r.Nodes) {
		p.add(r.lineOf("date_range"), join(rp, "date_range"), "has %d entries but nodes has %d: want one per node", len(r.DateRange), len(r.Nodes))
	}
	if r.Type == "list" && len(r.ListValues) == 0 {
		p.add(r.lineOf("list_values"), join(rp, "list_values"), "required for a list rule: one comma-separated list of key values per sub-table")
	}
	if len(p.errs)+p.dropped == before {
		// The shape is right: let the shard package check the meaning
		// (date ranges, overlaps, list values).
		if _, err := shard.New(r.ShardRule()); err != nil {
			p.add(r.lineOf("type"), rp, "%v", err)
		}
	}
	switch {
	case r.AutoIncrement == "" && r.Sequence != "":
		p.add(r.lineOf("sequence"), join(rp, "sequence"), "needs auto_increment: the column the sequence fills")
	case r.AutoIncrement == "" && r.SequenceCache != 0:
		p.add(r.lineOf("sequence_cache"), join(rp, "sequence_cache"), "needs auto_increment: the column the sequence fills")
	case r.AutoIncrement != "" && global:
		p.add(r.lineOf("auto_increment"), join(rp, "auto_increment"), "a global table takes no ids from a sequence: "+
			"its copies are written alike, so the server's own AUTO_INCREMENT would differ between them; give the ids")
	case r.SequenceCache < 0:
		p.add(r.lineOf("sequence_cache"), join(rp, "sequence_cache"), "must not be negative, got %d", r.SequenceCache)
	}
	switch {
	case r.TableRowLimit < 0:
		p.add(r.lineOf("table_row_limit"), join(rp, "table_row_limit"), "must not be negative, got %d", r.TableRowLimit)
	case r.Type == "range" && r.TableRowLimit == 0:
		p.add(r.lineOf("table_row_limit"), join(rp, "table_row_limit"), "required for a range rule: rows per sub-table")
	}
}

// where renders the position of key for "first at ..." references.
func where(p pos, key string) string {
	if l := p.lineOf(key); l > 0 {
		return "line " + strconv.Itoa(l)
	}
	if p.path != "" {
		return p.path
	}
	return "an earlier entry"
}

func oneOf(s string, set ...string) bool { return slices.Contains(set, s) }

// checkHostPort accepts host:port with port 1..65535. Listen addresses may
// leave the host empty (":9696" listens on every interface).
func checkHostPort(addr string, needHost bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad address %q: want host:port", addr)
	}
	if needHost && host == "" {
		return fmt.Errorf("bad address %q: host is missing", addr)
	}
	if strings.ContainsAny(host, " \t@,/") {
		return fmt.Errorf("bad address %q: bad host", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("bad address %q: port must be 1..65535", addr)
	}
	return nil
}

// checkAllowIPs accepts a comma-separated list of IPs and CIDRs.
func checkAllowIPs(s string) error {
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if strings.Contains(item, "/") {
			if _, _, err := net.ParseCIDR(item); err != nil {
				return fmt.Errorf("bad CIDR %q", item)
			}
		} else if net.ParseIP(item) == nil {
			return fmt.Errorf("bad IP %q", item)
		}
	}
	return nil
}

// nodeNameOK reports whether a node name is short and plain enough to be
// written into SQL and XA transaction ids as it is.
func nodeNameOK(name string) bool {
	if len(name) > 16 {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
