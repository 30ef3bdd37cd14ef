package engine

import (
	"slices"
	"time"

	"github.com/keyshard/keyshard/backend"
)

// Second phases. Once the commit decision of a transaction over several
// nodes is durable (its first node's COMMIT, with the decision row,
// returned), the outcome is fixed: recovery commits a prepared branch by
// the decision if keyshard never does. CommitLater could answer the
// client at once and run the branches' XA COMMITs behind it, but then
// another connection could, for that moment, see the first node's part
// committed and a branch's not yet: an application that commits on one
// pooled connection and reads on another (the usual web request) would
// read its own write as not there, which one server never shows (the
// differential fuzzer, comparing through another connection, found it).
// So the XA COMMITs run before the answer (all nodes at once, one round
// trip); CommitLater keeps the await machinery for a second phase run
// behind the answer, which nothing asks for now.

// laterTimeout bounds a second phase run behind the answer.
const laterTimeout = 10 * time.Second

// later is one batch of second phases in flight: the nodes they run on,
// closed done when every one finished and its connection went back.
type later struct {
	nodes []string
	done  chan struct{}
}

// CommitLater runs q(bc) (XA COMMIT) on each of conns at once on a
// goroutine of its own, then gives the connections back to their pools
// (closed if the statement failed: the branch stays prepared and
// recovery commits it by the decision) and calls end with whether every
// one succeeded. The session's next statement on any of their nodes
// waits for it first. The connections are the caller's no more: it must
// not release them.
func (l *Lease) CommitLater(conns []*backend.Conn, q func(bc *backend.Conn) string, end func(all bool)) {
	lt := &later{done: make(chan struct{})}
	for _, bc := range conns {
		l.Trace.Released(bc) // no KILL of the session's reaches them now
		lt.nodes = append(lt.nodes, bc.Node())
	}
	l.later = append(l.later, lt)
	func() {
		defer close(lt.done)
		// A frozen node cannot hold the session up for ever: past the
		// deadline the connection is closed, the branch stays prepared
		// and recovery commits it.
		dl := time.Now().Add(laterTimeout)
		for _, bc := range conns {
			_ = bc.SetDeadline(dl)
		}
		all := execAll(conns, "commit", func(i int) string { return q(conns[i]) }) == nil
		for _, bc := range conns {
			if bc.SetDeadline(time.Time{}) != nil || !all {
				bc.MarkBroken() // which failed is not told apart: none is reused
			}
			if bc.Broken() {
				bc.Pool().Discard(bc)
			} else {
				bc.Pool().Put(bc)
			}
		}
		end(all)
	}()
}

// await waits for the second phases in flight on node ("" for every
// node), and forgets those finished.
func (l *Lease) await(node string) {
	l.later = slices.DeleteFunc(l.later, func(lt *later) bool {
		if node == "" || slices.Contains(lt.nodes, node) {
			select {
			case <-lt.done:
			case <-l.Ctx.Done(): // the server stops
			}
			return true
		}
		select {
		case <-lt.done:
			return true
		default:
			return false
		}
	})
}

// Await waits for every second phase of the session's still in flight
// (see CommitLater): before the session ends, or a test reads the nodes.
func (l *Lease) Await() {
	if len(l.later) > 0 {
		l.await("")
	}
}
