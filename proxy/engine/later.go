package engine

import (
	"time"

	"github.com/keyshard/keyshard/backend"
)

// Second phases. Once the commit decision of a transaction over several
// nodes is durable (its first node's COMMIT, with the decision row,
// returned), the outcome is fixed: recovery commits a prepared branch by
// the decision if keyshard never does. The branches' XA COMMITs still run
// before the client's answer (all nodes at once, one round trip): answered
// earlier, another connection could for a moment read the write half
// there, which one server never shows (an application committing on one
// pooled connection and reading on another would miss its own write; the
// differential fuzzer, comparing through another connection, found it).

// commitTimeout bounds a branch's XA COMMIT: past it the connection is
// closed, the branch stays prepared and recovery commits it.
const commitTimeout = 10 * time.Second

// commitBranches runs q(bc) (XA COMMIT) on each of conns at once and
// reports whether every one succeeded; the connections of a failure are
// marked broken (which failed is not told apart: none is reused). The
// caller gives the connections back.
func commitBranches(conns []*backend.Conn, q func(bc *backend.Conn) string) bool {
	dl := time.Now().Add(commitTimeout)
	for _, bc := range conns {
		_ = bc.SetDeadline(dl)
	}
	all := execAll(conns, "commit", func(i int) string { return q(conns[i]) }) == nil
	for _, bc := range conns {
		if bc.SetDeadline(time.Time{}) != nil || !all {
			bc.MarkBroken()
		}
	}
	return all
}
