package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// kingshard's sample files went through three shapes; all must load:
//
//	2015: user/password at top level; `schemas:` list whose items carry
//	      db, nodes and a `rules:` block (default, shard); nodes with
//	      idle_conns and rw_split.
//	2016: user/password (or `ups: u1:p1,u2:p2`); one `schema:` object with
//	      db, nodes, default, shard.
//	now:  user_list and schema_list (one schema per user).
//
// The old forms decode into the types below and are mapped onto the current
// ones by applyLegacy.

// legacySchema is an item of the old `schema:` / `schemas:` keys.
type legacySchema struct {
	User      string        `yaml:"user"`
	DB        string        `yaml:"db"`
	Nodes     []string      `yaml:"nodes"`
	Default   string        `yaml:"default"`
	ShardRule []ShardConfig `yaml:"shard"`
	Rules     *legacyRules  `yaml:"rules"`

	pos `yaml:"-"`
}

type legacyRules struct {
	Default   string        `yaml:"default"`
	ShardRule []ShardConfig `yaml:"shard"`

	pos `yaml:"-"`
}

type legacyState struct {
	user, password *string
	userLine       int
	passwordLine   int
	ups            *string
	upsLine        int
	schemas        []legacySchema
	schemaKey      string // "schema" or "schemas"
	schemaLine     int
}

// legacyKey decodes a key that only kingshard's older files use. It reports
// whether key was one of them.
func (d *decoder) legacyKey(v reflect.Value, path, key string, k, val *yaml.Node) bool {
	l := &d.legacy
	switch t := v.Addr().Interface().(type) {
	case *Config:
		switch key {
		case "user":
			d.decodeValue(val, key, reflect.ValueOf(&l.user).Elem())
			l.userLine = k.Line
		case "password":
			d.decodeValue(val, key, reflect.ValueOf(&l.password).Elem())
			l.passwordLine = k.Line
		case "ups":
			d.decodeValue(val, key, reflect.ValueOf(&l.ups).Elem())
			l.upsLine = k.Line
		case "schema":
			var s *legacySchema
			d.decodeValue(val, key, reflect.ValueOf(&s).Elem())
			if s != nil {
				l.schemas = append(l.schemas, *s)
			}
			l.schemaKey, l.schemaLine = key, k.Line
		case "schemas":
			var s []legacySchema
			d.decodeValue(val, key, reflect.ValueOf(&s).Elem())
			l.schemas = append(l.schemas, s...)
			l.schemaKey, l.schemaLine = key, k.Line
		default:
			return false
		}
		return true
	case *NodeConfig:
		switch key {
		case "idle_conns":
			d.decodeValue(val, join(path, key), reflect.ValueOf(&t.idleConns).Elem())
		case "rw_split":
			d.decodeValue(val, join(path, key), reflect.ValueOf(&t.rwSplit).Elem())
		default:
			return false
		}
		return true
	}
	return false
}

