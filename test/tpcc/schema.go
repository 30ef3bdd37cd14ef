// Package tpcc is a small TPC-C-like workload written as applications
// write SQL (unqualified columns, comma joins, autocommit off with an
// explicit COMMIT, SELECT ... FOR UPDATE where TPC-C uses it, retry after a
// deadlock), with a loader and the standard consistency conditions. The
// end-to-end test (test/e2e/tpcc_test.go) and the bench (bench/tpcc) run
// it, through keyshard and on one server directly.
package tpcc

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
)

// Config is the scale.
type Config struct {
	Warehouses int
	Districts  int // per warehouse
	Customers  int // per district; also the orders loaded per district
	Items      int
}

// Sharded lists the tables keyed by their warehouse column, with that
// column; item is the one table left (global, or plain on one server).
var Sharded = []struct{ Table, Key string }{
	{"warehouse", "w_id"}, {"district", "d_w_id"}, {"customer", "c_w_id"}, {"history", "h_w_id"},
	{"orders", "o_w_id"}, {"new_orders", "no_w_id"}, {"order_line", "ol_w_id"}, {"stock", "s_w_id"},
}

// Schema is the DDL, in order.
var Schema = []string{
	`CREATE TABLE warehouse (w_id INT NOT NULL, w_name VARCHAR(10), w_street_1 VARCHAR(20), w_city VARCHAR(20),
		w_state CHAR(2), w_zip CHAR(9), w_tax DECIMAL(4,4), w_ytd DECIMAL(12,2), PRIMARY KEY (w_id))`,
	`CREATE TABLE district (d_id TINYINT NOT NULL, d_w_id INT NOT NULL, d_name VARCHAR(10), d_street_1 VARCHAR(20),
		d_city VARCHAR(20), d_state CHAR(2), d_zip CHAR(9), d_tax DECIMAL(4,4), d_ytd DECIMAL(12,2), d_next_o_id INT,
		PRIMARY KEY (d_w_id, d_id))`,
	`CREATE TABLE customer (c_id INT NOT NULL, c_d_id TINYINT NOT NULL, c_w_id INT NOT NULL, c_first VARCHAR(16),
		c_middle CHAR(2), c_last VARCHAR(16), c_phone CHAR(16), c_since DATETIME, c_credit CHAR(2),
		c_credit_lim DECIMAL(12,2), c_discount DECIMAL(4,4), c_balance DECIMAL(12,2), c_ytd_payment DECIMAL(12,2),
		c_payment_cnt INT, c_delivery_cnt INT, c_data VARCHAR(500), PRIMARY KEY (c_w_id, c_d_id, c_id),
		KEY idx_customer (c_w_id, c_d_id, c_last, c_first))`,
	`CREATE TABLE history (h_c_id INT, h_c_d_id TINYINT, h_c_w_id INT, h_d_id TINYINT, h_w_id INT NOT NULL,
		h_date DATETIME, h_amount DECIMAL(6,2), h_data VARCHAR(24), KEY idx_history (h_w_id, h_d_id))`,
	`CREATE TABLE orders (o_id INT NOT NULL, o_d_id TINYINT NOT NULL, o_w_id INT NOT NULL, o_c_id INT,
		o_entry_d DATETIME, o_carrier_id TINYINT, o_ol_cnt TINYINT, o_all_local TINYINT,
		PRIMARY KEY (o_w_id, o_d_id, o_id), KEY idx_orders (o_w_id, o_d_id, o_c_id, o_id))`,
	`CREATE TABLE new_orders (no_o_id INT NOT NULL, no_d_id TINYINT NOT NULL, no_w_id INT NOT NULL,
		PRIMARY KEY (no_w_id, no_d_id, no_o_id))`,
	`CREATE TABLE order_line (ol_o_id INT NOT NULL, ol_d_id TINYINT NOT NULL, ol_w_id INT NOT NULL,
		ol_number TINYINT NOT NULL, ol_i_id INT, ol_supply_w_id INT, ol_delivery_d DATETIME, ol_quantity TINYINT,
		ol_amount DECIMAL(6,2), ol_dist_info CHAR(24), PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number))`,
	`CREATE TABLE stock (s_i_id INT NOT NULL, s_w_id INT NOT NULL, s_quantity SMALLINT, s_dist_01 CHAR(24),
		s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24), s_dist_05 CHAR(24), s_dist_06 CHAR(24),
		s_dist_07 CHAR(24), s_dist_08 CHAR(24), s_dist_09 CHAR(24), s_dist_10 CHAR(24), s_ytd DECIMAL(8,0),
		s_order_cnt SMALLINT, s_remote_cnt SMALLINT, s_data VARCHAR(50), PRIMARY KEY (s_w_id, s_i_id))`,
	`CREATE TABLE item (i_id INT NOT NULL, i_im_id INT, i_name VARCHAR(24), i_price DECIMAL(5,2), i_data VARCHAR(50),
		PRIMARY KEY (i_id))`,
}

