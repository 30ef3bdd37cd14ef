package reshard

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/keyshard/keyshard/backend"
)

// Copier copies the moving rows of some tables to their places in the new
// layout and keeps them current from the binlogs of the source nodes: one
// nodeCopy (one goroutine, one binlog follower) per source node.
type Copier struct {
	plans  []*TablePlan
	nodes  Nodes
	copies []*nodeCopy
}

// DefaultChunk is how many rows one copy step reads.
const DefaultChunk = 1000

// NewCopier reads the definitions of every source sub-table (each must
// have a primary key and the shard key column) and groups them by node.
func NewCopier(ctx context.Context, nodes Nodes, plans []*TablePlan, chunk int) (*Copier, error) {
	if chunk <= 0 {
		chunk = DefaultChunk
	}
	c := &Copier{plans: plans, nodes: nodes}
	byNode := map[string]*nodeCopy{}
	for _, p := range plans {
		for _, i := range p.Sources {
			pl := p.Source(i)
			nc := byNode[pl.Node]
			if nc == nil {
				nc = &nodeCopy{node: pl.Node, nodes: nodes, byName: map[string]*source{}, chunk: chunk}
				byNode[pl.Node] = nc
				c.copies = append(c.copies, nc)
			}
			if len(nc.sources) > 0 && !strings.EqualFold(nc.sources[0].plan.DB, p.DB) {
				return nil, fmt.Errorf("tables %s and %s are in different databases: reshard them one database at a time", nc.sources[0].plan.Name(), p.Name())
			}
			nc.sources = append(nc.sources, &source{plan: p, idx: i, name: pl.Name})
			nc.byName[strings.ToLower(pl.Name)] = nc.sources[len(nc.sources)-1]
		}
	}
	for _, nc := range c.copies {
		conn, err := openConn(ctx, nodes, nc.node)
		if err != nil {
			return nil, err
		}
		for _, s := range nc.sources {
			d, err := ReadDef(conn, s.plan.DB, s.name, s.plan.New.Key)
			if err != nil {
				conn.Close()
				return nil, fmt.Errorf("node %s: %w", nc.node, err)
			}
			s.def = d
		}
		conn.Close()
	}
	return c, nil
}

// Create creates every target the plans create, with the definition of
// the table's first source sub-table. A target that exists already is an
// error naming it (a leftover of an earlier attempt: CANCEL drops those),
// checked on every node before anything is created.
func (c *Copier) Create(ctx context.Context) error {
	defs := map[*TablePlan]*TableDef{}
	for _, nc := range c.copies {
		for _, s := range nc.sources {
			if defs[s.plan] == nil {
				defs[s.plan] = s.def
			}
		}
	}
	conns := map[string]*backend.Conn{}
	defer func() {
		for _, cn := range conns {
			cn.Close()
		}
	}()
	conn := func(node string) (*backend.Conn, error) {
		if cn := conns[node]; cn != nil {
			return cn, nil
		}
		cn, err := openConn(ctx, c.nodes, node)
		if err != nil {
			return nil, err
		}
		conns[node] = cn
		return cn, nil
	}
	type job struct {
		t   *Target
		sql string
	}
	var jobs []job
	for _, p := range c.plans {
		d := defs[p]
		for j := range p.Targets {
			t := &p.Targets[j]
			if !t.Create {
				continue
			}
			if d == nil {
				return fmt.Errorf("table %s: no source sub-table to take the definition of %v from", p.Name(), t.Place)
			}
			cn, err := conn(t.Node)
			if err != nil {
				return err
			}
			res, err := cn.Exec("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = " + quote(t.DB) + " AND TABLE_NAME = " + quote(t.Name))
			if err != nil {
				return fmt.Errorf("node %s: %w", t.Node, err)
			}
			if str(res.Rows[0][0]) != "0" {
				return fmt.Errorf("table %s: %v exists already on node %s; the new layout's sub-table must not (drop it, or ADMIN RESHARD CANCEL an earlier attempt)",
					p.Name(), t.Place, t.Node)
			}
			q, err := d.CreateAs(t.DB, t.Name)
			if err != nil {
				return err
			}
			jobs = append(jobs, job{t, q})
		}
	}
	for _, j := range jobs {
		cn, err := conn(j.t.Node)
		if err != nil {
			return err
		}
		if _, err := cn.Exec(j.sql); err != nil {
			return fmt.Errorf("node %s: creating %s: %w", j.t.Node, j.t.Name, err)
		}
	}
	return nil
}

// each runs f on every node copy at once and returns the first error.
func (c *Copier) each(f func(*nodeCopy) error) error {
	errs := make([]error, len(c.copies))
	var wg sync.WaitGroup
	for i, nc := range c.copies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(nc)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Copy starts following every source node's binlog from its current
// position, copies every source sub-table, and catches up.
func (c *Copier) Copy(ctx context.Context) error {
	return c.each(func(nc *nodeCopy) error {
		if err := nc.start(ctx, nc.pos); err != nil {
			return err
		}
		if err := nc.copyAll(ctx); err != nil {
			return err
		}
		return nc.caughtUp(ctx)
	})
}

// CatchUp applies every source node's binlog up to its position now.
func (c *Copier) CatchUp(ctx context.Context) error {
	return c.each(func(nc *nodeCopy) error { return nc.caughtUp(ctx) })
}

// Verify compares every source sub-table with the rows the new layout
// holds for its keys while writes go on (see verifyAll): nil when they
// are equal.
func (c *Copier) Verify(ctx context.Context) ([]Diff, error) {
	diffs := make([][]Diff, len(c.copies))
	idx := map[*nodeCopy]int{}
	for i, nc := range c.copies {
		idx[nc] = i
	}
	err := c.each(func(nc *nodeCopy) error {
		d, err := nc.verifyAll(ctx)
		diffs[idx[nc]] = d
		return err
	})
	var out []Diff
	for _, d := range diffs {
		out = append(out, d...)
	}
	return out, err
}

// own records a DDL statement the workflow runs on the nodes, which their
// binlogs then carry: not a change under the workflow.
func (c *Copier) own(q string) {
	for _, nc := range c.copies {
		if nc.ownDDL == nil {
			nc.ownDDL = map[string]bool{}
		}
		nc.ownDDL[strings.TrimSpace(q)] = true
	}
}

// waitPrepared waits until no XA branch prepared on a source node now is
// still prepared there (each decided, committed or rolled back).
func (c *Copier) waitPrepared(ctx context.Context) error {
	return c.each(func(nc *nodeCopy) error {
		first := true
		var seen map[string]bool
		for {
			res, err := nc.src.Exec("XA RECOVER")
			if err != nil {
				return fmt.Errorf("node %s: XA RECOVER: %w", nc.node, err)
			}
			now := map[string]bool{}
			for _, r := range res.Rows {
				if len(r) >= 4 {
					now[str(r[3])] = true
				}
			}
			if first {
				seen, first = now, false
			}
			left := 0
			for x := range seen {
				if now[x] {
					left++
				}
			}
			if left == 0 {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %s: %d XA branches still prepared: %w", nc.node, left, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
}

// Progress is rows copied and changes applied so far.
func (c *Copier) Progress() (copied, applied int64) {
	for _, nc := range c.copies {
		copied += nc.copied.Load()
		applied += nc.applied.Load()
	}
	return copied, applied
}

// Close stops the followers and closes the connections.
func (c *Copier) Close() {
	for _, nc := range c.copies {
		nc.close()
	}
}
