package admin

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/proxy"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/control"
	"github.com/keyshard/keyshard/proxy/digest"
)

// The SHOW statements of admin SQL, and their rows.

func show(srv *proxy.Server, k, v string) (*proxy.AdminResult, error) {
	if k == "digests" {
		return showDigests(srv, v)
	}
	if v != "config" && !(k == "proxy" && v == "status") {
		return nil, argErr("admin server: cannot show (%q, %q)", k, v)
	}
	switch k {
	case "proxies":
		return showProxies(srv)
	case "proxy":
		if v == "status" {
			return table([]string{"Key", "Value"}, statusRows(srv.Control().Status())), nil
		}
		return table([]string{"Key", "Value"}, configRows(srv)), nil
	case "node":
		var rows [][]string
		for _, b := range srv.Backends() {
			rows = append(rows, []string{b.Node, b.Addr, b.Role, backendState(b), strconv.Itoa(b.MaxConns),
				itoa(b.Open), itoa(b.Idle), itoa(b.InUse), strconv.Itoa(b.Weight), itoa(b.Lag),
				itoa(b.Statements), itoa(b.Errors), b.LastError})
		}
		return table(backendCols, rows), nil
	case "schema":
		return table(schemaCols, schemaRows(srv.Config())), nil
	case "allow_ip":
		var rows [][]string
		for _, ip := range srv.AllowIPs() {
			rows = append(rows, []string{ip})
		}
		return table([]string{"AllowIP"}, rows), nil
	case "black_sql":
		var rows [][]string
		for _, q := range srv.BlackSQLs() {
			rows = append(rows, []string{q})
		}
		return table([]string{"BlackListSQL"}, rows), nil
	}
	return nil, argErr("admin server: cannot show %q: want proxy, proxies, node, schema, allow_ip, black_sql or digests", k)
}

var proxyCols = []string{"Name", "Address", "WebAddress", "Version", "Host", "PID", "Uptime", "ConfigRevision", "State", "Self"}

// showProxies answers SHOW PROXIES: the live instances sharing this one's
// config, each with the config revision it runs; one behind the newest
// says so (and why, if it refused it).
func showProxies(srv *proxy.Server) (*proxy.AdminResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := srv.Control().Proxies(ctx)
	if err != nil {
		return nil, &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: "HY000", Message: "keyshard: SHOW PROXIES: " + err.Error()}
	}
	rows := make([][]string, 0, len(list))
	for _, p := range list {
		state := "current"
		if !p.Current {
			state = fmt.Sprintf("behind: runs revision %d, the newest is %d", p.ConfigRev, p.Latest)
			if p.Error != "" {
				state += " (" + p.Error + ")"
			}
		}
		rows = append(rows, []string{p.Name, p.Addr, p.WebAddr, p.Version, p.Host, strconv.Itoa(p.PID), p.Uptime,
			itoa(p.ConfigRev), state, map[bool]string{true: "yes", false: "no"}[p.Self]})
	}
	return table(proxyCols, rows), nil
}

// showDigests answers ('show', 'digests', v): v is "order,count", or just
// a count or an order (count 0 or "all": every digest).
func showDigests(srv *proxy.Server, v string) (*proxy.AdminResult, error) {
	order, count := "total", strconv.Itoa(defaultDigests)
	switch f := strings.Split(strings.ToLower(strings.ReplaceAll(v, " ", "")), ","); {
	case len(f) == 2:
		order, count = f[0], f[1]
	case len(f) == 1 && (f[0] == "all" || f[0] != "" && strings.Trim(f[0], "-0123456789") == ""):
		count = f[0]
	case len(f) == 1 && f[0] != "":
		order = f[0]
	default:
		return nil, argErr("show digests: want 'order,count', a count or an order, not %q", v)
	}
	if count == "all" {
		count = "0"
	}
	limit, err := strconv.Atoi(count)
	if err != nil || limit < 0 {
		return nil, argErr("show digests: the row count must be a number >= 0 (0 or all: every digest), not %q", count)
	}
	top, err := srv.Digests(limit, order)
	if err != nil {
		return nil, err
	}
	rows := make([][]string, 0, len(top))
	for _, d := range top {
		row := []string{d.ID, d.Schema, d.Text, u64(d.Count), u64(d.Errors), u64(d.Cached), u64(d.Rows), u64(d.Affected), u64(d.Bytes),
			msStr(d.Total), msStr(d.Avg), msStr(d.Min), msStr(d.Max), msStr(d.P50), msStr(d.P99)}
		for _, st := range d.Stages {
			row = append(row, msStr(st))
		}
		rows = append(rows, append(row, d.FirstSeen.UTC().Format(time.RFC3339), d.LastSeen.UTC().Format(time.RFC3339)))
	}
	return table(digestCols, rows), nil
}

