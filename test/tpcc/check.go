package tpcc

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Querier runs a query on a database/sql handle and returns its rows as
// text (NULL as "NULL").
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// ScanRows reads the rows of rows' current result set as text ("NULL"
// for NULL).
func ScanRows(rows *sql.Rows) ([][]string, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		r := make([]string, len(cols))
		for i, v := range vals {
			r[i] = "NULL"
			if v.Valid {
				r[i] = v.String
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// Rows returns the rows of q on db as text.
func Rows(ctx context.Context, db Querier, q string) ([][]string, error) {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q, err)
	}
	defer rows.Close()
	out, err := ScanRows(rows)
	if err != nil {
		return nil, err
	}
	return out, rows.Err()
}

// factQueries: per table, a query grouped by warehouse (and district)
// whose rows the conditions read; {t} is the table's name. Each
// warehouse's rows are in one sub-table, so the union of a query run on
// every sub-table is the query's answer on the logical table.
var factQueries = []struct{ table, q string }{
	{"warehouse", "SELECT w_id, 0, w_ytd FROM {t}"},
	{"district", "SELECT d_w_id, d_id, d_ytd, d_next_o_id FROM {t}"},
	{"orders", "SELECT o_w_id, o_d_id, MAX(o_id), SUM(o_ol_cnt), SUM(o_carrier_id IS NULL), SUM(IF(o_carrier_id IS NULL, o_ol_cnt, 0)), COUNT(*) FROM {t} GROUP BY o_w_id, o_d_id"},
	{"new_orders", "SELECT no_w_id, no_d_id, MAX(no_o_id), MIN(no_o_id), COUNT(*) FROM {t} GROUP BY no_w_id, no_d_id"},
	{"order_line", "SELECT ol_w_id, ol_d_id, COUNT(*), SUM(ol_delivery_d IS NULL), SUM(IF(ol_delivery_d IS NULL, 0, ol_amount)), " +
		"SUM(IF(ol_o_id > {init}, ol_quantity, 0)), SUM(ol_o_id > {init}), SUM(ol_o_id > {init} AND ol_supply_w_id <> ol_w_id) FROM {t} GROUP BY ol_w_id, ol_d_id"},
	{"history", "SELECT h_w_id, h_d_id, SUM(h_amount), COUNT(*) FROM {t} GROUP BY h_w_id, h_d_id"},
	{"customer", "SELECT c_w_id, c_d_id, SUM(c_ytd_payment), SUM(c_payment_cnt), SUM(c_balance), SUM(c_delivery_cnt) FROM {t} GROUP BY c_w_id, c_d_id"},
	{"stock", "SELECT s_w_id, 0, SUM(s_ytd), SUM(s_order_cnt), SUM(s_remote_cnt) FROM {t} GROUP BY s_w_id"},
}

// Facts are the fact queries' answers: table -> "w/d" -> values.
type Facts map[string]map[string][]float64

// Gather runs the fact queries with run, which gets the table and the
// query with {t} still in it (run on the logical table, or on each
// sub-table and concatenate). A warehouse/district found twice is an error.
func Gather(cfg Config, run func(table, q string) ([][]string, error)) (Facts, error) {
	f := Facts{}
	for _, fq := range factQueries {
		rows, err := run(fq.table, strings.ReplaceAll(fq.q, "{init}", strconv.Itoa(cfg.Customers)))
		if err != nil {
			return nil, err
		}
		m := map[string][]float64{}
		for _, r := range rows {
			k := r[0] + "/" + r[1]
			if fq.table == "warehouse" || fq.table == "stock" {
				k = r[0]
			}
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("%s: %s twice (in two sub-tables?)", fq.table, k)
			}
			vals := make([]float64, len(r)-2)
			for i, s := range r[2:] {
				if s == "NULL" {
					s = "0"
				}
				v, err := strconv.ParseFloat(s, 64)
				if err != nil {
					return nil, fmt.Errorf("%s %s: %q: %v", fq.table, k, s, err)
				}
				vals[i] = v
			}
			m[k] = vals
		}
		f[fq.table] = m
	}
	return f, nil
}

// Equal says where f and g differ ("" if nowhere).
func (f Facts) Equal(g Facts) string {
	var diffs []string
	for _, t := range slices.Sorted(maps.Keys(f)) {
		for _, k := range slices.Sorted(maps.Keys(f[t])) {
			if !slices.Equal(f[t][k], g[t][k]) {
				diffs = append(diffs, fmt.Sprintf("%s %s: %v vs %v", t, k, f[t][k], g[t][k]))
			}
		}
		for k := range g[t] {
			if _, ok := f[t][k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s %s: missing vs %v", t, k, g[t][k]))
			}
		}
	}
	return strings.Join(diffs, "; ")
}

func near(a, b float64) bool { return math.Abs(a-b) < 0.005 }

