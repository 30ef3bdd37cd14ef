package reshard

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/binlog"
)

// source is one old sub-table read by a nodeCopy.
type source struct {
	plan *TablePlan
	def  *TableDef
	idx  int // old sub-table index
	name string
	done bool
	last []any // primary key of the last row copied (nil: none yet)
}

// nodeCopy copies the source sub-tables of one node and applies the
// node's binlog to their targets.
//
// The copy and the catch-up take turns on one goroutine, as Vitess's
// VReplication does: each chunk is read in a consistent snapshot whose
// binlog position S the server gives (binlog.Snapshot); before the chunk
// is written, every change up to S is applied; the chunk's rows are then
// written whole (REPLACE), and changes after S follow. So at every step
// the targets hold, for each row they hold, its state as of the position
// applied: a row changed after being copied gets the change, one deleted
// before its chunk is read is not in the chunk, one written by a change
// before its chunk is overwritten by the chunk's newer (or equal) state.
// Changes of rows not copied yet are applied too (wasted, not wrong).
type nodeCopy struct {
	node    string
	nodes   Nodes
	sources []*source
	byName  map[string]*source // sub-table name -> source
	chunk   int

	src *backend.Conn
	f   *binlog.Follower
	w   *writer
	pos binlog.Position // applied up to here (a transaction boundary)

	batch   batch           // committed changes not applied yet
	ownDDL  map[string]bool // the workflow's own DDL statements (Copier.own)
	copied  atomic.Int64    // rows written by the copy
	applied atomic.Int64    // changes applied from the binlog
}

// start opens the source connection, takes the position the follower
// starts at and starts it: everything committed after it is applied.
func (c *nodeCopy) start(ctx context.Context, from binlog.Position) error {
	src, err := openConn(ctx, c.nodes, c.node)
	if err != nil {
		return err
	}
	c.src = src
	if from.IsZero() {
		if from, err = binlog.Current(src); err != nil {
			return fmt.Errorf("node %s: %w", c.node, err)
		}
	}
	cfg, err := c.nodes.Binlog(c.node)
	if err != nil {
		return err
	}
	db := c.sources[0].plan.DB
	cfg.Tables = func(schema, table string) bool {
		return strings.EqualFold(schema, db) && c.byName[strings.ToLower(table)] != nil
	}
	f, err := binlog.Follow(cfg, from)
	if err != nil {
		return fmt.Errorf("node %s: following its binlog from %v: %w", c.node, from, err)
	}
	c.f, c.pos = f, from
	c.w = newWriter(c.nodes)
	return nil
}

func (c *nodeCopy) close() {
	if c.f != nil {
		c.f.Close()
	}
	if c.src != nil {
		c.src.Close()
	}
	if c.w != nil {
		c.w.close()
	}
}

// catchUp applies the binlog until the position applied reaches until.
// Committed transactions are applied in batches (see batch): up to
// maxBatch changes, or all read when until is reached.
func (c *nodeCopy) catchUp(ctx context.Context, until binlog.Position) error {
	read := c.pos // read up to here (a transaction boundary)
	for read.Compare(until) < 0 {
		ev, err := c.f.Next(ctx)
		if err != nil {
			return fmt.Errorf("node %s: reading its binlog after %v: %w", c.node, read, err)
		}
		switch {
		case ev.Commit:
			for i := range ev.Changes {
				ch := &ev.Changes[i]
				if s := c.byName[strings.ToLower(ch.Table)]; s != nil {
					if err := c.batch.addChange(s.plan, s.def, ch); err != nil {
						return err
					}
				}
			}
			read = ev.Pos
			if c.batch.changes >= maxBatch {
				if err := c.flush(ctx, read); err != nil {
					return err
				}
			}
		case ev.DDL != "":
			if s := c.touches(ev.DDL); s != nil {
				return fmt.Errorf("table %s: a DDL statement ran on %s.%s on node %s while resharding (%.100s): cancel and start again",
					s.plan.Name(), s.plan.DB, s.name, c.node, ev.DDL)
			}
			read = ev.Pos
		default:
			read = ev.Pos
		}
	}
	return c.flush(ctx, read)
}

// maxBatch is how many changes a batch gathers before it is applied.
const maxBatch = 2000

