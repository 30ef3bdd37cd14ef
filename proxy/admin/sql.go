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
	"github.com/keyshard/keyshard/proxy/control"
	"github.com/keyshard/keyshard/proxy/digest"
)

// SQL runs admin statements on the proxy port: kingshard's forms
//
//	admin server(opt,k,v) values('show','proxy','config')
//	admin node(opt,node,k,v) values('down','node1','slave','127.0.0.1:3307')
//	admin help
//
// and readable SHOW forms (SHOW PROXY STATUS, SHOW BACKENDS, ...). Install
// it with proxy.Server.SetAdmin(admin.SQL(srv)).
func SQL(srv *proxy.Server) proxy.AdminFunc {
	return func(req proxy.AdminRequest) (*proxy.AdminResult, bool, error) {
		st, ours, err := parse(req.SQL)
		if !ours {
			return nil, false, nil
		}
		if err == nil && st.region == "server" && st.vals[1] == "processlist" {
			// Anyone may list sessions: a user who is not an admin sees
			// its own, as MySQL without the PROCESS privilege.
			user := ""
			if !req.Admin {
				user = req.User
			}
			return processList(srv, user, strings.EqualFold(st.vals[2], "full")), true, nil
		}
		if !req.Admin {
			return nil, true, &mysql.MyError{Code: mysql.ER_SPECIFIC_ACCESS_DENIED_ERROR, State: "42000",
				Message: fmt.Sprintf("Access denied; user '%s' is not a keyshard admin user (root or admin_users) and cannot run admin statements", req.User)}
		}
		if err != nil {
			return nil, true, err
		}
		res, err := run(srv, srv.Control().By(control.Actor{User: req.User, Via: "admin SQL", From: req.From}), st)
		return res, true, err
	}
}

// command is a parsed admin statement: region server or node with its
// values, help, or a SHOW form mapped to kingshard's ('show', k, v).
type command struct {
	region string   // server | node | help
	vals   []string // opt, k, v (server) or opt, node, k, v (node)
}

func syntaxErr(format string, args ...any) error {
	return &mysql.MyError{Code: mysql.ER_PARSE_ERROR, State: "42000",
		Message: "keyshard: admin statement: " + fmt.Sprintf(format, args...) + "; run 'admin help' for the forms"}
}

func argErr(format string, args ...any) error {
	return &mysql.MyError{Code: mysql.ER_WRONG_ARGUMENTS, State: "HY000", Message: "keyshard: " + fmt.Sprintf(format, args...)}
}

// showForms maps the readable SHOW statements to kingshard's (k, v).
var showForms = map[string][2]string{
	"proxy status":     {"proxy", "status"},
	"proxy config":     {"proxy", "config"},
	"backends":         {"node", "config"},
	"proxy backends":   {"node", "config"},
	"shard rules":      {"schema", "config"},
	"proxy allow_ips":  {"allow_ip", "config"},
	"proxy blacklist":  {"black_sql", "config"},
	"processlist":      {"processlist", "brief"},
	"full processlist": {"processlist", "full"},
	"proxies":          {"proxies", "config"},
}