// applyLegacy maps the old forms onto UserList, SchemaList and
// MaxConnsLimit, and says so in a warning each.
func (d *decoder) applyLegacy(cfg *Config) {
	l := &d.legacy
	d.legacyUsers(cfg)
	for i := range cfg.Nodes {
		n := &cfg.Nodes[i]
		if n.has("idle_conns") {
			p := join(n.pathOr(fmt.Sprintf("nodes[%d]", i)), "idle_conns")
			if n.has("max_conns_limit") {
				d.warn(n.lineOf("idle_conns"), p, "old kingshard key, ignored in favour of max_conns_limit")
			} else {
				n.MaxConnsLimit = n.idleConns
				d.warn(n.lineOf("idle_conns"), p, "old kingshard key, read as max_conns_limit")
			}
		}
	}
	if len(l.schemas) == 0 {
		return
	}
	switch {
	case len(cfg.SchemaList) > 0:
		d.add(l.schemaLine, l.schemaKey, "use either schema_list or %s, not both", l.schemaKey)
		return
	case len(l.schemas) > 1:
		d.add(l.schemaLine, l.schemaKey, "more than one old-style schema; write schema_list with one schema per user")
		return
	}
	ls := l.schemas[0]
	sc := SchemaConfig{User: ls.User, Nodes: ls.Nodes, Default: ls.Default, ShardRule: ls.ShardRule, pos: ls.pos}
	sc.keys = maps.Clone(ls.keys)
	if sc.keys == nil {
		sc.keys = map[string]int{}
	}
	if r := ls.Rules; r != nil {
		if ls.Default != "" && r.Default != "" && ls.Default != r.Default {
			d.add(r.lineOf("default"), join(r.path, "default"), "conflicts with %s.default %q", ls.path, ls.Default)
		}
		if sc.Default == "" {
			sc.Default = r.Default
		}
		for _, k := range []string{"default", "shard"} {
			if !sc.has(k) && r.has(k) {
				sc.keys[k] = r.lineOf(k)
			}
		}
		sc.ShardRule = append(sc.ShardRule, r.ShardRule...)
	}
	if ls.DB != "" {
		for i := range sc.ShardRule {
			if sc.ShardRule[i].DB == "" {
				sc.ShardRule[i].DB = ls.DB
			}
		}
		d.warn(ls.lineOf("db"), join(ls.path, "db"), "old kingshard key: only used as the db of its shard rules")
	}
	if sc.User != "" || len(cfg.UserList) == 0 {
		cfg.SchemaList = []SchemaConfig{sc}
	} else {
		// The old single schema served every user.
		for _, u := range cfg.UserList {
			c := sc
			c.User = u.User
			c.Nodes = slices.Clone(sc.Nodes)
			c.ShardRule = slices.Clone(sc.ShardRule)
			cfg.SchemaList = append(cfg.SchemaList, c)
		}
	}
	d.warn(l.schemaLine, l.schemaKey, "old kingshard form, read as schema_list (the schema applies to every user)")
}

func (d *decoder) legacyUsers(cfg *Config) {
	l := &d.legacy
	var users []UserConfig
	if l.userLine > 0 || l.passwordLine > 0 {
		name, pw := deref(l.user), deref(l.password)
		if name == "" {
			line := l.userLine
			if line == 0 {
				line = l.passwordLine
			}
			d.add(line, "user", "required with the old top-level password key")
		} else {
			u := UserConfig{User: name, Password: pw, pos: pos{path: "user", line: l.userLine, keys: map[string]int{"user": l.userLine}}}
			if l.passwordLine > 0 {
				u.keys["password"] = l.passwordLine
			}
			users = append(users, u)
			d.warn(l.userLine, "user", "old kingshard form, read as user_list")
		}
	}
	if l.ups != nil {
		for i, item := range strings.Split(*l.ups, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			name, pw, ok := strings.Cut(item, ":")
			if !ok || name == "" {
				d.add(l.upsLine, "ups", "item %q: want user:password", item)
				continue
			}
			users = append(users, UserConfig{User: name, Password: pw, pos: pos{path: fmt.Sprintf("ups[%d]", i), line: l.upsLine}})
		}
		d.warn(l.upsLine, "ups", "old kingshard form, read as user_list")
	}
	if len(users) == 0 {
		return
	}
	cfg.UserList = append(users, cfg.UserList...)
	if l.ups == nil {
		return
	}
	// In the ups era a node without user/password logged in to MySQL as the
	// first ups user.
	first := users[0]
	for i := range cfg.Nodes {
		n := &cfg.Nodes[i]
		if !n.has("user") && !n.has("password") {
			n.User, n.Password = first.User, first.Password
			d.warn(n.line, join(n.pathOr(fmt.Sprintf("nodes[%d]", i)), "user"), "not set; using the first ups user %q, as old kingshard did", first.User)
		}
	}
}

// dedupeUsers drops exact repeats from user_list with a warning: kingshard's
// own unshard.yaml lists the same user twice, and kingshard kept the last.
// A repeat with a different password or plugin stays for Validate to reject.
func (d *decoder) dedupeUsers(cfg *Config) {
	first := map[string]UserConfig{}
	out := cfg.UserList[:0:0]
	for i, u := range cfg.UserList {
		if f, ok := first[u.User]; ok {
			if f.Password == u.Password && f.AuthPlugin == u.AuthPlugin {
				d.warn(u.line, u.pathOr(fmt.Sprintf("user_list[%d]", i)), "repeats user %q of line %d, ignored", u.User, f.line)
				continue
			}
		} else {
			first[u.User] = u
		}
		out = append(out, u)
	}
	cfg.UserList = out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
