package proxy

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/router"
)

// Sub-table checks: the sub-tables of a sharded table must have one
// definition, or a scatter fails ("a different number of columns") and an
// ALTER meant for all of them applies to some. ADMIN CHECK SHARDS lists
// them; a DDL that changes existing sub-tables first checks they agree.

// SubTableCheck is one sub-table as its node's information_schema shows it.
type SubTableCheck struct {
	Table    string `json:"table"` // db.table
	Node     string `json:"node"`
	SubTable string `json:"sub_table"`
	Exists   bool   `json:"exists"`
	// Same: its columns and indexes are those of the table's first
	// sub-table (false when either is missing).
	Same bool  `json:"same_definition"`
	Rows int64 `json:"rows_estimate"` // table_rows (an estimate for InnoDB)
	// Data, for a copy of a global table: "same" when its CHECKSUM TABLE
	// equals the first copy's, else "differs" ("" for sub-tables).
	Data string `json:"data,omitempty"`

	digest string
}

// subTableSQL reads, for the listed tables of a database, a digest of
// each one's columns and indexes and its estimated rows. A digest is the
// count and the sum of per-row hashes, so no length limit
// (group_concat_max_len) cuts it short.
const subTableSQL = `SELECT t.table_name, t.table_rows,
 (SELECT CONCAT(COUNT(*), ':', SUM(CONV(LEFT(MD5(CONCAT_WS('|', c.ordinal_position, c.column_name, c.column_type, c.is_nullable,
   IFNULL(c.column_default, '~'), c.extra, c.column_key, IFNULL(c.collation_name, '~'))), 15), 16, 10)))
  FROM information_schema.columns c WHERE c.table_schema = t.table_schema AND c.table_name = t.table_name),
 (SELECT CONCAT(COUNT(*), ':', SUM(CONV(LEFT(MD5(CONCAT_WS('|', s.index_name, s.non_unique, s.seq_in_index, s.column_name,
   IFNULL(s.sub_part, '~'), s.index_type)), 15), 16, 10)))
  FROM information_schema.statistics s WHERE s.table_schema = t.table_schema AND s.table_name = t.table_name)
 FROM information_schema.tables t WHERE t.table_schema = %s AND t.table_name IN (%s)`

// checkTimeout bounds one node's answer to the sub-table check.
const checkTimeout = 30 * time.Second

// checkRule reads the sub-tables of rule t from their nodes.
func checkRule(ctx context.Context, nodes map[string]*backend.Node, t *router.TableRule) ([]SubTableCheck, error) {
	n := len(t.Rule.Tables())
	out := make([]SubTableCheck, n)
	byNode := map[string][]int{}
	for i := range n {
		out[i] = SubTableCheck{Table: t.DB + "." + t.Table, Node: t.NodeOf(i), SubTable: t.SubTableName(i)}
		byNode[t.NodeOf(i)] = append(byNode[t.NodeOf(i)], i)
	}
	for node, idx := range byNode {
		nd := nodes[node]
		if nd == nil {
			return nil, fmt.Errorf("keyshard: node %s of table %s.%s is not configured", node, t.DB, t.Table)
		}
		names := make([]string, len(idx))
		for j, i := range idx {
			names[j] = out[i].SubTable
		}
		res, err := checkExec(ctx, nd, fmt.Sprintf(subTableSQL, backend.Quote(t.DB), quoteList(names)))
		if err != nil {
			return nil, fmt.Errorf("keyshard: reading the sub-tables of %s.%s on node %s: %w", t.DB, t.Table, node, err)
		}
		for _, r := range res.Rows {
			name := strings.ToLower(deref(r[0]))
			for _, i := range idx {
				if out[i].SubTable == name {
					out[i].Exists = true
					out[i].Rows, _ = strconv.ParseInt(deref(r[1]), 10, 64)
					out[i].digest = deref(r[2]) + "/" + deref(r[3])
				}
			}
		}
	}
	for i := range out {
		out[i].Same = out[0].Exists && out[i].Exists && out[i].digest == out[0].digest
	}
	return out, nil
}

