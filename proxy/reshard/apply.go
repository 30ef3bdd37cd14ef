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
	if _, err := c.Exec("SET NAMES binary, SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION', SESSION foreign_key_checks = 0, " +
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

// deleteStmt deletes from t the row whose primary key row has.
func deleteStmt(t *Target, d *TableDef, row []any) string {
	var b strings.Builder
	b.WriteString("DELETE FROM ")
	b.WriteString(backend.QuoteName(t.DB) + "." + backend.QuoteName(t.Name))
	b.WriteString(" WHERE ")
	for n, i := range d.PK {
		if n > 0 {
			b.WriteString(" AND ")
		}
		b.WriteString(backend.QuoteName(d.Columns[i]))
		b.WriteString(" = ")
		d.literal(&b, i, row[i])
	}
	return b.String()
}

// changeStmts appends to per (statements by target node) what applying ch,
// a change of a source sub-table, takes: the row leaves the target of its
// old key (when that differs from its new one, or its primary key
// changed) and is written whole to the target of its new key.
func changeStmts(per map[string][]string, p *TablePlan, d *TableDef, ch *binlog.Change) error {
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
			per[t.Node] = append(per[t.Node], deleteStmt(t, d, ch.Before))
		}
	}
	for _, t := range after {
		per[t.Node] = append(per[t.Node], replaceStmt(t, d, [][]any{ch.After}))
	}
	return nil
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
