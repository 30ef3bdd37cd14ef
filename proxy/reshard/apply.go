package reshard

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/binlog"
)

// Nodes is how the workflow reaches the backends of the running config.
type Nodes interface {
	// Dial opens a connection of the workflow's own to node's master.
	Dial(ctx context.Context, node string) (*backend.Conn, error)
	// Binlog says how to follow node's binlog.
	Binlog(node string) (binlog.Config, error)
	// Close lets go of what Dial keeps (Dial may be called again).
	Close()
}

// writer writes rows to the targets, one connection per target node, each
// with SET NAMES binary (values are written as the bytes read) and foreign
// key checks off (rows arrive in key order, not in their parents' order).
type writer struct {
	nodes Nodes
	conns map[string]*backend.Conn
}

func newWriter(nodes Nodes) *writer {
	return &writer{nodes: nodes, conns: map[string]*backend.Conn{}}
}

func (w *writer) conn(ctx context.Context, node string) (*backend.Conn, error) {
	if c := w.conns[node]; c != nil && !c.Broken() {
		return c, nil
	}
	c, err := openConn(ctx, w.nodes, node)
	if err != nil {
		return nil, err
	}
	w.conns[node] = c
	return c, nil
}

// openConn dials node for the workflow's reads and writes.
func openConn(ctx context.Context, nodes Nodes, node string) (*backend.Conn, error) {
	c, err := nodes.Dial(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	// Strict, so that no value is changed quietly; an id of 0 stays 0; time
	// zone UTC, as the binlog's TIMESTAMP text (backend/binlog).
	if _, err := c.Exec("SET NAMES binary, SESSION sql_mode = 'STRICT_ALL_TABLES,NO_AUTO_VALUE_ON_ZERO,NO_ENGINE_SUBSTITUTION', " +
		"SESSION time_zone = '+00:00', SESSION foreign_key_checks = 0, " +
		"SESSION autocommit = 1"); err != nil {
		c.Close()
		return nil, fmt.Errorf("node %s: %w", node, err)
	}
	return c, nil
}

func (w *writer) close() {
	for _, c := range w.conns {
		c.Close()
	}
	clear(w.conns)
}

// exec runs stmts on node in one transaction.
func (w *writer) exec(ctx context.Context, node string, stmts []string) error {
	if len(stmts) == 0 {
		return nil
	}
	c, err := w.conn(ctx, node)
	if err != nil {
		return err
	}
	if len(stmts) > 1 {
		if _, err := c.Exec("BEGIN"); err != nil {
			return fmt.Errorf("node %s: %w", node, err)
		}
	}
	for _, q := range stmts {
		if _, err := c.Exec(q); err != nil {
			if len(stmts) > 1 {
				_, _ = c.Exec("ROLLBACK")
			}
			return fmt.Errorf("node %s: %w (in %.200s)", node, err, q)
		}
	}
	if len(stmts) > 1 {
		if _, err := c.Exec("COMMIT"); err != nil {
			return fmt.Errorf("node %s: %w", node, err)
		}
	}
	return nil
}

// replaceStmt is REPLACE INTO t with rows (each value as from a copy's
// text or a binlog change).
func replaceStmt(t *Target, d *TableDef, rows [][]any) string {
	var b strings.Builder
	b.WriteString("REPLACE INTO ")
	b.WriteString(backend.QuoteName(t.DB) + "." + backend.QuoteName(t.Name))
	b.WriteString(" (")
	for i, c := range d.Columns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(backend.QuoteName(c))
	}
	b.WriteString(") VALUES ")
	for r, row := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for i, v := range row {
			if i > 0 {
				b.WriteString(", ")
			}
			d.literal(&b, i, v)
		}
		b.WriteByte(')')
	}
	return b.String()
}

// deleteStmt deletes from t the rows whose primary keys and shard keys
// rows have: with the shard key too, a delete read late from one source
// node's binlog cannot remove the row of the same primary key that a
// change of another node's, already applied, put there under another key.
func deleteStmt(t *Target, d *TableDef, rows [][]any) string {
	cols := d.PK
	if !slices.Contains(cols, d.Key) {
		cols = append(slices.Clone(cols), d.Key)
	}
	var b strings.Builder
	b.WriteString("DELETE FROM ")
	b.WriteString(backend.QuoteName(t.DB) + "." + backend.QuoteName(t.Name))
	b.WriteString(" WHERE (")
	for n, i := range cols {
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(backend.QuoteName(d.Columns[i]))
	}
	b.WriteString(") IN (")
	for r, row := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for n, i := range cols {
			if n > 0 {
				b.WriteString(", ")
			}
			d.literal(&b, i, row[i])
		}
		b.WriteByte(')')
	}
	b.WriteByte(')')
	return b.String()
}

