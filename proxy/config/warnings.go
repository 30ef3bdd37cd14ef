package config

import (
	"fmt"
	"strings"
)

// site is one place a key is set.
type site struct {
	line int
	path string
}

// notYetSupported is the one list of keys that decode and validate but whose
// feature is not built yet. Parse warns once per key that is set, naming
// every place. Delete a row when its feature lands.
var notYetSupported = []struct {
	key     string
	feature string
	sites   func(c *Config) []site
}{}

// notYetSupported warns once per row of the table that is set in cfg.
func (d *decoder) notYetSupported(cfg *Config) {
	for _, u := range notYetSupported {
		sites := u.sites(cfg)
		if len(sites) == 0 {
			continue
		}
		msg := fmt.Sprintf("not yet supported (%s), ignored", u.feature)
		if len(sites) > 1 {
			paths := make([]string, len(sites))
			for i, s := range sites {
				paths[i] = s.path
			}
			msg += "; also set at " + strings.Join(paths[1:], ", ")
		}
		d.warn(sites[0].line, sites[0].path, "%s", msg)
	}
}

// lint warns about things that are legal but probably not meant.
func (d *decoder) lint(cfg *Config) {
	for i := range cfg.SchemaList {
		s := &cfg.SchemaList[i]
		if _, ok := cfg.UserPassword(s.User); !ok {
			d.warn(s.lineOf("user"), join(s.pathOr(fmt.Sprintf("schema_list[%d]", i)), "user"),
				"user %q is not in user_list; this schema is unused", s.User)
		}
	}
	// Not an error: a failover leaves a node of one replica with none
	// (the config it saves must load), and the last replica may be
	// removed to be rebuilt.
	for i := range cfg.Nodes {
		n := &cfg.Nodes[i]
		if slaves, err := n.Slaves(); err == nil && len(slaves) == 0 && n.FailoverAfter > 0 {
			d.warn(n.lineOf("failover_after"), join(n.pathOr(fmt.Sprintf("nodes[%d]", i)), "failover_after"),
				"node %s has no slave: there is no replica to fail over to until one is added", n.Name)
		}
	}
	if len(cfg.ResultCacheRules) > 0 && cfg.ResultCacheMB == 0 {
		d.warn(cfg.lineOf("result_cache_rules"), "result_cache_rules", "the result cache is off (result_cache_mb is 0): the rules do nothing")
	}
}
