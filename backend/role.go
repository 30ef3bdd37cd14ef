package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// ServerRole is what a server says of its place in replication: the
// proxy's failover follower (proxy/control/failover.go) asks each replica of a
// node whose master is down, and each former master.
type ServerRole struct {
	ReadOnly bool // @@read_only is on
	// Replicating: SHOW SLAVE STATUS has a row whose IO or SQL thread is
	// not stopped (running, or connecting to a master that is gone).
	Replicating bool
	Source      string // the master it replicates from, host:port ("" if none)
}

// Writable reports whether the server takes writes and replicates
// nothing: a master, or a replica that was promoted.
func (r ServerRole) Writable() bool { return !r.ReadOnly && !r.Replicating }

// AskRole connects to addr with opts' account on a connection of its own,
// asks for @@read_only and SHOW SLAVE STATUS, and closes it. No pool is
// used: their connections and health state are left alone, and addr
// need not be in any node (a former master). ctx bounds the whole.
func AskRole(ctx context.Context, node, addr string, opts Options) (ServerRole, error) {
	opts.withDefaults()
	opts.Silence, opts.OnState, opts.MinIdle = 0, nil, 0
	p := &Pool{node: node, addr: addr, opts: opts, baseState: opts.BaseState, health: &health{}, stmts: &Latency{}}
	if p.baseState == nil {
		p.baseState = NewState(opts.Charset, opts.Collation)
	}
	c, err := dial(ctx, p, DefaultFlavor)
	if err != nil {
		return ServerRole{}, err
	}
	defer c.close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	var role ServerRole
	r, err := c.Exec("SELECT @@read_only")
	if err != nil {
		return role, c.errorf(KindProtocol, err, "SELECT @@read_only")
	}
	if len(r.Rows) != 1 || len(r.Rows[0]) != 1 || r.Rows[0][0] == nil {
		return role, c.errorf(KindProtocol, nil, "SELECT @@read_only: unexpected answer")
	}
	role.ReadOnly = *r.Rows[0][0] != "0" && !strings.EqualFold(*r.Rows[0][0], "OFF")
	r, err = c.Exec("SHOW SLAVE STATUS")
	var me *mysql.MyError
	if errors.As(err, &me) && me.Code == mysql.ER_PARSE_ERROR {
		r, err = c.Exec("SHOW REPLICA STATUS") // MySQL 8.4 knows only this one
	}
	if err != nil {
		return role, c.errorf(KindProtocol, err, "SHOW SLAVE STATUS (the account needs REPLICATION CLIENT or REPLICA MONITOR)")
	}
	role.Replicating, role.Source = replication(r)
	return role, nil
}

// replication reads SHOW SLAVE STATUS (or SHOW REPLICA STATUS): whether a
// replication thread is not stopped, and the master's address.
func replication(r *Result) (replicating bool, source string) {
	if len(r.Rows) == 0 {
		return false, ""
	}
	row := r.Rows[0]
	col := func(names ...string) string {
		for i, c := range r.Columns {
			for _, n := range names {
				if strings.EqualFold(c, n) && i < len(row) && row[i] != nil {
					return *row[i]
				}
			}
		}
		return ""
	}
	running := func(v string) bool { return v != "" && !strings.EqualFold(v, "No") } // Yes, Connecting, Preparing
	replicating = running(col("Slave_IO_Running", "Replica_IO_Running")) || running(col("Slave_SQL_Running", "Replica_SQL_Running"))
	if h := col("Master_Host", "Source_Host"); h != "" {
		source = fmt.Sprintf("%s:%s", h, col("Master_Port", "Source_Port"))
	}
	return replicating, source
}

// StateSince is when the pool's state last changed: by its health
// checks, a failed connection or an operator (its start if never).
func (p *Pool) StateSince() time.Time { return time.Unix(0, p.changedAt.Load()) }
