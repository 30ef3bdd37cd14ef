package xa

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/engine"
	"github.com/keyshard/keyshard/router"
)

// Sequences: a sharded table's auto-increment column (auto_increment in
// its rule) takes its ids from a row of <xa_log_db>.ks_sequence on
// xa_log_node (by default the first schema's default node), so that every keyshard
// instance sharing the backends draws from one counter. An instance takes
// a block of sequence_cache ids at a time with one statement,
//
//	UPDATE ks_sequence SET next_id = LAST_INSERT_ID(next_id + n) WHERE name = ?
//
// which the row lock makes atomic across instances (its OK carries the new
// next_id), and hands them out from memory. A sequence's row is created on
// first use, starting after the greatest value the column already holds
// in any sub-table, so an existing table keeps its ids. Ids are never given
// back: a rolled-back INSERT, an unused block at shutdown leave gaps, as
// AUTO_INCREMENT does.

// seqTable is the sequence table's name in xa_log_db.
const seqTable = "ks_sequence"

// Sequences hands out ids, per sequence name, from blocks (see
// Coordinator.Sequences).
type Sequences struct {
	x     *Coordinator // its xa_log_db and configuration
	mu    sync.Mutex
	named map[string]*seqBlock
	ready sync.Map // node name -> true: its sequence table exists
}

// seqBlock is the ids of a sequence this instance holds: next up to end
// (exclusive).
type seqBlock struct {
	mu        sync.Mutex
	next, end uint64
}

// Take returns the first of n consecutive ids of seq, which fills a
// column of table t: from the block held when it has n left, else from
// a new block of max(n, cache) ids (the rest of the old one is dropped,
// so that one INSERT's ids are consecutive).
func (q *Sequences) Take(ctx context.Context, seq *router.Sequence, t *router.TableRule, n int) (uint64, error) {
	q.mu.Lock()
	b := q.named[seq.Name]
	if b == nil {
		b = &seqBlock{}
		q.named[seq.Name] = b
	}
	q.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.end-b.next < uint64(n) {
		size := uint64(max(n, seq.Cache))
		first, err := q.fetch(ctx, seq, t, size)
		if err != nil {
			return 0, err
		}
		b.next, b.end = first, first+size
	}
	first := b.next
	b.next += uint64(n)
	return first, nil
}

// fetch takes a block of size ids of seq on the sequence node and returns
// the first.
func (q *Sequences) fetch(ctx context.Context, seq *router.Sequence, t *router.TableRule, size uint64) (uint64, error) {
	cfg, nodes := q.x.env.Running()
	node := cfg.XALogNode
	nd := nodes[node]
	if nd == nil {
		return 0, engine.Errorf(engine.KindNotSupported, "keyshard: sequence %s: its node %q (xa_log_node) is not configured", seq.Name, node)
	}
	bc, put, err := conn(ctx, nd.Master)
	if err != nil {
		return 0, err
	}
	defer put()
	table := backend.QuoteName(q.x.db) + "." + seqTable
	if _, ok := q.ready.Load(node); !ok {
		for _, ddl := range []string{"CREATE DATABASE IF NOT EXISTS " + backend.QuoteName(q.x.db),
			"CREATE TABLE IF NOT EXISTS " + table + " (name VARCHAR(191) NOT NULL PRIMARY KEY, " +
				"next_id BIGINT UNSIGNED NOT NULL) ENGINE=InnoDB"} {
			if _, err := bc.Exec(ddl); err != nil {
				return 0, seqErr(seq, node, "creating the sequence table "+table, err)
			}
		}
		q.ready.Store(node, true)
	}
	upd := "UPDATE " + table + " SET next_id = LAST_INSERT_ID(next_id + " + strconv.FormatUint(size, 10) +
		") WHERE name = " + backend.Quote(seq.Name)
	res, err := bc.Exec(upd)
	if err == nil && res.OK.AffectedRows == 0 {
		// First use: the sequence starts after the ids already there.
		start := uint64(1)
		for _, r := range seqRules(q.x.env.Routes(), seq.Name, t) {
			v, err := q.start(ctx, nodes, r, r.Seq.Column)
			if err != nil {
				return 0, seqErr(seq, node, "reading the greatest "+r.Table+"."+r.Seq.Column, err)
			}
			start = max(start, v)
		}
		if _, err = bc.Exec("INSERT IGNORE INTO " + table + " (name, next_id) VALUES (" + backend.Quote(seq.Name) + ", " +
			strconv.FormatUint(start, 10) + ")"); err == nil {
			res, err = bc.Exec(upd)
		}
	}
	if err != nil {
		return 0, seqErr(seq, node, "taking a block of ids", err)
	}
	if res.OK.AffectedRows == 0 || res.OK.InsertID < size {
		return 0, engine.Errorf(engine.KindNotSupported, "keyshard: sequence %s on node %s: no row in %s after creating it", seq.Name, node, table)
	}
	return res.OK.InsertID - size, nil
}