// batch is the net effect of a run of committed changes on the targets:
// per target, the last image of each primary key (a row to write whole, or
// a delete). Row images are the rows as stored, so the last image of a key
// is its state at the batch's end; applying the deletes, then the writes,
// gives every target that state in one transaction per node, with two
// statements per target (LESSONS 5: batch what can be batched).
type batch struct {
	per     map[*Target]*targetBatch
	order   []*Target
	changes int
}

type targetBatch struct {
	def  *TableDef
	keys map[string]int // primary key text -> index into acts
	acts []action
}

type action struct {
	row []any
	del bool
}

func (b *batch) add(t *Target, d *TableDef, row []any, del bool) {
	if b.per == nil {
		b.per = map[*Target]*targetBatch{}
	}
	tb := b.per[t]
	if tb == nil {
		tb = &targetBatch{def: d, keys: map[string]int{}}
		b.per[t] = tb
		b.order = append(b.order, t)
	}
	k := pkKey(d, row)
	if i, ok := tb.keys[k]; ok {
		tb.acts[i] = action{row: row, del: del}
		return
	}
	tb.keys[k] = len(tb.acts)
	tb.acts = append(tb.acts, action{row: row, del: del})
}

func (b *batch) reset() {
	clear(b.per)
	b.order = b.order[:0]
	b.changes = 0
}

// maxStmtRows bounds the rows of one REPLACE or DELETE a batch sends.
const maxStmtRows = 500

// stmts are the statements of b's targets on node: deletes, then writes.
func (b *batch) stmts(node string) []string {
	var out []string
	for _, t := range b.order {
		if t.Node != node {
			continue
		}
		tb := b.per[t]
		var dels, rows [][]any
		for _, a := range tb.acts {
			if a.del {
				dels = append(dels, a.row)
			} else {
				rows = append(rows, a.row)
			}
		}
		for len(dels) > 0 {
			n := min(len(dels), maxStmtRows)
			out = append(out, deleteStmt(t, tb.def, dels[:n]))
			dels = dels[n:]
		}
		for len(rows) > 0 {
			n := min(len(rows), maxStmtRows)
			out = append(out, replaceStmt(t, tb.def, rows[:n]))
			rows = rows[n:]
		}
	}
	return out
}

// nodes are the target nodes b writes to.
func (b *batch) nodes() []string {
	var out []string
	for _, t := range b.order {
		if !slices.Contains(out, t.Node) {
			out = append(out, t.Node)
		}
	}
	return out
}

// addChange adds ch, a change of a source sub-table, to b: the row leaves
// the target of its old key (when that differs from its new one, or its
// primary key changed) and is written whole to the target of its new key.
func (b *batch) addChange(p *TablePlan, d *TableDef, ch *binlog.Change) error {
	if err := sameColumns(p, d, ch); err != nil {
		return err
	}
	var before, after []*Target
	var err error
	if ch.Before != nil {
		if before, err = p.TargetsOf(nil, d.keyValue(ch.Before[d.Key])); err != nil {
			return err
		}
	}
	if ch.After != nil {
		if after, err = p.TargetsOf(nil, d.keyValue(ch.After[d.Key])); err != nil {
			return err
		}
	}
	pkChanged := ch.Before != nil && ch.After != nil && !samePK(d, ch.Before, ch.After)
	for _, t := range before {
		if pkChanged || !slices.Contains(after, t) {
			b.add(t, d, ch.Before, true)
		}
	}
	for _, t := range after {
		b.add(t, d, ch.After, false)
	}
	b.changes++
	return nil
}

// pkKey is a row's primary key as a map key.
func pkKey(d *TableDef, row []any) string {
	var sb strings.Builder
	for _, i := range d.PK {
		fmt.Fprintf(&sb, "%T:%v\x00", row[i], row[i])
	}
	return sb.String()
}

func samePK(d *TableDef, a, b []any) bool {
	for _, i := range d.PK {
		if fmt.Sprint(a[i]) != fmt.Sprint(b[i]) {
			return false
		}
	}
	return true
}

// sameColumns checks a change has the columns the copy started with: a
// DDL on a table being resharded is refused through keyshard, but not on
// the server itself.
func sameColumns(p *TablePlan, d *TableDef, ch *binlog.Change) error {
	if len(ch.Columns) != len(d.Columns) {
		return fmt.Errorf("table %s: %s.%s now has %d columns, %d when resharding started: its definition changed under the workflow",
			p.Name(), ch.Schema, ch.Table, len(ch.Columns), len(d.Columns))
	}
	for i, c := range ch.Columns {
		if !strings.EqualFold(c, d.Columns[i]) {
			return fmt.Errorf("table %s: %s.%s column %d is %s, %s when resharding started: its definition changed under the workflow",
				p.Name(), ch.Schema, ch.Table, i+1, c, d.Columns[i])
		}
	}
	return nil
}