// parse reads an admin statement. ours is false for a SHOW that is not
// keyshard's (it goes to the backend).
func parse(sql string) (command, bool, error) {
	toks, err := tokenize(sql)
	if err != nil {
		if !strings.EqualFold(firstWord(sql), "admin") {
			return command{}, false, nil // a SHOW for the backend to judge
		}
		return command{}, true, syntaxErr("%v", err)
	}
	if len(toks) > 0 && toks[len(toks)-1].text == ";" && !toks[len(toks)-1].quoted {
		toks = toks[:len(toks)-1]
	}
	if len(toks) == 0 {
		return command{}, false, nil
	}
	switch strings.ToLower(toks[0].text) {
	case "show":
		words := make([]string, 0, len(toks)-1)
		for _, t := range toks[1:] {
			if t.quoted {
				return command{}, false, nil
			}
			words = append(words, strings.ToLower(t.text))
		}
		if len(words) > 0 && words[0] == "digests" {
			return parseShowDigests(words[1:])
		}
		if strings.Join(words, " ") == "reshard status" {
			return command{region: "reshard", vals: []string{"status"}}, true, nil
		}
		kv, ok := showForms[strings.Join(words, " ")]
		if !ok {
			return command{}, false, nil
		}
		return command{region: "server", vals: []string{"show", kv[0], kv[1]}}, true, nil
	case "admin":
	default:
		return command{}, false, nil
	}
	if len(toks) < 2 || toks[1].quoted {
		return command{}, true, syntaxErr("missing region after ADMIN")
	}
	region := strings.ToLower(toks[1].text)
	switch region {
	case "help":
		if len(toks) != 2 {
			return command{}, true, syntaxErr("unexpected %q after ADMIN HELP", toks[2].text)
		}
		return command{region: "help"}, true, nil
	case "reload":
		// ADMIN RELOAD [CONFIG] [FORCE]
		rest := toks[2:]
		if len(rest) > 0 && strings.EqualFold(rest[0].text, "config") {
			rest = rest[1:]
		}
		what := "config"
		if len(rest) == 1 && strings.EqualFold(rest[0].text, "force") {
			what, rest = "force", nil
		}
		if len(rest) > 0 {
			return command{}, true, syntaxErr("want ADMIN RELOAD [CONFIG] [FORCE]")
		}
		return command{region: "server", vals: []string{"reload", "proxy", what}}, true, nil
	case "xa":
		// ADMIN XA | ADMIN XA COMMIT 'xid' | ADMIN XA ROLLBACK 'xid'
		switch {
		case len(toks) == 2:
			return command{region: "xa"}, true, nil
		case len(toks) == 4 && (strings.EqualFold(toks[2].text, "commit") || strings.EqualFold(toks[2].text, "rollback")):
			return command{region: "xa", vals: []string{strings.ToLower(toks[2].text), toks[3].text}}, true, nil
		}
		return command{}, true, syntaxErr("want ADMIN XA, ADMIN XA COMMIT 'xid' or ADMIN XA ROLLBACK 'xid'")
	case "reshard":
		c, err := parseReshard(toks[2:])
		return c, true, err
	case "check":
		if len(toks) != 3 || !strings.EqualFold(toks[2].text, "shards") {
			return command{}, true, syntaxErr("want ADMIN CHECK SHARDS")
		}
		return command{region: "check"}, true, nil
	case "reset":
		if len(toks) != 3 || !strings.EqualFold(toks[2].text, "digests") {
			return command{}, true, syntaxErr("want ADMIN RESET DIGESTS")
		}
		return command{region: "server", vals: []string{"reset", "digests", "all"}}, true, nil
	case "server", "node":
	default:
		return command{}, true, syntaxErr("unknown region %q: want server, node, help, reload, check, xa or reset", toks[1].text)
	}
	want := []string{"opt", "k", "v"}
	if region == "node" {
		want = []string{"opt", "node", "k", "v"}
	}
	rest := toks[2:]
	cols, rest, err := list(rest, false)
	if err != nil {
		return command{}, true, err
	}
	if strings.Join(cols, ",") != strings.Join(want, ",") {
		return command{}, true, syntaxErr("admin %s takes columns (%s), not (%s)", region, strings.Join(want, ","), strings.Join(cols, ","))
	}
	if len(rest) == 0 || rest[0].quoted || !strings.EqualFold(rest[0].text, "values") {
		return command{}, true, syntaxErr("want VALUES after the columns")
	}
	vals, rest, err := list(rest[1:], true)
	if err != nil {
		return command{}, true, err
	}
	if len(rest) != 0 {
		return command{}, true, syntaxErr("unexpected %q after the values", rest[0].text)
	}
	if len(vals) != len(want) {
		return command{}, true, syntaxErr("admin %s takes %d values, got %d", region, len(want), len(vals))
	}
	return command{region: region, vals: vals}, true, nil
}

// defaultDigests is how many digests SHOW DIGESTS shows without LIMIT.
const defaultDigests = 20

// parseShowDigests reads the rest of SHOW DIGESTS [ORDER BY col] [LIMIT n]
// into ('show', 'digests', 'col,n').
func parseShowDigests(words []string) (command, bool, error) {
	order, limit := "total", strconv.Itoa(defaultDigests)
	if len(words) >= 3 && words[0] == "order" && words[1] == "by" && slices.Contains(digest.Orders, words[2]) {
		order, words = words[2], words[3:]
	}
	if len(words) == 2 && words[0] == "limit" {
		if n, err := strconv.Atoi(words[1]); err == nil && n >= 0 {
			limit, words = words[1], nil
		}
	}
	if len(words) != 0 {
		return command{}, true, syntaxErr("want SHOW DIGESTS [ORDER BY %s] [LIMIT n], n >= 0", strings.Join(digest.Orders, "|"))
	}
	return command{region: "server", vals: []string{"show", "digests", order + "," + limit}}, true, nil
}