var digestCols = func() []string {
	cols := []string{"Digest", "Schema", "Text", "Calls", "Errors", "CacheHits", "RowsSent", "RowsAffected", "BytesSent",
		"TotalMs", "AvgMs", "MinMs", "MaxMs", "P50Ms", "P99Ms"}
	for i := range digest.NumStages {
		cols = append(cols, stageCol(i))
	}
	return append(cols, "FirstSeen", "LastSeen")
}()

// stageCol is a stage's column: ParseMs, RouteMs, PoolWaitMs, ...
func stageCol(st digest.Stage) string {
	var b strings.Builder
	for _, w := range strings.Split(st.String(), "_") {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String() + "Ms"
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

// msStr is d in milliseconds with microsecond precision.
func msStr(d time.Duration) string { return strconv.FormatFloat(digest.Millis(d), 'f', 3, 64) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

var backendCols = []string{"Node", "Address", "Type", "State", "MaxConn", "OpenConn", "IdleConn", "InUseConn",
	"Weight", "ReplicationLag", "Statements", "Errors", "LastCheckError"}

// backendState is kingshard's State column: up, down, lagging; "down
// (admin)" for a backend an admin command took down.
func backendState(b proxy.Backend) string {
	if b.AdminDown {
		return "down (admin)"
	}
	return b.State
}

var helpRows = [][]string{
	{"admin help", "this list"},
	{"SHOW PROXY STATUS | admin server(opt,k,v) values('show','proxy','status')", "online, connections, sessions, reloads, uptime"},
	{"SHOW PROXIES | admin server(opt,k,v) values('show','proxies','config')",
		"the keyshard instances sharing this config (etcd): address, version, config revision; one behind the newest is flagged"},
	{"SHOW PROXY CONFIG | admin server(opt,k,v) values('show','proxy','config')", "the running settings (no passwords)"},
	{"SHOW BACKENDS | admin server(opt,k,v) values('show','node','config')", "every master and slave: state, connections, lag, statements"},
	{"SHOW SHARD RULES | admin server(opt,k,v) values('show','schema','config')", "schemas and shard rules"},
	{"SHOW PROXY ALLOW_IPS | admin server(opt,k,v) values('show','allow_ip','config')", "allow_ips"},
	{"SHOW PROXY BLACKLIST | admin server(opt,k,v) values('show','black_sql','config')", "the SQL blacklist"},
	{"admin server(opt,k,v) values('change','proxy','online'|'offline')", "accept or refuse new client connections"},
	{"admin server(opt,k,v) values('change','log_sql','on'|'off')", "SQL log on or off"},
	{"admin server(opt,k,v) values('change','slow_log_time','50')", "slow log threshold in ms (0: off)"},
	{"admin server(opt,k,v) values('add'|'del','allow_ip','10.0.0.0/8')", "edit allow_ips (empty: everyone)"},
	{"admin server(opt,k,v) values('add'|'del','black_sql','select * from t where id = 1')", "edit the SQL blacklist (matched by shape)"},
	{"admin server(opt,k,v) values('save','proxy','config')", "write run-time changes to ks.yaml (comments kept) and blacklist_sql_file"},
	{"admin reload | admin server(opt,k,v) values('reload','proxy','config')", "reload ks.yaml (validated first; no session dropped)"},
	{"admin reload force | admin server(opt,k,v) values('reload','proxy','force')", "reload ks.yaml even if it moves existing rows of sharded tables"},
	{"admin check shards", "every sub-table of every sharded table: missing, defined unlike the first, estimated rows"},
	{"admin xa", "keyshard's prepared XA branches on every node (in doubt) with their recorded decision"},
	{"admin xa commit|rollback 'xid'", "finish an XA transaction by hand: record the decision, then commit or roll back its prepared branches"},
	{"SHOW DIGESTS [ORDER BY total|count|errors|avg|max|p99|rows] [LIMIT n] | admin server(opt,k,v) values('show','digests','total,20')",
		"statement digests: calls, errors, rows, time (total, min, max, p50, p99) and its split by stage"},
	{"admin reset digests | admin server(opt,k,v) values('reset','digests','all')", "clear the statement digests"},
	{"SHOW [FULL] PROCESSLIST | admin server(opt,k,v) values('show','processlist','brief'|'full')",
		"keyshard's client sessions: id (for KILL), user, host, db, command, time, state, statement, nodes; " +
			"a user who is not an admin sees its own; /*nodeN*/ SHOW PROCESSLIST shows that node's backend list"},
	{"admin reshard start [db.table, ...]", "move the rows of sharded tables to the layout of the edited ks.yaml while they serve: copy, catch up from the binlog, verify, switch"},
	{"SHOW RESHARD STATUS | admin reshard status", "the online reshard: phase, rows copied, binlog changes applied, cut-over tries and hold, error"},
	{"admin reshard cancel", "stop the reshard before its switch and drop the sub-tables it created"},
	{"admin reshard complete", "after the switch, drop the old layout's sub-tables (moved away, or renamed NAME__ksold)"},
	{"admin node(opt,node,k,v) values('add'|'del','node1','slave','host:port[@weight]')", "add or remove a slave"},
	{"admin node(opt,node,k,v) values('up'|'down','node1','master'|'slave','host:port')", "put a backend in or out of service"},
}

func statusRows(st control.Status) [][]string {
	online := "online"
	if !st.Online {
		online = "offline"
	}
	return [][]string{
		{"name", st.Name},
		{"status", online},
		{"started", st.Started.Format("2006-01-02T15:04:05Z07:00")},
		{"uptime", st.Uptime},
		{"connections", itoa(st.Connections)},
		{"sessions", strconv.Itoa(st.Sessions)},
		{"nodes", strconv.Itoa(st.Nodes)},
		{"config_file", st.ConfigFile},
		{"reloads", itoa(st.Reloads)},
		{"reload_errors", itoa(st.ReloadErrors)},
		{"last_reload", st.LastReload},
		{"goroutines", strconv.Itoa(st.Goroutines)},
	}
}

func configRows(srv *proxy.Server) [][]string {
	c := srv.Config()
	var users, nodes []string
	for _, u := range c.UserList {
		users = append(users, u.User)
	}
	for _, n := range c.Nodes {
		nodes = append(nodes, n.Name)
	}
	rows := [][]string{
		{"addr", c.Addr},
		{"web_addr", c.WebAddr},
		{"prometheus_addr", c.PrometheusAddr},
		{"users", strings.Join(users, ",")},
		{"admin_users", strings.Join(append([]string{"root"}, c.AdminUsers...), ",")},
		{"nodes_count", strconv.Itoa(len(c.Nodes))},
		{"nodes_list", strings.Join(nodes, ",")},
		{"log_level", c.LogLevel},
		{"log_sql", c.LogSQL},
		{"slow_log_time", strconv.Itoa(c.SlowLogTime)},
		{"allow_ips", c.AllowIPs},
		{"blacklist_sql_file", c.BlacklistSQLFile},
		{"max_connections", strconv.Itoa(c.MaxConnections)},
		{"health_check_interval", c.HealthCheckInterval.String()},
		{"max_replication_lag", strconv.Itoa(c.MaxReplicationLag)},
		{"read_your_writes", c.ReadYourWrites},
		{"config_file", c.Source()},
	}
	// A setting that needs a restart shows the value running, and the
	// config's pending.
	for _, p := range srv.Control().PendingRestart() {
		v := p.Running + " (pending restart: the config has " + p.Configured + ")"
		if i := slices.IndexFunc(rows, func(r []string) bool { return r[0] == p.Key }); i >= 0 {
			rows[i][1] = v
		} else {
			rows = append(rows, []string{p.Key, v})
		}
	}
	return rows
}

// processCols are SHOW PROCESSLIST's columns (MySQL's, and the nodes the
// statement is on).
var processCols = []string{"Id", "User", "Host", "db", "Command", "Time", "State", "Info", "Nodes"}

// processList answers SHOW [FULL] PROCESSLIST: keyshard's client sessions
// (user's only, if set); full shows the statements' whole text.
func processList(srv *proxy.Server, user string, full bool) *proxy.AdminResult {
	procs := srv.Processes(user, full)
	rows := make([][]*string, 0, len(procs))
	for _, p := range procs {
		// NULL where the server has NULL: no database, no statement
		// (asleep, or a command without text).
		rows = append(rows, []*string{ptr(strconv.FormatUint(uint64(p.ID), 10)), &p.User, &p.Host, nullIfEmpty(p.DB), &p.Command,
			ptr(itoa(p.Time)), &p.State, nullIfEmpty(p.Info), ptr(strings.Join(p.Nodes, ","))})
	}
	return &proxy.AdminResult{Columns: processCols, Nullable: rows}
}

func ptr(s string) *string { return &s }

// nullIfEmpty is s, or NULL for "".
func nullIfEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

var schemaCols = []string{"User", "DB", "Table", "Type", "Key", "Nodes_List", "Locations", "TableRowLimit", "DateRange"}

func schemaRows(c *config.Config) [][]string {
	var rows [][]string
	for _, sc := range c.SchemaList {
		rows = append(rows, []string{sc.User, "", "", "default", "", sc.Default, "", "0", ""})
		for _, r := range sc.ShardRule {
			locs := make([]string, len(r.Locations))
			for i, l := range r.Locations {
				locs[i] = strconv.Itoa(l)
			}
			rows = append(rows, []string{sc.User, r.DB, r.Table, r.Type, r.Key, strings.Join(r.Nodes, ", "),
				strings.Join(locs, ", "), strconv.Itoa(r.TableRowLimit), strings.Join(r.DateRange, ", ")})
		}
	}
	return rows
}
