package fuzzsql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"strings"
	"time"
)

// txnPct is the share (percent) of steps that run a transaction instead
// of one statement in autocommit.
const txnPct = 4

// txLog is an open transaction: its statements so far, for a difference's
// message, and the tables it wrote.
type txLog struct {
	lines  []string
	tables []*table
	failed bool // a difference inside it: it is rolled back on both sides
}

func (l *txLog) add(s *stmt, prepared bool) {
	line := s.text
	if prepared {
		line = fmt.Sprintf("%s (prepared, args %v)", s.ptext, s.args)
	}
	l.lines = append(l.lines, line)
	if s.write && !slices.Contains(l.tables, s.table) {
		l.tables = append(l.tables, s.table)
	}
}

func (l *txLog) String() string {
	return "\n    inside the transaction (no regression case written):\n      " + strings.Join(l.lines, "\n      ")
}

// txn runs one transaction on one connection of each side: BEGIN, START
// TRANSACTION or SET autocommit = 0, two to eight statements over one to
// three tables (writes, and reads that must see them), each compared as in
// autocommit and, after each write, the written table compared whole
// inside the transaction; then COMMIT or ROLLBACK, and the tables it wrote
// compared whole from outside. It returns how many statements it ran
// (counted in res, the control statements included), starting at number i.
func (ru *run) txn(res *tally, i int) int {
	ctx := context.Background()
	g := ru.g
	kc, err := ru.ks.Conn(ctx)
	if err != nil {
		ru.t.Fatalf("keyshard connection: %v", err)
	}
	rc, err := ru.ref.Conn(ctx)
	if err != nil {
		ru.t.Fatalf("reference connection: %v", err)
	}
	// The connections end with the transaction: no session state of it
	// (autocommit, a transaction left open by a difference) reaches the
	// pools.
	defer func() {
		for _, c := range []*sql.Conn{kc, rc} {
			_ = c.Raw(func(any) error { return driver.ErrBadConn })
			c.Close()
		}
	}()
	log := &txLog{}
	res.txns++
	n := 0
	ctl := func(q string) {
		ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		res.statements++
		log.lines = append(log.lines, q)
		_, kerr := kc.ExecContext(ctx, q)
		_, rerr := rc.ExecContext(ctx, q)
		if (kerr == nil) != (rerr == nil) || errno(kerr) != errno(rerr) {
			res.different++
			msg := fmt.Sprintf("seed %d, statement %d: %s: reference %v, keyshard %v%s", ru.seed, i+n, q, rerr, kerr, log)
			res.diffs = append(res.diffs, msg)
			ru.t.Error(msg)
			log.failed = true
		} else {
			res.same++
		}
		n++
	}
	begin := g.pick([]string{"BEGIN", "START TRANSACTION", "SET autocommit = 0"})
	ctl(begin)
	var tabs []*table
	for range 1 + g.r.IntN(3) {
		if t := pick(g.r, g.s.tables); !slices.Contains(tabs, t) {
			tabs = append(tabs, t)
		}
	}
	for range 2 + g.r.IntN(7) {
		if log.failed {
			break
		}
		s := g.txStmt(tabs)
		prepared := g.r.IntN(4) == 0
		ru.step(res, i+n, &s, prepared, side{ks: kc, ref: rc, tx: log})
		n++
	}
	end := "COMMIT"
	if log.failed || g.chance(35) {
		end = "ROLLBACK"
	}
	ctl(end)
	if begin == "SET autocommit = 0" {
		ctl("SET autocommit = 1")
	}
	for _, t := range log.tables {
		why, n := compareTableRows(ru.ks, ru.ref, t)
		ru.g.rows[t.name] = n
		if why != "" {
			msg := fmt.Sprintf("seed %d, statement %d: after %s\n    %s%s", ru.seed, i+n-1, end, why, log)
			if !log.failed {
				res.different++
				res.same--
			}
			res.diffs = append(res.diffs, msg)
			ru.t.Error(msg)
			ru.resync(t)
		}
	}
	return n
}

// txStmt generates a statement inside a transaction over tabs: writes more
// often than in autocommit, and reads of the same tables, which must see
// them.
func (g *gen) txStmt(tabs []*table) stmt {
	g.dcol = ""
	t := pick(g.r, tabs)
	th := slices.ContainsFunc(tabs, func(t *table) bool { return t.name == "th" })
	if g.chance(55) {
		if th && g.chance(10) {
			return g.joinWrite()
		}
		switch r := g.r.IntN(10); {
		case r < 4 || g.rows[t.name] < 20 && r < 7:
			return g.insert(t)
		case r < 7:
			return g.update(t)
		default:
			return g.delete(t)
		}
	}
	switch r := g.r.IntN(20); {
	case th && r < 3:
		return g.joinQuery()
	case r < 9:
		return g.rowsQuery(t)
	case r < 11:
		return g.distinctQuery(t)
	case r < 14:
		return g.aggQuery(t)
	default:
		return g.groupQuery(t)
	}
}
