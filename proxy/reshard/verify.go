package reshard

import (
	"context"
	"fmt"
	"strings"

	"github.com/keyshard/keyshard/backend"
)

// Diff is a difference Verify found between a source sub-table and the
// new layout: the table, the primary-key range of the chunk it was in,
// and the rows (at most a few per chunk), each as "key: source ... /
// target ...".
type Diff struct {
	Table  string
	Source Place
	From   string // primary key after which the chunk starts ("" first)
	To     string // last primary key of the chunk
	Rows   []string
	Count  int
}

func (d Diff) String() string {
	return fmt.Sprintf("table %s, %v, primary keys (%s, %s]: %d rows differ: %s", d.Table, d.Source, d.From, d.To, d.Count, strings.Join(d.Rows, "; "))
}

// maxDiffRows bounds the rows a Diff names.
const maxDiffRows = 5

// verifyAll compares every source sub-table of the node with the rows the
// new layout holds for its keys, chunk by chunk: each chunk's source rows
// are read in a consistent snapshot at position S after the binlog was
// applied up to S, so the targets (written for these keys by this node
// copy only) hold their state as of S too. Writes go on meanwhile.
func (c *nodeCopy) verifyAll(ctx context.Context) ([]Diff, error) {
	var out []Diff
	for _, s := range c.sources {
		var last []any
		for {
			d, next, err := c.verifyChunk(ctx, s, last)
			if err != nil {
				return out, err
			}
			if d != nil {
				out = append(out, *d)
			}
			if next == nil {
				break
			}
			last = next
		}
	}
	return out, nil
}

// verifyChunk compares the chunk of s after primary key last; next is the
// chunk's last key (nil when s has no more rows).
func (c *nodeCopy) verifyChunk(ctx context.Context, s *source, last []any) (*Diff, []any, error) {
	if err := snapshotAndCatchUp(ctx, c); err != nil {
		return nil, nil, err
	}
	q := "SELECT " + s.def.selectList() + " FROM " + backend.QuoteName(s.plan.DB) + "." + backend.QuoteName(s.name) +
		s.def.after(last) + fmt.Sprintf(" ORDER BY %s LIMIT %d", s.def.pkList(), c.chunk)
	res, err := c.src.Exec(q)
	_, _ = c.src.Exec("COMMIT")
	if err != nil {
		return nil, nil, fmt.Errorf("node %s: reading %s: %w", c.node, s.name, err)
	}
	if len(res.Rows) == 0 {
		return nil, nil, nil
	}
	lastRow := res.Rows[len(res.Rows)-1]
	var next []any
	for _, i := range s.def.PK {
		next = append(next, lastRow[i])
	}
	// The source's rows by primary key, and where each should be.
	want := map[string]string{}
	var dst []*Target
	for _, r := range res.Rows {
		row := rowValues(r)
		dst, err = s.plan.TargetsOf(dst[:0], s.def.keyValue(row[s.def.Key]))
		if err != nil {
			return nil, nil, err
		}
		for _, t := range dst {
			want[t.Place.String()+" "+s.def.pkText(r)] = s.def.rowText(r)
		}
	}
	// The targets' rows in the chunk's key range whose key the old rule
	// gives to s (others come from other sources).
	got := map[string]string{}
	for j := range s.plan.Targets {
		t := &s.plan.Targets[j]
		if t.Kept {
			continue
		}
		conn, err := c.w.conn(ctx, t.Node)
		if err != nil {
			return nil, nil, err
		}
		where := " WHERE (" + s.def.pkCompare(next, "<=") + ")"
		if last != nil {
			where = " WHERE (" + s.def.pkCompare(last, ">") + ") AND (" + s.def.pkCompare(next, "<=") + ")"
		}
		q := "SELECT " + s.def.selectList() + " FROM " + backend.QuoteName(t.DB) + "." + backend.QuoteName(t.Name) + where
		tr, err := conn.Exec(q)
		if err != nil {
			return nil, nil, fmt.Errorf("node %s: reading %s: %w", t.Node, t.Name, err)
		}
		for _, r := range tr.Rows {
			row := rowValues(r)
			if !s.plan.Old.Global {
				i, err := s.plan.Old.Rule.Find(s.def.keyValue(row[s.def.Key]))
				if err != nil || i != s.idx {
					continue
				}
			}
			got[t.Place.String()+" "+s.def.pkText(r)] = s.def.rowText(r)
		}
	}
	var d *Diff
	note := func(k, line string) {
		if d == nil {
			d = &Diff{Table: s.plan.Name(), Source: s.plan.Source(s.idx), From: s.def.pkString(last), To: s.def.pkString(next)}
		}
		d.Count++
		if len(d.Rows) < maxDiffRows {
			d.Rows = append(d.Rows, k+": "+line)
		}
	}
	for k, v := range want {
		switch g, ok := got[k]; {
		case !ok:
			note(k, "missing in the new layout")
		case g != v:
			note(k, "source ("+v+") / target ("+g+")")
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			note(k, "in the new layout ("+v+") but not in the source")
		}
	}
	return d, next, nil
}

// snapshotAndCatchUp opens a consistent snapshot on the node's source
// connection and applies the binlog up to its position (the caller reads
// in the snapshot, then commits).
func snapshotAndCatchUp(ctx context.Context, c *nodeCopy) error {
	snap, err := snapshot(c)
	if err != nil {
		return err
	}
	if err := c.catchUp(ctx, snap); err != nil {
		_, _ = c.src.Exec("COMMIT")
		return err
	}
	return nil
}
