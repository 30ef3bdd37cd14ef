package tpcc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Transaction types.
const (
	NewOrder = iota
	Payment
	OrderStatus
	Delivery
	StockLevel
	nTypes
)

// TypeNames names the types, by index.
var TypeNames = [nTypes]string{"new-order", "payment", "order-status", "delivery", "stock-level"}

// Stats counts what clients did.
type Stats struct {
	Done           [nTypes]int64 // committed transactions per type
	Rollbacks      int64         // new-orders rolled back for an unused item (1%)
	Deadlocks      int64         // retries after 1213
	Lines          int64         // committed new-order lines
	RemoteLines    int64         // of which supplied by another warehouse
	RemoteOrders   int64         // committed new-orders with a remote line
	RemotePayments int64         // committed payments for another warehouse's customer
	Delivered      int64         // orders delivered (a delivery delivers up to one per district)
	Latency        [nTypes][]time.Duration
}

// Add adds o to s.
func (s *Stats) Add(o *Stats) {
	for i := range s.Done {
		s.Done[i] += o.Done[i]
		s.Latency[i] = append(s.Latency[i], o.Latency[i]...)
	}
	s.Rollbacks += o.Rollbacks
	s.Deadlocks += o.Deadlocks
	s.Lines += o.Lines
	s.RemoteLines += o.RemoteLines
	s.RemoteOrders += o.RemoteOrders
	s.RemotePayments += o.RemotePayments
	s.Delivered += o.Delivered
}

// Total is the committed transactions of every type.
func (s *Stats) Total() int64 {
	var n int64
	for _, d := range s.Done {
		n += d
	}
	return n
}

// P95 is the 95th percentile latency of type typ, or of all types if typ
// is -1.
func (s *Stats) P95(typ int) time.Duration {
	var all []time.Duration
	for i := range s.Latency {
		if typ < 0 || typ == i {
			all = append(all, s.Latency[i]...)
		}
	}
	if len(all) == 0 {
		return 0
	}
	slices.Sort(all)
	return all[len(all)*95/100]
}

// Client is one terminal: a connection with autocommit off, a home
// warehouse, its own random numbers (deterministic by seed).
type Client struct {
	conn *sql.Conn
	cfg  Config
	rng  *rand.Rand
	w    int
	S    Stats
}

// NewClient sets autocommit off on conn, as sysbench and DB-API drivers do.
func NewClient(ctx context.Context, conn *sql.Conn, cfg Config, home int, seed uint64) (*Client, error) {
	if _, err := conn.ExecContext(ctx, "SET autocommit=0"); err != nil {
		return nil, err
	}
	return &Client{conn: conn, cfg: cfg, rng: rand.New(rand.NewPCG(seed, 7)), w: home}, nil
}

// errRollback: the new-order met the unused item and rolled back, as
// TPC-C asks for 1% of them.
var errRollback = errors.New("unused item: rolled back")

// Next runs one transaction of TPC-C's mix (45% new-order, 43% payment,
// 4% each of the others), again after a deadlock (1213) until it commits.
func (c *Client) Next(ctx context.Context) error {
	var typ int
	switch x := c.rng.IntN(100); {
	case x < 45:
		typ = NewOrder
	case x < 88:
		typ = Payment
	case x < 92:
		typ = OrderStatus
	case x < 96:
		typ = Delivery
	default:
		typ = StockLevel
	}
	var run func(context.Context) error
	switch typ {
	case NewOrder:
		run = c.newOrder()
	case Payment:
		run = c.payment()
	case OrderStatus:
		run = c.orderStatus()
	case Delivery:
		run = c.delivery()
	default:
		run = c.stockLevel()
	}
	start := time.Now()
	for {
		err := run(ctx)
		if err == nil {
			c.S.Done[typ]++
			c.S.Latency[typ] = append(c.S.Latency[typ], time.Since(start))
			return nil
		}
		_, _ = c.conn.ExecContext(ctx, "ROLLBACK")
		if errors.Is(err, errRollback) {
			c.S.Rollbacks++
			return nil
		}
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1213 && ctx.Err() == nil {
			c.S.Deadlocks++
			continue
		}
		return fmt.Errorf("%s: %w", TypeNames[typ], err)
	}
}

func (c *Client) exec(ctx context.Context, q string, args ...any) error {
	_, err := c.conn.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

// row scans the one row of q into dest; sql.ErrNoRows if there is none.
func (c *Client) row(ctx context.Context, q string, args []any, dest ...any) error {
	err := c.conn.QueryRowContext(ctx, q, args...).Scan(dest...)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", q, err)
	}
	return err
}

