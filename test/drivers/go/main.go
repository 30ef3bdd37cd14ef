// Command go is the driver matrix's go-sql-driver/mysql side: it runs the
// cases against HOST:PORT as ks/ks with clientFoundRows, multiStatements and
// interpolateParams on, and prints one JSON line per case:
// {"case": name, "result": ...}; errors are {"errno", "sqlstate", "msg"}.
// test/drivers/run.sh builds it and runs it straight against MariaDB and
// through keyshard. Usage: go HOST PORT.
package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"

	"github.com/go-sql-driver/mysql"
)

var addr string

type obj = map[string]any

func open(db, params string) *sql.DB {
	d, err := sql.Open("mysql", fmt.Sprintf("ks:ks@tcp(%s)/%s?timeout=10s&readTimeout=20s&writeTimeout=20s&parseTime=true&%s", addr, db, params))
	if err != nil {
		panic(err)
	}
	return d
}

const opts = "clientFoundRows=true&multiStatements=true&interpolateParams=true"

func errResult(err error) obj {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return obj{"errno": me.Number, "sqlstate": string(me.SQLState[:]), "msg": me.Message}
	}
	return obj{"error": err.Error()}
}

func value(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case []byte:
		return fmt.Sprintf("[]byte:%q", x)
	default:
		return fmt.Sprintf("%T:%v", v, v)
	}
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// rows reads the current result set of r (column types with meta).
func rows(r *sql.Rows, meta bool) (obj, error) {
	out := obj{}
	cols, err := r.ColumnTypes()
	if err != nil {
		return nil, err
	}
	if meta {
		var cm [][]any
		for _, c := range cols {
			nullable, _ := c.Nullable()
			p, s, _ := c.DecimalSize()
			cm = append(cm, []any{c.Name(), c.DatabaseTypeName(), c.ScanType().String(), nullable, p, s})
		}
		out["columns"] = cm
	}
	data := [][]any{}
	for r.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := r.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]any, len(vals))
		for i, v := range vals {
			row[i] = value(v)
		}
		data = append(data, row)
	}
	out["rows"] = data
	return out, r.Err()
}

func query(q querier, meta bool, sqlText string, args ...any) any {
	r, err := q.QueryContext(context.Background(), sqlText, args...)
	if err != nil {
		return errResult(err)
	}
	defer r.Close()
	res, err := rows(r, meta)
	if err != nil {
		return errResult(err)
	}
	return res
}

// all reads every result set of a multi-result answer; an error ends it.
func all(q querier, sqlText string) []any {
	r, err := q.QueryContext(context.Background(), sqlText)
	if err != nil {
		return []any{errResult(err)}
	}
	defer r.Close()
	var out []any
	for {
		res, err := rows(r, false)
		if err != nil {
			return append(out, errResult(err))
		}
		out = append(out, res)
		if !r.NextResultSet() {
			if err := r.Err(); err != nil {
				out = append(out, errResult(err))
			}
			return out
		}
	}
}

func scalar(q querier, sqlText string) any {
	var v any
	r, err := q.QueryContext(context.Background(), sqlText)
	if err != nil {
		return errResult(err)
	}
	defer r.Close()
	if !r.Next() {
		return "(no row)"
	}
	if err := r.Scan(&v); err != nil {
		return errResult(err)
	}
	return value(v)
}

type execer interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

func exec(e execer, sqlText string, args ...any) any {
	res, err := e.ExecContext(context.Background(), sqlText, args...)
	if err != nil {
		return errResult(err)
	}
	n, _ := res.RowsAffected()
	id, _ := res.LastInsertId()
	return obj{"affected": n, "insert_id": id}
}

// execAll runs a multi-statement batch on the driver connection and returns
// the affected rows of each statement (mysql.Result).
func execAll(c *sql.Conn, sqlText string) any {
	var out any
	err := c.Raw(func(dc any) error {
		res, err := dc.(driver.ExecerContext).ExecContext(context.Background(), sqlText, nil)
		if err != nil {
			return err
		}
		out = obj{"affected": res.(mysql.Result).AllRowsAffected(), "insert_ids": res.(mysql.Result).AllLastInsertIds()}
		return nil
	})
	if err != nil {
		return errResult(err)
	}
	return out
}