// seqRules are the rules whose ids come from the sequence name (t first):
// a sequence starts after the ids already in every table it fills.
func seqRules(routes map[string]*router.Schema, name string, t *router.TableRule) []*router.TableRule {
	out := []*router.TableRule{t}
	for _, sc := range routes {
		for _, r := range sc.Rules() {
			if r.Seq != nil && r.Seq.Name == name && !slices.ContainsFunc(out, func(o *router.TableRule) bool { return o.DB == r.DB && o.Table == r.Table }) {
				out = append(out, r)
			}
		}
	}
	return out
}

// start is one more than the greatest value of column col in any
// sub-table of t (1 when all are empty).
func (q *Sequences) start(ctx context.Context, nodes map[string]*backend.Node, t *router.TableRule, col string) (uint64, error) {
	byNode := map[string][]string{}
	for i := range t.Rule.Tables() {
		byNode[t.NodeOf(i)] = append(byNode[t.NodeOf(i)], t.SubTableName(i))
	}
	var top uint64
	for node, subs := range byNode {
		parts := make([]string, len(subs))
		for i, sub := range subs {
			parts[i] = "IFNULL((SELECT MAX(" + backend.QuoteName(col) + ") FROM " + backend.QuoteName(t.DB) + "." + backend.QuoteName(sub) + "), 0)"
		}
		q := "SELECT GREATEST(0, " + strings.Join(parts, ", ") + ")"
		nd := nodes[node]
		if nd == nil {
			return 0, fmt.Errorf("node %s is not configured", node)
		}
		bc, put, err := conn(ctx, nd.Master)
		if err != nil {
			return 0, err
		}
		res, err := bc.Exec(q)
		put()
		if err != nil {
			var me *mysql.MyError
			if errors.As(err, &me) {
				return 0, &mysql.MyError{Code: me.Code, State: me.State, Message: "on node " + node + ": " + me.Message}
			}
			return 0, fmt.Errorf("on node %s: %w", node, err)
		}
		if len(res.Rows) == 1 && len(res.Rows[0]) == 1 && res.Rows[0][0] != nil {
			v, err := strconv.ParseUint(*res.Rows[0][0], 10, 64)
			if err != nil {
				f, _ := strconv.ParseFloat(*res.Rows[0][0], 64) // a DECIMAL or DOUBLE column
				v = uint64(max(f, 0))
			}
			top = max(top, v)
		}
	}
	return top + 1, nil
}

// seqErr names the sequence and its node in err: a server error keeps its
// errno and SQLSTATE, a backend failure its kind.
func seqErr(seq *router.Sequence, node, doing string, err error) error {
	var me *mysql.MyError
	if errors.As(err, &me) {
		return &mysql.MyError{Code: me.Code, State: me.State,
			Message: fmt.Sprintf("keyshard: sequence %s on node %s: %s: %s", seq.Name, node, doing, me.Message)}
	}
	var be *backend.Error
	if errors.As(err, &be) {
		return err
	}
	return engine.Errorf(engine.KindNotSupported, "keyshard: sequence %s on node %s: %s: %v", seq.Name, node, doing, err)
}