func (c *Client) other(w int) int {
	o := 1 + c.rng.IntN(c.cfg.Warehouses-1)
	if o >= w {
		o++
	}
	return o
}

func money(cents int64) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }

// newOrder: TPC-C 2.4, 5-15 lines, each supplied by another warehouse
// with probability 1%, 1% rolled back on an unused item.
func (c *Client) newOrder() func(context.Context) error {
	w, d, cust := c.w, 1+c.rng.IntN(c.cfg.Districts), 1+c.rng.IntN(c.cfg.Customers)
	n := 5 + c.rng.IntN(11)
	type line struct{ item, supply, qty int }
	lines := make([]line, n)
	allLocal, remote := 1, 0
	for i := range lines {
		lines[i] = line{1 + c.rng.IntN(c.cfg.Items), w, 1 + c.rng.IntN(10)}
		if c.cfg.Warehouses > 1 && c.rng.IntN(100) == 0 {
			lines[i].supply = c.other(w)
			allLocal = 0
			remote++
		}
	}
	if c.rng.IntN(100) == 0 {
		lines[n-1].item = c.cfg.Items + 1
	}
	return func(ctx context.Context) error {
		var discount, wTax, dTax float64
		var last, credit string
		if err := c.row(ctx, "SELECT c_discount, c_last, c_credit, w_tax FROM customer, warehouse WHERE w_id = ? AND c_w_id = w_id AND c_d_id = ? AND c_id = ?",
			[]any{w, d, cust}, &discount, &last, &credit, &wTax); err != nil {
			return err
		}
		var oid int
		if err := c.row(ctx, "SELECT d_next_o_id, d_tax FROM district WHERE d_w_id = ? AND d_id = ? FOR UPDATE", []any{w, d}, &oid, &dTax); err != nil {
			return err
		}
		if err := c.exec(ctx, "UPDATE district SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = ? AND d_id = ?", w, d); err != nil {
			return err
		}
		if err := c.exec(ctx, "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_ol_cnt, o_all_local) VALUES (?, ?, ?, ?, NOW(), ?, ?)",
			oid, d, w, cust, n, allLocal); err != nil {
			return err
		}
		if err := c.exec(ctx, "INSERT INTO new_orders (no_o_id, no_d_id, no_w_id) VALUES (?, ?, ?)", oid, d, w); err != nil {
			return err
		}
		for i, l := range lines {
			var price float64
			var name, data string
			err := c.row(ctx, "SELECT i_price, i_name, i_data FROM item WHERE i_id = ?", []any{l.item}, &price, &name, &data)
			if errors.Is(err, sql.ErrNoRows) {
				return errRollback
			} else if err != nil {
				return err
			}
			var qty int
			var dist, sdata string
			if err := c.row(ctx, fmt.Sprintf("SELECT s_quantity, s_data, s_dist_%02d FROM stock WHERE s_i_id = ? AND s_w_id = ? FOR UPDATE", d),
				[]any{l.item, l.supply}, &qty, &sdata, &dist); err != nil {
				return err
			}
			if qty >= l.qty+10 {
				qty -= l.qty
			} else {
				qty += 91 - l.qty
			}
			rem := 0
			if l.supply != w {
				rem = 1
			}
			if err := c.exec(ctx, "UPDATE stock SET s_quantity = ?, s_ytd = s_ytd + ?, s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + ? WHERE s_i_id = ? AND s_w_id = ?",
				qty, l.qty, rem, l.item, l.supply); err != nil {
				return err
			}
			amount := int64(float64(l.qty)*price*100 + 0.5)
			if err := c.exec(ctx, "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_dist_info) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
				oid, d, w, i+1, l.item, l.supply, l.qty, money(amount), dist); err != nil {
				return err
			}
		}
		if err := c.exec(ctx, "COMMIT"); err != nil {
			return err
		}
		c.S.Lines += int64(n)
		c.S.RemoteLines += int64(remote)
		if remote > 0 {
			c.S.RemoteOrders++
		}
		return nil
	}
}

// customer finds a customer of (w, d) by id, or by last name 60% of the
// time (the middle one of those with that name, by first name), and
// returns its id.
func (c *Client) customerArgs() (byName bool, id int, last string) {
	id = 1 + c.rng.IntN(c.cfg.Customers)
	if c.rng.IntN(100) < 60 {
		return true, 0, customerLast(id)
	}
	return false, id, ""
}