// list reads "( a, b, ... )": names (lower-cased) or, with values, quoted
// strings and numbers.
func list(toks []token, values bool) ([]string, []token, error) {
	if len(toks) == 0 || toks[0].quoted || toks[0].text != "(" {
		return nil, toks, syntaxErr("want '('")
	}
	var out []string
	i := 1
	for {
		if i >= len(toks) {
			return nil, nil, syntaxErr("missing ')'")
		}
		t := toks[i]
		if !t.quoted && (t.text == "," || t.text == "(" || t.text == ")") {
			return nil, nil, syntaxErr("unexpected %q in the list", t.text)
		}
		if values {
			out = append(out, t.text)
		} else {
			out = append(out, strings.ToLower(t.text))
		}
		i++
		if i >= len(toks) {
			return nil, nil, syntaxErr("missing ')'")
		}
		switch {
		case !toks[i].quoted && toks[i].text == ",":
			i++
		case !toks[i].quoted && toks[i].text == ")":
			return out, toks[i+1:], nil
		default:
			return nil, nil, syntaxErr("want ',' or ')' after %q", t.text)
		}
	}
}

type token struct {
	text   string
	quoted bool
}

// tokenize splits an admin statement into words, quoted strings and the
// punctuation ( ) , ;.
func tokenize(sql string) ([]token, error) {
	var toks []token
	for i := 0; i < len(sql); {
		c := sql[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(' || c == ')' || c == ',' || c == ';':
			toks = append(toks, token{text: sql[i : i+1]})
			i++
		case c == '\'' || c == '"':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(sql) {
					return nil, fmt.Errorf("unterminated string")
				}
				if sql[j] == '\\' && j+1 < len(sql) {
					b.WriteByte(sql[j+1])
					j += 2
					continue
				}
				if sql[j] == c {
					if j+1 < len(sql) && sql[j+1] == c {
						b.WriteByte(c)
						j += 2
						continue
					}
					break
				}
				b.WriteByte(sql[j])
				j++
			}
			toks = append(toks, token{text: b.String(), quoted: true})
			i = j + 1
		default:
			j := i
			for j < len(sql) && !strings.ContainsRune(" \t\n\r(),;'\"", rune(sql[j])) {
				j++
			}
			toks = append(toks, token{text: strings.Clone(sql[i:j])})
			i = j
		}
	}
	return toks, nil
}

func firstWord(sql string) string {
	f := strings.Fields(sql)
	if len(f) == 0 {
		return ""
	}
	return strings.TrimRight(f[0], "(")
}

// run executes a parsed command.
func run(srv *proxy.Server, ctl control.Controls, c command) (*proxy.AdminResult, error) {
	switch c.region {
	case "help":
		return table([]string{"statement", "description"}, helpRows), nil
	case "node":
		return nil, nodeCmd(ctl, c.vals)
	case "check":
		return checkShards(srv)
	case "xa":
		return xaCmd(srv, ctl, c.vals)
	case "reshard":
		return reshardCmd(ctl, c.vals)
	}
	opt, k, v := strings.ToLower(c.vals[0]), strings.ToLower(c.vals[1]), c.vals[2]
	switch opt {
	case "show":
		return show(srv, k, strings.ToLower(v))
	case "change":
		return nil, change(ctl, k, v)
	case "add", "del":
		return nil, addDel(ctl, opt, k, v)
	case "save":
		if k != "proxy" || strings.ToLower(v) != "config" {
			return nil, argErr("admin server: save takes ('save','proxy','config')")
		}
		return nil, ctl.SaveConfig()
	case "reset":
		if k != "digests" {
			return nil, argErr("admin server: reset takes ('reset','digests','all')")
		}
		return nil, ctl.ResetDigests()
	case "reload":
		force := strings.EqualFold(v, "force")
		if k != "proxy" || !force && !strings.EqualFold(v, "config") {
			return nil, argErr("admin server: reload takes ('reload','proxy','config') or ('reload','proxy','force')")
		}
		warnings, err := reload(ctl, force)
		if err != nil {
			return nil, err
		}
		// The warnings go to the client as the server's do: counted in
		// the OK packet, read with SHOW WARNINGS.
		return &proxy.AdminResult{Info: "config reloaded from " + srv.Config().Source(), Warnings: warnings}, nil
	}
	return nil, argErr("admin server: unknown opt %q: want show, change, add, del, save, reload or reset", c.vals[0])
}

