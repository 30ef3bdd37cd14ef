// Package catalog keeps the router's knowledge of the tables' columns
// current (router.Columns, one snapshot per schema): which table an
// unqualified column belongs to, the key's place in an INSERT without a
// column list, NATURAL and USING joins. The columns are read from the
// backends' information_schema: a sharded table's from its first
// sub-table, a global table's from its first copy, the other tables of
// the sharded tables' databases from the schema's default node. A schema
// is read at start and after each reload that builds it anew, again after
// each DDL keyshard runs (before the DDL's answer, so that the client's
// next statement sees the new columns), and every RefreshEvery, which
// catches DDL run on the backends directly.
//
// It declares what it reads of the running configuration (Env) and never
// imports proxy.
package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/router"
	"go.uber.org/zap"
)

// RefreshEvery is how often every schema's columns are read again.
const RefreshEvery = time.Minute

// Env is what the catalog reads of the running configuration (proxy.Server
// implements it).
type Env interface {
	// Routes are the compiled shard rules, by user.
	Routes() map[string]*router.Schema
	// Nodes are the backend nodes, by name.
	Nodes() map[string]*backend.Node
}

// Catalog reads the tables' columns for the router.
type Catalog struct {
	env  Env
	log  *zap.Logger
	kick chan struct{}
}

// New makes the catalog of env's schemas; Run keeps it current.
func New(env Env, log *zap.Logger) *Catalog {
	return &Catalog{env: env, log: log, kick: make(chan struct{}, 1)}
}

// Kick asks Run to read every schema again soon (a reload built new
// ones).
func (c *Catalog) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run reads every schema's columns at once, then on each Kick and every
// RefreshEvery, until ctx ends. A schema that cannot be read (a node
// down) keeps what it had and is read again at the next turn.
func (c *Catalog) Run(ctx context.Context) {
	t := time.NewTicker(RefreshEvery)
	defer t.Stop()
	failed := false
	for {
		failed = c.refreshAll(ctx, failed)
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-t.C:
		}
	}
}

// refreshAll reads every schema; it logs a failure once until a read
// succeeds again (wasFailing says one was logged), and reports whether
// one failed.
func (c *Catalog) refreshAll(ctx context.Context, wasFailing bool) bool {
	failing := false
	for user, rs := range c.env.Routes() {
		if err := c.Refresh(ctx, rs); err != nil {
			failing = true
			if !wasFailing && ctx.Err() == nil {
				c.log.Warn("catalog: cannot read the tables' columns; unqualified columns of its tables stay unresolved until it can",
					zap.String("user", user), zap.Error(err))
			}
		}
	}
	return failing
}

// Refresh reads the columns of schema rs's tables and gives them to its
// router (an unchanged snapshot changes nothing). A schema without
// sharded tables needs none.
func (c *Catalog) Refresh(ctx context.Context, rs *router.Schema) error {
	if rs == nil || !rs.Sharded() {
		return nil
	}
	rules := rs.Rules()
	var dbs []string
	// The node whose answer holds each table's columns, and the name the
	// table has there.
	type source struct {
		id   router.TableID
		node string
		name string
	}
	var srcs []source
	for _, r := range rules {
		if !slices.Contains(dbs, r.DB) {
			dbs = append(dbs, r.DB)
		}
		srcs = append(srcs, source{router.TableID{DB: r.DB, Table: r.Table}, r.NodeOf(0), r.SubTableName(0)})
	}
	slices.Sort(dbs)
	nodes := c.env.Nodes()
	byNode := map[string]map[router.TableID][]string{}
	read := func(node string) (map[router.TableID][]string, error) {
		if t, ok := byNode[node]; ok {
			return t, nil
		}
		n := nodes[node]
		if n == nil {
			return nil, fmt.Errorf("node %s is not configured", node)
		}
		t, err := readColumns(ctx, n.Master, dbs)
		if err != nil {
			return nil, fmt.Errorf("node %s (%s): %w", node, n.Master.Addr(), err)
		}
		byNode[node] = t
		return t, nil
	}
	out := map[router.TableID][]string{}
	if rs.Default != "" {
		// The default node's own tables, but for sub-tables that happen
		// to live there (they are not tables clients name).
		t, err := read(rs.Default)
		if err != nil {
			return err
		}
		for id, cols := range t {
			if !rs.IsSubTable(id.DB, id.Table) {
				out[id] = cols
			}
		}
	}
	for _, s := range srcs {
		t, err := read(s.node)
		if err != nil {
			return err
		}
		if cols, ok := t[router.TableID{DB: s.id.DB, Table: s.name}]; ok {
			out[s.id] = cols
		} else {
			delete(out, s.id) // not created yet: unknown
		}
	}
	rs.SetColumns(router.NewColumns(out))
	return nil
}

// readColumns reads the columns of every table of dbs on pool p, in table
// order, by lower-case database and table name.
func readColumns(ctx context.Context, p *backend.Pool, dbs []string) (map[router.TableID][]string, error) {
	quoted := make([]string, len(dbs))
	for i, db := range dbs {
		quoted[i] = backend.Quote(db)
	}
	res, err := p.Query(ctx, "SELECT LOWER(table_schema), LOWER(table_name), LOWER(column_name) FROM information_schema.columns WHERE table_schema IN ("+
		strings.Join(quoted, ", ")+") ORDER BY table_schema, table_name, ordinal_position")
	if err != nil {
		return nil, err
	}
	out := map[router.TableID][]string{}
	for _, row := range res.Rows {
		if len(row) < 3 || row[0] == nil || row[1] == nil || row[2] == nil {
			continue
		}
		id := router.TableID{DB: *row[0], Table: *row[1]}
		out[id] = append(out[id], *row[2])
	}
	return out, nil
}