// checkExec runs a check's query on node nd's master, within checkTimeout.
func checkExec(ctx context.Context, nd *backend.Node, q string) (*backend.Result, error) {
	bc, err := nd.Master.Get(ctx, backend.DefaultFlavor)
	if err != nil {
		return nil, err
	}
	_ = bc.SetDeadline(time.Now().Add(checkTimeout))
	res, err := bc.Exec(q)
	if err != nil || bc.SetDeadline(time.Time{}) != nil {
		bc.MarkBroken()
	}
	nd.Master.Put(bc)
	return res, err
}

// checksumCopies compares the rows of each copy of global table t with
// the first copy's, by CHECKSUM TABLE (a full read of each copy).
func checksumCopies(ctx context.Context, nodes map[string]*backend.Node, t *router.TableRule, rows []SubTableCheck) error {
	var first string
	for i := range rows {
		r := &rows[i]
		if !r.Exists {
			continue
		}
		res, err := checkExec(ctx, nodes[r.Node], "CHECKSUM TABLE "+backend.QuoteName(t.DB)+"."+backend.QuoteName(t.Table))
		if err != nil {
			return fmt.Errorf("keyshard: CHECKSUM TABLE of global table %s.%s on node %s: %w", t.DB, t.Table, r.Node, err)
		}
		sum := ""
		if len(res.Rows) > 0 && len(res.Rows[0]) > 1 {
			sum = deref(res.Rows[0][1])
		}
		if i == 0 {
			first = sum
		}
		r.Data = "differs"
		if rows[0].Exists && sum == first {
			r.Data = "same"
		}
	}
	return nil
}

// CheckShards reads every sharded table's sub-tables (ADMIN CHECK SHARDS).
func (s *Server) CheckShards(ctx context.Context) ([]SubTableCheck, error) {
	snap := s.snap.Load()
	seen := map[string]bool{}
	var out []SubTableCheck
	users := make([]string, 0, len(snap.routes))
	for u := range snap.routes {
		users = append(users, u)
	}
	slices.Sort(users)
	for _, u := range users {
		for _, t := range snap.routes[u].Rules() {
			key := t.DB + "." + t.Table + "@" + strings.Join(t.Nodes, ",")
			if seen[key] {
				continue
			}
			seen[key] = true
			rows, err := checkRule(ctx, snap.nodes, t)
			if err != nil {
				return nil, err
			}
			if t.Global {
				if err := checksumCopies(ctx, snap.nodes, t, rows); err != nil {
					return nil, err
				}
			}
			out = append(out, rows...)
		}
	}
	return out, nil
}

// subTablesAgree checks, before a DDL that changes the existing
// sub-tables of t, that they all exist with one definition: else the DDL
// would apply where it can and fail elsewhere, leaving them further apart.
func (s *Session) subTablesAgree(t *router.TableRule) error {
	rows, err := checkRule(s.srv.ctx, s.eng.Nodes, t)
	if err != nil {
		return err
	}
	var missing, differ []string
	for _, r := range rows {
		switch {
		case !r.Exists:
			missing = append(missing, r.SubTable+" ("+r.Node+")")
		case !r.Same:
			differ = append(differ, r.SubTable+" ("+r.Node+")")
		}
	}
	if len(missing) == 0 && len(differ) == 0 {
		return nil
	}
	msg := "keyshard: the sub-tables of sharded table " + t.Table + " do not agree, so this statement was not run on any:"
	if t.Global {
		msg = "keyshard: the copies of global table " + t.Table + " do not agree, so this statement was not run on any:"
	}
	if len(missing) > 0 {
		msg += " missing " + strings.Join(missing, ", ") + ";"
	}
	if len(differ) > 0 {
		msg += " defined unlike " + rows[0].SubTable + ": " + strings.Join(differ, ", ") + ";"
	}
	return newErr(errNotSupported, "%s see ADMIN CHECK SHARDS, and make them alike first", msg)
}
