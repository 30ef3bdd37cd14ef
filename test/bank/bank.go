// Package bank is the transfer the XA tests and benches run: money moved
// between two accounts of a table `accounts (id, balance, ops)` in one
// transaction of two statements, so that the total balance is the
// invariant to check after faults.
package bank

import (
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
)

// Transfer moves x from account a to b in one transaction of two
// statements (each counts an operation on its account).
func Transfer(db *sql.DB, a, b, x int) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	for _, q := range []string{
		fmt.Sprintf("UPDATE accounts SET balance = balance - %d, ops = ops + 1 WHERE id = %d", x, a),
		fmt.Sprintf("UPDATE accounts SET balance = balance + %d, ops = ops + 1 WHERE id = %d", x, b),
	} {
		if _, err := tx.Exec(q); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

// IsConnErr reports whether err says the connection to keyshard is gone
// (killed, restarting) rather than a statement's error.
func IsConnErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, sql.ErrConnDone) || strings.Contains(err.Error(), "invalid connection") ||
		strings.Contains(err.Error(), "bad connection") || strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "connection refused")
}