func (c *Client) findCustomer(ctx context.Context, w, d int, byName bool, id int, last string) (int, error) {
	if !byName {
		return id, nil
	}
	var n int
	if err := c.row(ctx, "SELECT count(c_id) FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ?", []any{w, d, last}, &n); err != nil {
		return 0, err
	}
	rows, err := c.conn.QueryContext(ctx, "SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first", w, d, last)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var ids []int
	for rows.Next() {
		var x int
		if err := rows.Scan(&x); err != nil {
			return 0, err
		}
		ids = append(ids, x)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(ids) != n || n == 0 {
		return 0, fmt.Errorf("customer %d/%d named %s: count %d, rows %v", w, d, last, n, ids)
	}
	return ids[(n-1)/2], nil
}

// payment: TPC-C 2.5, the customer of another warehouse 15% of the time.
func (c *Client) payment() func(context.Context) error {
	w, d := c.w, 1+c.rng.IntN(c.cfg.Districts)
	cw, cd := w, d
	if c.cfg.Warehouses > 1 && c.rng.IntN(100) < 15 {
		cw, cd = c.other(w), 1+c.rng.IntN(c.cfg.Districts)
	}
	byName, id, last := c.customerArgs()
	amount := money(100 + c.rng.Int64N(500000))
	return func(ctx context.Context) error {
		if err := c.exec(ctx, "UPDATE warehouse SET w_ytd = w_ytd + ? WHERE w_id = ?", amount, w); err != nil {
			return err
		}
		var wname, street, city string
		if err := c.row(ctx, "SELECT w_street_1, w_city, w_name FROM warehouse WHERE w_id = ?", []any{w}, &street, &city, &wname); err != nil {
			return err
		}
		if err := c.exec(ctx, "UPDATE district SET d_ytd = d_ytd + ? WHERE d_w_id = ? AND d_id = ?", amount, w, d); err != nil {
			return err
		}
		var dname string
		if err := c.row(ctx, "SELECT d_street_1, d_city, d_name FROM district WHERE d_w_id = ? AND d_id = ?", []any{w, d}, &street, &city, &dname); err != nil {
			return err
		}
		cid, err := c.findCustomer(ctx, cw, cd, byName, id, last)
		if err != nil {
			return err
		}
		var first, credit, data string
		var balance float64
		if err := c.row(ctx, "SELECT c_first, c_last, c_credit, c_balance, c_data FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ? FOR UPDATE",
			[]any{cw, cd, cid}, &first, &last, &credit, &balance, &data); err != nil {
			return err
		}
		if credit == "BC" {
			data = fmt.Sprintf("%d %d %d %d %d %s | %s", cid, cd, cw, d, w, amount, data)
			if len(data) > 500 {
				data = data[:500]
			}
			err = c.exec(ctx, "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, c_payment_cnt = c_payment_cnt + 1, c_data = ? WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
				amount, amount, data, cw, cd, cid)
		} else {
			err = c.exec(ctx, "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
				amount, amount, cw, cd, cid)
		}
		if err != nil {
			return err
		}
		if err := c.exec(ctx, "INSERT INTO history (h_c_d_id, h_c_w_id, h_c_id, h_d_id, h_w_id, h_date, h_amount, h_data) VALUES (?, ?, ?, ?, ?, NOW(), ?, ?)",
			cd, cw, cid, d, w, amount, wname+"    "+dname); err != nil {
			return err
		}
		if err := c.exec(ctx, "COMMIT"); err != nil {
			return err
		}
		if cw != w {
			c.S.RemotePayments++
		}
		return nil
	}
}

// orderStatus: TPC-C 2.6, read-only.
func (c *Client) orderStatus() func(context.Context) error {
	w, d := c.w, 1+c.rng.IntN(c.cfg.Districts)
	byName, id, last := c.customerArgs()
	return func(ctx context.Context) error {
		cid, err := c.findCustomer(ctx, w, d, byName, id, last)
		if err != nil {
			return err
		}
		var balance float64
		var first string
		if err := c.row(ctx, "SELECT c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
			[]any{w, d, cid}, &balance, &first, &first, &last); err != nil {
			return err
		}
		var oid int
		var carrier sql.NullInt64
		var entry string
		err = c.row(ctx, "SELECT o_id, o_carrier_id, o_entry_d FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? ORDER BY o_id DESC LIMIT 1",
			[]any{w, d, cid}, &oid, &carrier, &entry)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err == nil {
			rows, err := c.conn.QueryContext(ctx, "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?", w, d, oid)
			if err != nil {
				return err
			}
			n := 0
			for rows.Next() {
				n++
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("order %d/%d/%d has no lines", w, d, oid)
			}
		}
		return c.exec(ctx, "COMMIT")
	}
}

// delivery: TPC-C 2.7, the oldest undelivered order of each district of
// the warehouse (run in the foreground here).
func (c *Client) delivery() func(context.Context) error {
	w, carrier := c.w, 1+c.rng.IntN(10)
	return func(ctx context.Context) error {
		delivered := int64(0)
		for d := 1; d <= c.cfg.Districts; d++ {
			var oid int
			err := c.row(ctx, "SELECT no_o_id FROM new_orders WHERE no_d_id = ? AND no_w_id = ? ORDER BY no_o_id ASC LIMIT 1 FOR UPDATE", []any{d, w}, &oid)
			if errors.Is(err, sql.ErrNoRows) {
				continue
			} else if err != nil {
				return err
			}
			if err := c.exec(ctx, "DELETE FROM new_orders WHERE no_o_id = ? AND no_d_id = ? AND no_w_id = ?", oid, d, w); err != nil {
				return err
			}
			var cid int
			// A locking read: the order may be newer than the snapshot
			// the first district's plain read took (REPEATABLE READ).
			if err := c.row(ctx, "SELECT o_c_id FROM orders WHERE o_id = ? AND o_d_id = ? AND o_w_id = ? FOR UPDATE", []any{oid, d, w}, &cid); err != nil {
				return err
			}
			if err := c.exec(ctx, "UPDATE orders SET o_carrier_id = ? WHERE o_id = ? AND o_d_id = ? AND o_w_id = ?", carrier, oid, d, w); err != nil {
				return err
			}
			if err := c.exec(ctx, "UPDATE order_line SET ol_delivery_d = NOW() WHERE ol_o_id = ? AND ol_d_id = ? AND ol_w_id = ?", oid, d, w); err != nil {
				return err
			}
			var total sql.NullString
			if err := c.row(ctx, "SELECT SUM(ol_amount) FROM order_line WHERE ol_o_id = ? AND ol_d_id = ? AND ol_w_id = ?", []any{oid, d, w}, &total); err != nil {
				return err
			}
			if err := c.exec(ctx, "UPDATE customer SET c_balance = c_balance + ?, c_delivery_cnt = c_delivery_cnt + 1 WHERE c_id = ? AND c_d_id = ? AND c_w_id = ?",
				total.String, cid, d, w); err != nil {
				return err
			}
			delivered++
		}
		if err := c.exec(ctx, "COMMIT"); err != nil {
			return err
		}
		c.S.Delivered += delivered
		return nil
	}
}

// stockLevel: TPC-C 2.8, read-only, the join written as tpcc-mysql does.
func (c *Client) stockLevel() func(context.Context) error {
	w, d, threshold := c.w, 1+c.rng.IntN(c.cfg.Districts), 10+c.rng.IntN(11)
	return func(ctx context.Context) error {
		var next, low int
		if err := c.row(ctx, "SELECT d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?", []any{w, d}, &next); err != nil {
			return err
		}
		if err := c.row(ctx, "SELECT COUNT(DISTINCT(s_i_id)) FROM order_line, stock WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id < ? AND ol_o_id >= ? AND s_w_id = ? AND s_i_id = ol_i_id AND s_quantity < ?",
			[]any{w, d, next, next - 20, w, threshold}, &low); err != nil {
			return err
		}
		return c.exec(ctx, "COMMIT")
	}
}

// Run runs clients, client i on dbs[i % len(dbs)], homed on warehouse
// i % Warehouses + 1 and seeded with seed+i, each for n transactions (n > 0) or until ctx
// ends (n == 0, a timed run). It returns the summed stats and the first
// error (which stops that client only).
func Run(ctx context.Context, dbs []*sql.DB, cfg Config, clients, n int, seed uint64) (Stats, error) {
	var mu sync.Mutex
	var total Stats
	var first error
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			cl, err := func() (*Client, error) {
				conn, err := dbs[i%len(dbs)].Conn(ctx)
				if err != nil {
					return nil, err
				}
				return NewClient(ctx, conn, cfg, i%cfg.Warehouses+1, seed+uint64(i))
			}()
			if err == nil {
				defer func() {
					// A timed run's end may cut a transaction between
					// statements: roll it back before the connection goes
					// back to db's pool, or the next user would read
					// inside it.
					bg := context.Background()
					_, _ = cl.conn.ExecContext(bg, "ROLLBACK")
					_, _ = cl.conn.ExecContext(bg, "SET autocommit=1")
					cl.conn.Close()
				}()
				for k := 0; (n == 0 || k < n) && ctx.Err() == nil; k++ {
					if err = cl.Next(ctx); err != nil {
						if n == 0 && ctx.Err() != nil {
							err = nil // a timed run's end
						}
						break
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if cl != nil {
				total.Add(&cl.S)
			}
			if err != nil && first == nil {
				first = fmt.Errorf("client %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return total, first
}
