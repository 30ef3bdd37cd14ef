package engine

import (
	"slices"
	"time"

	"github.com/keyshard/keyshard/backend"
)

// Second phases finished after the client's answer. Once the commit
// decision of a transaction over several nodes is durable (its first
// node's COMMIT, with the decision row, returned), the outcome is fixed:
// recovery commits a prepared branch by the decision if keyshard never
// does. So the client is answered at once and the branches' XA COMMITs
// run behind it, on their own goroutine (CommitLater). What must not
// change is what the session itself sees: its next statement on one of
// those nodes waits until they are done (await, before any connection to
// the node is taken), so it reads its own writes there as on one server.
// Other sessions may, for that moment, see the first node's part
// committed and a branch's not yet, as they could between the branches'
// XA COMMITs before.

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
	go func() {
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
