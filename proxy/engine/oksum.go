package engine

import (
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/router"
)

// What the OKs of a write over several legs add up to.

// okSum is what the OKs of a write fan-out add up to.
type okSum struct {
	affected, insertID uint64
	warnings           uint16
}

// answerOK answers a write fan-out with its summed OK.
func (e *Engine) answerOK(s okSum) error {
	e.Last.RowCount = int64(s.affected)
	e.Trace.Sent(0, s.affected)
	if s.insertID != 0 {
		e.Last.InsertID = s.insertID
	}
	return e.Client.OK(s.affected, s.insertID, e.Conns.Status(), s.warnings, "")
}

// gatherOKs reads the answers of a write fan-out: the summed OK, or the
// first error (naming its node and sub-table, and the sub-tables changed
// and not) once every answer is read, or a lost connection at once.
func (e *Engine) gatherOKs(legs []Leg, rt *router.Routing, atomic bool) (okSum, error) {
	var affected, insertID uint64
	var warnings uint16
	var failed *mysql.MyError
	var changed, unchanged []string // by sub-table, for an error
	var copyRows []string           // the copies of a global table: "node: affected"
	var firstCopy uint64            // the rows the first copy changed
	for i := range legs {
		l := &legs[i]
		for more := true; more; {
			p, err := l.first(e.Trace)
			if err != nil {
				return okSum{}, err
			}
			switch p[0] {
			case wire.ErrHeader:
				// The first error is reported, unless another rolled a
				// whole transaction back (a deadlock): the session must
				// know, to roll it back everywhere.
				if le := legError(l, wire.ParseErr(p)); failed == nil || RollsBackTx(le) && !RollsBackTx(failed) {
					failed = le
				}
				unchanged = append(unchanged, l.sub())
				// A batch stops at its first error; pipelined statements
				// each answer.
				if more = l.ended(0); !more && l.done < len(l.Route.SubTables) {
					unchanged = append(unchanged, l.Route.SubTables[l.done:]...)
				}
			case wire.OKHeader:
				ok, perr := wire.ParseOK(p)
				if perr != nil {
					return okSum{}, lostConn(l.BC, perr)
				}
				changed = append(changed, l.sub())
				l.BC.SetStatus(ok.Status)
				first := i == rt.FirstRoute && l.done == rt.FirstSQL
				if first || !rt.Copies {
					// The copies of a global table count as one table.
					affected += ok.AffectedRows
					warnings += ok.Warnings
					l.warned(ok.Warnings)
				}
				if rt.Copies {
					copyRows = append(copyRows, l.BC.Node()+": "+strconv.FormatUint(ok.AffectedRows, 10))
					if i == 0 {
						firstCopy = ok.AffectedRows
					} else if ok.AffectedRows != firstCopy && failed == nil {
						// Copies that are not alike, or a statement that
						// does not write alike on each (RAND(), UUID(),
						// LIMIT without ORDER BY...).
						failed = &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: mysql.DEFAULT_MYSQL_STATE,
							Message: "keyshard: the copies of global table " + l.Route.SubTables[0] + " changed different numbers of rows (" +
								strings.Join(copyRows, ", ") + "): they are not alike, or the statement does not write alike on each " +
								"(RAND(), UUID(), NOW(), LIMIT without ORDER BY); see ADMIN CHECK SHARDS"}
					}
				}
				if first {
					insertID = ok.InsertID
				}
				if rt.InsertID != 0 {
					insertID = rt.InsertID // the first id from a sequence
				}
				more = l.ended(ok.Status)
			default:
				// A result set where none was expected: not ours to relay.
				l.BC.MarkBroken()
				if failed == nil {
					failed = &mysql.MyError{Code: mysql.ER_UNKNOWN_ERROR, State: mysql.DEFAULT_MYSQL_STATE,
						Message: "keyshard: node " + l.BC.Node() + ": unexpected result set in a write fan-out"}
				}
				more = false
			}
		}
		e.Diag.leg(l) // before an XA commit runs on its connection
	}
	if failed != nil {
		switch {
		case atomic:
			failed.Message += "; nothing was changed (rolled back on every sub-table)"
		case len(changed) > 0:
			failed.Message += "; changed: " + strings.Join(changed, ", ") + "; not changed: " + strings.Join(unchanged, ", ")
		}
		return okSum{}, failed
	}
	return okSum{affected, insertID, warnings}, nil
}
