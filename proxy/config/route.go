package config

import (
	"strings"

	"github.com/keyshard/keyshard/router"
)

// RouteConfig is what the router compiles from a schema_list entry.
func (sc *SchemaConfig) RouteConfig() router.SchemaConfig {
	rc := router.SchemaConfig{Default: sc.Default, Nodes: sc.Nodes}
	for j := range sc.ShardRule {
		r := &sc.ShardRule[j]
		tc := router.TableConfig{DB: r.DB, Table: r.Table, Key: r.Key, Nodes: r.Nodes, Shard: r.ShardRule()}
		if r.AutoIncrement != "" {
			tc.Seq = &router.Sequence{Name: r.SequenceName(), Column: r.AutoIncrement, Cache: r.SequenceCache}
		}
		rc.Tables = append(rc.Tables, tc)
	}
	return rc
}

// SplitList splits a comma-separated setting (allow_ips and the like)
// into its entries, blanks dropped.
func SplitList(v string) []string {
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