func withConn(db *sql.DB, f func(c *sql.Conn) any) any {
	defer db.Close()
	c, err := db.Conn(context.Background())
	if err != nil {
		return errResult(err)
	}
	defer c.Close()
	return f(c)
}

var cases = []struct {
	name string
	run  func() any
}{
	{"server_version", func() any {
		return withConn(open("ks_compat", opts), func(c *sql.Conn) any {
			return obj{"select_version": scalar(c, "SELECT VERSION()")}
		})
	}},
	{"connect_db", func() any {
		return withConn(open("ks_compat", opts), func(c *sql.Conn) any {
			return obj{"ping": errOrOK(c.PingContext(context.Background())), "database": scalar(c, "SELECT DATABASE()"),
				"autocommit": scalar(c, "SELECT @@autocommit")}
		})
	}},
	{"connect_nodb", func() any {
		return withConn(open("", opts), func(c *sql.Conn) any { return obj{"database": scalar(c, "SELECT DATABASE()")} })
	}},
	{"select_types", func() any {
		return withConn(open("ks_compat", opts), func(c *sql.Conn) any {
			return query(c, true, "SELECT * FROM t_types ORDER BY id")
		})
	}},
	{"insert_update", func() any {
		r := obj{}
		withConn(open("ks_compat", opts), func(c *sql.Conn) any {
			r["insert"] = exec(c, "INSERT INTO t_rows (v) VALUES ('a'), ('b')")
			r["update_same_found"] = exec(c, "UPDATE t_rows SET v = 'a' WHERE id = 1")
			r["update_changed"] = exec(c, "UPDATE t_rows SET v = ? WHERE id = ?", "z", 2)
			r["delete_none"] = exec(c, "DELETE FROM t_rows WHERE id > 100")
			return nil
		})
		withConn(open("ks_compat", "clientFoundRows=false"), func(c *sql.Conn) any {
			r["update_same_affected"] = exec(c, "UPDATE t_rows SET v = 'a' WHERE id = 1")
			return nil
		})
		return r
	}},
	{"prepared", func() any {
		return withConn(open("ks_compat", opts), func(c *sql.Conn) any {
			const q = "SELECT ? + 1 AS a, CONCAT(?, 'x') AS b, ? IS NULL AS c, d, dt, j FROM t_types WHERE id = ?"
			r := obj{"interpolated": query(c, true, q, 41, "ab", nil, 1)}
			st, err := c.PrepareContext(context.Background(), q) // server-side, despite interpolateParams
			if err != nil {
				r["prepare"] = errResult(err)
				return r
			}
			defer st.Close()
			r["first"] = query(stmtQuerier{st}, true, "", 41, "ab", nil, 1)
			r["second"] = query(stmtQuerier{st}, false, "", -1, "é", 3, 2)
			ins, err := c.PrepareContext(context.Background(), "INSERT INTO t_prep (v) VALUES (?)")
			if err != nil {
				r["insert"] = errResult(err)
				return r
			}
			defer ins.Close()
			res, err := ins.Exec("p1")
			if err != nil {
				r["insert"] = errResult(err)
			} else {
				n, _ := res.RowsAffected()
				id, _ := res.LastInsertId()
				r["insert"] = obj{"affected": n, "insert_id": id}
			}
			return r
		})
	}},
	{"txn", func() any {
		db := open("ks_compat", opts)
		other := open("ks_compat", opts)
		defer other.Close()
		return withConn(db, func(c *sql.Conn) any {
			r := obj{"set": exec(c, "SET autocommit = 0")}
			exec(c, "INSERT INTO t_txn (v) VALUES ('t1')")
			r["in_trans"] = scalar(c, "SELECT @@in_transaction")
			r["seen_by_other"] = scalar(other, "SELECT COUNT(*) FROM t_txn")
			r["rollback"] = exec(c, "ROLLBACK")
			exec(c, "INSERT INTO t_txn (v) VALUES ('t2')")
			r["commit"] = exec(c, "COMMIT")
			r["committed"] = scalar(other, "SELECT GROUP_CONCAT(v ORDER BY id) FROM t_txn")
			exec(c, "SET autocommit = 1")
			// database/sql's own transaction: BEGIN ... ROLLBACK
			tx, err := c.BeginTx(context.Background(), nil)
			if err != nil {
				r["begin"] = errResult(err)
				return r
			}
			exec(tx, "INSERT INTO t_txn (v) VALUES ('t3')")
			r["tx_in_trans"] = scalar(tx, "SELECT @@in_transaction")
			r["tx_rollback"] = errOrOK(tx.Rollback())
			r["after"] = scalar(other, "SELECT GROUP_CONCAT(v ORDER BY id) FROM t_txn")
			return r
		})
	}},
	{"call_proc", func() any {
		return withConn(open("ks_compat", opts), func(c *sql.Conn) any {
			return obj{"call": all(c, "CALL p_compat(20, @b)"), "out": scalar(c, "SELECT @b")}
		})
	}},
	{"multi_stmt", func() any {
		return withConn(open("ks_compat", opts), func(c *sql.Conn) any {
			return obj{
				"query": all(c, "SELECT 1 AS a; INSERT INTO t_multi (v) VALUES ('m1'), ('m2'); SELECT COUNT(*) AS c FROM t_multi WHERE v LIKE 'm%'"),
				"exec":  execAll(c, "INSERT INTO t_multi (v) VALUES ('m3'); UPDATE t_multi SET v = 'm' WHERE v LIKE 'm%'; DELETE FROM t_multi WHERE id < 0"),
			}
		})
	}},
	{"multi_stmt_error", func() any {
		return withConn(open("ks_compat", opts), func(c *sql.Conn) any {
			return obj{"batch": all(c, "SELECT 1 AS a; SELECT * FROM no_such_table; SELECT 3"), "after": scalar(c, "SELECT 4")}
		})
	}},
	{"errors", func() any {
		return withConn(open("ks_compat", opts), func(c *sql.Conn) any {
			r := obj{
				"unknown_table": query(c, false, "SELECT * FROM no_such_table"),
				"syntax":        query(c, false, "SELEC 1"),
				"duplicate":     exec(c, "INSERT INTO t_types (id) VALUES (?)", 1),
			}
			if _, err := c.PrepareContext(context.Background(), "SELECT * FROM no_such_table WHERE id = ?"); err != nil {
				r["prepare_unknown"] = errResult(err)
			}
			r["after"] = scalar(c, "SELECT 1")
			return r
		})
	}},
	{"warnings", func() any {
		return withConn(open("ks_compat", opts), func(c *sql.Conn) any {
			return obj{
				"value":           scalar(c, "SELECT CAST('12abc' AS SIGNED) AS v"),
				"select_warnings": query(c, false, "SHOW WARNINGS"),
				"insert_ignore":   exec(c, "INSERT IGNORE INTO t_types (id) VALUES (1)"),
				"insert_warnings": query(c, false, "SHOW WARNINGS"),
			}
		})
	}},
	{"gorm", gormCase},
	{"pool", func() any {
		db := open("ks_compat", opts)
		defer db.Close()
		db.SetMaxOpenConns(3)
		out := make([]string, 6)
		var wg sync.WaitGroup
		for i := range out {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, _ := json.Marshal(query(db, false, fmt.Sprintf("SELECT DATABASE(), @@autocommit, COUNT(*) + %d FROM t_types", i)))
				out[i] = string(b)
			}()
		}
		wg.Wait()
		sort.Strings(out)
		return out
	}},
}

type stmtQuerier struct{ st *sql.Stmt }

func (s stmtQuerier) QueryContext(ctx context.Context, _ string, args ...any) (*sql.Rows, error) {
	return s.st.QueryContext(ctx, args...)
}

func errOrOK(err error) any {
	if err != nil {
		return errResult(err)
	}
	return "ok"
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go HOST PORT")
		os.Exit(2)
	}
	addr = os.Args[1] + ":" + os.Args[2]
	enc := json.NewEncoder(os.Stdout)
	enc.SetEscapeHTML(false)
	for _, c := range cases {
		var res any
		func() {
			defer func() {
				if p := recover(); p != nil {
					res = obj{"panic": fmt.Sprint(p)}
				}
			}()
			res = c.run()
		}()
		_ = enc.Encode(obj{"case": c.name, "result": res})
	}
}