// checkShards answers ADMIN CHECK SHARDS: every sub-table of every
// sharded table, whether it exists, whether it is defined like the
// table's first, and its estimated rows; for each copy of a global table,
// also whether its rows are the first copy's.
func checkShards(srv *proxy.Server) (*proxy.AdminResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	subs, err := srv.CheckShards(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([][]string, 0, len(subs))
	for _, s := range subs {
		def := "same"
		switch {
		case !s.Exists:
			def = "missing"
		case !s.Same:
			def = "differs"
		}
		rows = append(rows, []string{s.Table, s.Node, s.SubTable, def, strconv.FormatInt(s.Rows, 10), s.Data})
	}
	return table([]string{"table", "node", "sub_table", "definition", "rows_estimate", "data"}, rows), nil
}

// xaCmd answers ADMIN XA (keyshard's prepared branches, in doubt) and
// ADMIN XA COMMIT|ROLLBACK 'xid' (resolved by hand).
func xaCmd(srv *proxy.Server, ctl control.Controls, vals []string) (*proxy.AdminResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(vals) == 2 {
		n, err := ctl.ResolveXA(ctx, vals[1], vals[0] == "commit")
		if err != nil {
			return nil, argErr("admin xa: %v", err)
		}
		return &proxy.AdminResult{Affected: uint64(n), Info: fmt.Sprintf("%s: %d prepared branches finished", vals[1], n)}, nil
	}
	bs, err := srv.XABranches(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([][]string, 0, len(bs))
	for _, b := range bs {
		rows = append(rows, []string{b.XID, b.Node, b.Branch, b.Decision, b.PreparedFor})
	}
	return table([]string{"xid", "node", "branch", "decision", "prepared_for"}, rows), nil
}

// reload reloads the config file (force: even if it moves existing rows,
// see control.Plane.Reload); a failure is a bad argument (the file).
func reload(ctl control.Controls, force bool) ([]string, error) {
	warnings, err := ctl.Reload(force)
	if err != nil {
		return nil, argErr("config reload failed, the running config is unchanged: %v", err)
	}
	return warnings, nil
}

func nodeCmd(srv control.Controls, vals []string) error {
	opt, node, role, addr := strings.ToLower(vals[0]), vals[1], strings.ToLower(vals[2]), vals[3]
	switch opt {
	case "add", "del":
		if role != "slave" {
			return argErr("admin node: only a slave can be added or deleted at run time; change a node's master in ks.yaml and reload")
		}
		if opt == "add" {
			return srv.AddSlave(node, addr)
		}
		return srv.DelSlave(node, addr)
	case "up", "down":
		return srv.SetBackendDown(node, role, addr, opt == "down")
	}
	return argErr("admin node: unknown opt %q: want add, del, up or down", vals[0])
}

func change(srv control.Controls, k, v string) error {
	lv := strings.ToLower(strings.TrimSpace(v))
	switch k {
	case "proxy":
		if lv != "online" && lv != "offline" {
			return argErr("change proxy: want online or offline, not %q", v)
		}
		return srv.SetOnline(lv == "online")
	case "log_sql":
		if lv != "on" && lv != "off" {
			return argErr("change log_sql: want on or off, not %q", v)
		}
		return srv.SetLogSQL(lv == "on")
	case "slow_log_time":
		ms, err := strconv.Atoi(lv)
		if err != nil || ms < 0 {
			return argErr("change slow_log_time: want milliseconds >= 0, not %q", v)
		}
		return srv.SetSlowLogTime(ms)
	}
	return argErr("admin server: cannot change %q: want proxy, log_sql or slow_log_time", k)
}

func addDel(srv control.Controls, opt, k, v string) error {
	switch k {
	case "allow_ip":
		if opt == "add" {
			return srv.AddAllowIP(v)
		}
		return srv.DelAllowIP(v)
	case "black_sql":
		if opt == "add" {
			return srv.AddBlackSQL(v)
		}
		return srv.DelBlackSQL(v)
	}
	return argErr("admin server: cannot %s %q: want allow_ip or black_sql", opt, k)
}

func table(cols []string, rows [][]string) *proxy.AdminResult {
	if rows == nil {
		rows = [][]string{}
	}
	return &proxy.AdminResult{Columns: cols, Rows: rows}
}
