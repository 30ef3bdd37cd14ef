package binlog

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/keyshard/keyshard/backend"
)

// Execer runs a statement on a node and reads its whole answer
// (*backend.Conn).
type Execer interface {
	Exec(query string) (*backend.Result, error)
}

// Requirements says what node (named in the error) lacks for its binlog
// to be followed: a binlog (log_bin), row events (binlog_format=ROW),
// whole rows in them (binlog_row_image=FULL), column names in them
// (binlog_row_metadata=FULL), and the right to read it. nil when nothing
// is missing.
func Requirements(node string, c Execer) error {
	res, err := c.Exec("SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata")
	if err != nil {
		if strings.Contains(err.Error(), "binlog_row_metadata") {
			return fmt.Errorf("node %s: the server has no binlog_row_metadata (MariaDB 10.5 or MySQL 8.0.1 and later have it): %v", node, err)
		}
		return fmt.Errorf("node %s: reading its binlog settings: %v", node, err)
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 4 {
		return fmt.Errorf("node %s: reading its binlog settings: unexpected answer", node)
	}
	row := res.Rows[0]
	val := func(i int) string {
		if row[i] == nil {
			return "NULL"
		}
		return *row[i]
	}
	var missing []string
	if v := val(0); v != "1" && !strings.EqualFold(v, "ON") {
		missing = append(missing, "log_bin is off (start the server with log_bin)")
	}
	for i, want := range []struct{ name, value string }{{"binlog_format", "ROW"}, {"binlog_row_image", "FULL"}, {"binlog_row_metadata", "FULL"}} {
		if v := val(i + 1); !strings.EqualFold(v, want.value) {
			missing = append(missing, fmt.Sprintf("%s is %s, not %s", want.name, v, want.value))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("node %s: its binlog cannot be followed: %s", node, strings.Join(missing, "; "))
	}
	if _, err := c.Exec("SHOW MASTER STATUS"); err != nil {
		return fmt.Errorf("node %s: keyshard's account may not read the binlog position (SHOW MASTER STATUS: %v); "+
			"grant it REPLICATION SLAVE and BINLOG MONITOR (MariaDB) or REPLICATION CLIENT (MySQL)", node, err)
	}
	return nil
}

// Current is the node's binlog position now (SHOW MASTER STATUS): every
// transaction committed before the call is before it.
func Current(c Execer) (Position, error) {
	res, err := c.Exec("SHOW MASTER STATUS")
	if err != nil {
		return Position{}, err
	}
	if len(res.Rows) == 0 || len(res.Rows[0]) < 2 || res.Rows[0][0] == nil || res.Rows[0][1] == nil {
		return Position{}, fmt.Errorf("binlog: SHOW MASTER STATUS is empty: the server writes no binlog")
	}
	pos, err := strconv.ParseUint(*res.Rows[0][1], 10, 32)
	if err != nil {
		return Position{}, fmt.Errorf("binlog: SHOW MASTER STATUS position %q: %v", *res.Rows[0][1], err)
	}
	return Position{File: *res.Rows[0][0], Pos: uint32(pos)}, nil
}

// Snapshot starts a consistent-snapshot transaction on c and returns the
// binlog position it sees (MariaDB's binlog_snapshot_file/position): what
// c reads until it commits is the data as of exactly that position, every
// transaction before it and none after. The caller ends the transaction.
func Snapshot(c Execer) (Position, error) {
	if _, err := c.Exec("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
		return Position{}, err
	}
	res, err := c.Exec("SHOW STATUS LIKE 'binlog_snapshot_%'")
	if err != nil {
		return Position{}, err
	}
	var p Position
	var seen int
	for _, r := range res.Rows {
		if len(r) < 2 || r[0] == nil || r[1] == nil {
			continue
		}
		switch strings.ToLower(*r[0]) {
		case "binlog_snapshot_file":
			p.File = *r[1]
			seen++
		case "binlog_snapshot_position":
			n, err := strconv.ParseUint(*r[1], 10, 32)
			if err != nil {
				return Position{}, fmt.Errorf("binlog: binlog_snapshot_position %q: %v", *r[1], err)
			}
			p.Pos = uint32(n)
			seen++
		}
	}
	if seen != 2 || p.File == "" {
		return Position{}, fmt.Errorf("binlog: the server gives no binlog_snapshot_file/position (MariaDB does; MySQL needs another way)")
	}
	return p, nil
}