// flush applies the batch, one transaction per target node, and records
// pos as applied.
func (c *nodeCopy) flush(ctx context.Context, pos binlog.Position) error {
	for _, node := range c.batch.nodes() {
		if err := c.w.exec(ctx, node, c.batch.stmts(node)); err != nil {
			return fmt.Errorf("applying changes of node %s's binlog to node %s: %w", c.node, node, err)
		}
	}
	c.applied.Add(int64(c.batch.changes))
	c.batch.reset()
	c.pos = pos
	return nil
}

// touches is the source a DDL statement names, if any (as a whole word:
// when in doubt, it stops the workflow rather than lose changes). The
// workflow's own statements (its renames) are not counted.
func (c *nodeCopy) touches(ddl string) *source {
	if c.ownDDL[strings.TrimSpace(ddl)] {
		return nil
	}
	low := strings.ToLower(ddl)
	for name, s := range c.byName {
		for i := 0; ; {
			j := strings.Index(low[i:], name)
			if j < 0 {
				break
			}
			j += i
			if (j == 0 || !identByte(low[j-1])) && (j+len(name) == len(low) || !identByte(low[j+len(name)])) {
				return s
			}
			i = j + 1
		}
	}
	return nil
}

func identByte(b byte) bool {
	return b == '_' || b == '$' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 0x80
}

// copyChunk copies the next chunk of s: false when s has no more rows.
func (c *nodeCopy) copyChunk(ctx context.Context, s *source) (bool, error) {
	if err := snapshotAndCatchUp(ctx, c); err != nil {
		return false, err
	}
	q := "SELECT " + s.def.selectList() + " FROM " + backend.QuoteName(s.plan.DB) + "." + backend.QuoteName(s.name) +
		s.def.after(s.last) + fmt.Sprintf(" ORDER BY %s LIMIT %d", s.def.pkList(), c.chunk)
	res, err := c.src.Exec(q)
	_, _ = c.src.Exec("COMMIT")
	if err != nil {
		return false, fmt.Errorf("node %s: reading %s: %w", c.node, s.name, err)
	}
	rows := make(map[*Target][][]any)
	var order []*Target
	var dst []*Target
	for _, r := range res.Rows {
		row := rowValues(r)
		dst, err = s.plan.TargetsOf(dst[:0], s.def.keyValue(row[s.def.Key]))
		if err != nil {
			return false, err
		}
		for _, t := range dst {
			if rows[t] == nil {
				order = append(order, t)
			}
			rows[t] = append(rows[t], row)
		}
	}
	for _, t := range order {
		if err := c.w.exec(ctx, t.Node, []string{replaceStmt(t, s.def, rows[t])}); err != nil {
			return false, fmt.Errorf("copying %s to %v: %w", s.name, t.Place, err)
		}
		c.copied.Add(int64(len(rows[t])))
	}
	if len(res.Rows) < c.chunk {
		return false, nil
	}
	lastRow := res.Rows[len(res.Rows)-1]
	s.last = nil
	for _, i := range s.def.PK {
		s.last = append(s.last, lastRow[i])
	}
	return true, nil
}

// copyAll copies every source of the node, chunk by chunk.
func (c *nodeCopy) copyAll(ctx context.Context) error {
	for _, s := range c.sources {
		for !s.done {
			more, err := c.copyChunk(ctx, s)
			if err != nil {
				return err
			}
			s.done = !more
		}
	}
	return nil
}

// caughtUp applies the binlog up to the node's current position.
func (c *nodeCopy) caughtUp(ctx context.Context) error {
	now, err := binlog.Current(c.src)
	if err != nil {
		return fmt.Errorf("node %s: %w", c.node, err)
	}
	return c.catchUp(ctx, now)
}

// snapshot starts a consistent snapshot on the node's source connection.
func snapshot(c *nodeCopy) (binlog.Position, error) {
	p, err := binlog.Snapshot(c.src)
	if err != nil {
		return p, fmt.Errorf("node %s: %w", c.node, err)
	}
	return p, nil
}

// rowValues turns a text row into values (nil for NULL).
func rowValues(r []*string) []any {
	row := make([]any, len(r))
	for i, v := range r {
		if v != nil {
			row[i] = *v
		}
	}
	return row
}