// Execer runs a statement: a *sql.Conn or *sql.DB.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Create drops and creates the tables on c, as a client with autocommit
// off runs DDL (each statement commits implicitly).
func Create(ctx context.Context, c Execer) error {
	for _, t := range []string{"warehouse", "district", "customer", "history", "orders", "new_orders", "order_line", "stock", "item"} {
		if _, err := c.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			return err
		}
	}
	for _, q := range Schema {
		if _, err := c.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

var syllables = []string{"BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"}

// lastName is TPC-C's name for n (0-999).
func lastName(n int) string {
	return syllables[n/100] + syllables[n/10%10] + syllables[n%10]
}

// customerLast is the last name of customer c: names repeat every 7
// customers, so a lookup by name finds several.
func customerLast(c int) string { return lastName((c - 1) % 7 * 37) }

// Load fills the tables through c with multi-row INSERTs as a loader
// writes them (some with a column list, some without, some over several
// warehouses), committing after each (c has autocommit off). Each district
// gets Customers orders, the last 30% undelivered (in new_orders); one
// history row per customer.
func Load(ctx context.Context, c Execer, cfg Config) error {
	rng := rand.New(rand.NewPCG(1, 2))
	var stmts []string
	add := func(head string, rows []string) {
		for len(rows) > 0 {
			n := min(len(rows), 100)
			stmts = append(stmts, head+strings.Join(rows[:n], ", "))
			rows = rows[n:]
		}
	}
	var rows []string
	for i := 1; i <= cfg.Items; i++ {
		rows = append(rows, fmt.Sprintf("(%d, %d, 'item-%d', %d.%02d, 'data-%d')", i, i, i, 1+rng.IntN(100), rng.IntN(100), i))
	}
	add("INSERT INTO item VALUES ", rows)
	// Every warehouse in one statement: rows for both nodes.
	rows = nil
	for w := 1; w <= cfg.Warehouses; w++ {
		rows = append(rows, fmt.Sprintf("(%d, 'w-%d', 'street', 'city', 'ST', '123451111', 0.%04d, %d.00)",
			w, w, rng.IntN(2000), 10*cfg.Customers*cfg.Districts))
	}
	add("INSERT INTO warehouse (w_id, w_name, w_street_1, w_city, w_state, w_zip, w_tax, w_ytd) VALUES ", rows)
	rows = nil
	for w := 1; w <= cfg.Warehouses; w++ {
		for d := 1; d <= cfg.Districts; d++ {
			rows = append(rows, fmt.Sprintf("(%d, %d, 'd-%d-%d', 'street', 'city', 'ST', '123451111', 0.%04d, %d.00, %d)",
				d, w, w, d, rng.IntN(2000), 10*cfg.Customers, cfg.Customers+1))
		}
	}
	add("INSERT INTO district VALUES ", rows)
	undelivered := cfg.Customers - cfg.Customers*7/10
	for w := 1; w <= cfg.Warehouses; w++ {
		var stock []string
		for i := 1; i <= cfg.Items; i++ {
			dist := make([]string, 10)
			for k := range dist {
				dist[k] = fmt.Sprintf("'s-%d-%d-%d'", w, i, k+1)
			}
			stock = append(stock, fmt.Sprintf("(%d, %d, %d, %s, 0, 0, 0, 'sdata-%d')", i, w, 10+rng.IntN(91), strings.Join(dist, ", "), i))
		}
		add("INSERT INTO stock VALUES ", stock)
		for d := 1; d <= cfg.Districts; d++ {
			var cust, hist, ord, no, ol []string
			for c := 1; c <= cfg.Customers; c++ {
				credit := "GC"
				if rng.IntN(10) == 0 {
					credit = "BC"
				}
				cust = append(cust, fmt.Sprintf("(%d, %d, %d, 'first-%d', 'OE', '%s', '0123456789', NOW(), '%s', 50000.00, 0.%04d, -10.00, 10.00, 1, 0, 'cdata')",
					c, d, w, c, customerLast(c), credit, rng.IntN(5001)))
				hist = append(hist, fmt.Sprintf("(%d, %d, %d, %d, %d, NOW(), 10.00, 'hdata')", c, d, w, d, w))
			}
			// Orders: customers in a random order, one each.
			perm := rng.Perm(cfg.Customers)
			for o := 1; o <= cfg.Customers; o++ {
				delivered := o <= cfg.Customers-undelivered
				carrier, when := "NULL", "NULL"
				if delivered {
					carrier, when = fmt.Sprint(1+rng.IntN(10)), "NOW()"
				} else {
					no = append(no, fmt.Sprintf("(%d, %d, %d)", o, d, w))
				}
				n := 5 + rng.IntN(11)
				ord = append(ord, fmt.Sprintf("(%d, %d, %d, %d, NOW(), %s, %d, 1)", o, d, w, perm[o-1]+1, carrier, n))
				for l := 1; l <= n; l++ {
					amount := "0.00"
					if !delivered {
						amount = fmt.Sprintf("%d.%02d", rng.IntN(10000), rng.IntN(100))
					}
					ol = append(ol, fmt.Sprintf("(%d, %d, %d, %d, %d, %d, %s, 5, %s, 'dist-info')", o, d, w, l, 1+rng.IntN(cfg.Items), w, when, amount))
				}
			}
			add("INSERT INTO customer VALUES ", cust)
			add("INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data) VALUES ", hist)
			add("INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id, o_ol_cnt, o_all_local) VALUES ", ord)
			add("INSERT INTO new_orders VALUES ", no)
			add("INSERT INTO order_line VALUES ", ol)
		}
	}
	for i, q := range stmts {
		if _, err := c.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("loading, statement %d (%.80s...): %w", i, q, err)
		}
		if _, err := c.ExecContext(ctx, "COMMIT"); err != nil {
			return fmt.Errorf("loading, COMMIT after statement %d: %w", i, err)
		}
	}
	return nil
}