// Check returns the TPC-C consistency conditions that fail (3.3.2.1-5,
// 7-9), totals that must agree (customers' payments and history, stock
// and order lines, balances) and, given the stats of the clients that
// ran, that every committed transaction is there.
func (f Facts) Check(cfg Config, s *Stats) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	var newOrders, deliveredOrders, payments float64
	for w := 1; w <= cfg.Warehouses; w++ {
		wk := strconv.Itoa(w)
		wytd, ok := f["warehouse"][wk]
		if !ok {
			fail("warehouse %d missing", w)
			continue
		}
		var dytd, hw float64
		for d := 1; d <= cfg.Districts; d++ {
			k := fmt.Sprintf("%d/%d", w, d)
			dist, o, no, ol, h := f["district"][k], f["orders"][k], f["new_orders"][k], f["order_line"][k], f["history"][k]
			if dist == nil || o == nil || ol == nil || h == nil {
				fail("district %s: rows missing", k)
				continue
			}
			if no == nil {
				no = []float64{0, 0, 0}
			}
			dytd += dist[0]
			hw += h[0]
			if next := dist[1]; next-1 != o[0] || (no[2] > 0 && next-1 != no[0]) {
				fail("3.3.2.2 district %s: d_next_o_id-1 = %v, max(o_id) = %v, max(no_o_id) = %v", k, next-1, o[0], no[0])
			}
			if no[2] > 0 && no[0]-no[1]+1 != no[2] {
				fail("3.3.2.3 district %s: max(no_o_id)-min(no_o_id)+1 = %v, count = %v", k, no[0]-no[1]+1, no[2])
			}
			if o[1] != ol[0] {
				fail("3.3.2.4 district %s: sum(o_ol_cnt) = %v, count(order_line) = %v", k, o[1], ol[0])
			}
			if o[2] != no[2] {
				fail("3.3.2.5 district %s: orders without carrier %v, new_orders %v", k, o[2], no[2])
			}
			if o[3] != ol[1] {
				fail("3.3.2.7 district %s: lines of undelivered orders %v, lines without delivery date %v", k, o[3], ol[1])
			}
			if !near(dist[0], h[0]) {
				fail("3.3.2.9 district %s: d_ytd %v, sum(h_amount) %v", k, dist[0], h[0])
			}
			newOrders += dist[1] - 1 - float64(cfg.Customers)
			deliveredOrders += o[4] - o[2]
			payments += h[1] - float64(cfg.Customers)
		}
		if !near(wytd[0], dytd) {
			fail("3.3.2.1 warehouse %d: w_ytd %v, sum(d_ytd) %v", w, wytd[0], dytd)
		}
		if !near(wytd[0], hw) {
			fail("3.3.2.8 warehouse %d: w_ytd %v, sum(h_amount) %v", w, wytd[0], hw)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(f)) {
		for k := range f[t] {
			w, _, _ := strings.Cut(k, "/")
			if n, err := strconv.Atoi(w); err != nil || n < 1 || n > cfg.Warehouses {
				fail("%s: rows of warehouse %s, which does not exist", t, w)
			}
		}
	}
	sum := func(t string, i int) float64 {
		var v float64
		for _, r := range f[t] {
			v += r[i]
		}
		return v
	}
	if a, b := sum("customer", 0), sum("history", 0); !near(a, b) {
		fail("sum(c_ytd_payment) %v, sum(h_amount) %v", a, b)
	}
	if a, b := sum("customer", 1), sum("history", 1); a != b {
		fail("sum(c_payment_cnt) %v, count(history) %v", a, b)
	}
	if a, b := sum("customer", 2), sum("order_line", 2)-sum("history", 0); !near(a, b) {
		fail("3.3.2.10 (all customers) sum(c_balance) %v, delivered sum(ol_amount) - sum(h_amount) %v", a, b)
	}
	if a, b := sum("stock", 0), sum("order_line", 3); a != b {
		fail("sum(s_ytd) %v, sum(ol_quantity) of new orders %v", a, b)
	}
	if a, b := sum("stock", 1), sum("order_line", 4); a != b {
		fail("sum(s_order_cnt) %v, new order lines %v", a, b)
	}
	if a, b := sum("stock", 2), sum("order_line", 5); a != b {
		fail("sum(s_remote_cnt) %v, new remote order lines %v", a, b)
	}
	if s != nil {
		if newOrders != float64(s.Done[NewOrder]) {
			fail("new orders in the database %v, committed %d", newOrders, s.Done[NewOrder])
		}
		if a := sum("order_line", 4); a != float64(s.Lines) {
			fail("new order lines in the database %v, committed %d", a, s.Lines)
		}
		if a := sum("order_line", 5); a != float64(s.RemoteLines) {
			fail("new remote order lines in the database %v, committed %d", a, s.RemoteLines)
		}
		if payments != float64(s.Done[Payment]) {
			fail("payments in the database %v, committed %d", payments, s.Done[Payment])
		}
		if want := float64(cfg.Warehouses*cfg.Districts*(cfg.Customers*7/10)) + float64(s.Delivered); deliveredOrders != want {
			fail("delivered orders in the database %v, want %v", deliveredOrders, want)
		}
	}
	return bad
}
