package proxy

import (
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Multi-statement batches (CLIENT_MULTI_STATEMENTS, "stmt1; stmt2" in one
// COM_QUERY). A batch that names no sharded table, outside a transaction
// over several nodes, goes to one node as it is. One that names a sharded
// table, or comes inside a transaction over several nodes (where a COMMIT
// in it must end the transaction everywhere), runs here statement by
// statement, each through the whole COM_QUERY path (its checks, its
// class, its routing), as its own COM_QUERY would: the answers follow one
// another, each but the last ended with SERVER_MORE_RESULTS_EXISTS, and
// the first error ends the batch, as the server does.

// qBatch runs a batch statement by statement when it must, or refuses one
// the parser cannot split.
func qBatch(s *Session) (bool, error) {
	q := &s.q
	multiNode := s.lease.Branches() > 0
	name := ""
	if s.route != nil && s.route.Sharded() {
		name = s.route.MentionsSharded(q.sql)
	}
	if !multiNode && name == "" {
		return false, nil
	}
	// The batch's statements outlive the client's buffer (LOAD DATA
	// LOCAL in the batch reads the file into it).
	sql := strings.Clone(q.sql)
	stmts, err := s.getParser().SplitBatch(sql)
	if err != nil {
		if multiNode {
			return true, s.fail(newErr(errNotSupported, "keyshard: a multi-statement batch inside a transaction over several nodes "+
				"that keyshard cannot split into its statements is not supported (%v); send its statements one by one "+
				"(the transaction is still open)", err))
		}
		return true, s.fail(newErr(errNotSupported, "keyshard: a multi-statement batch that names sharded table %s and that keyshard "+
			"cannot split into its statements is not routed (%v); send its statements one by one", name, err))
	}
	q.batch = stmts
	return true, nil
}

// runBatch runs stmts (of qBatch) one by one as COM_QUERYs of their own; it stops at
// the first that fails and returns its error (already reported).
func runBatch(s *Session, stmts []string) error {
	defer s.cl.SetMore(false)
	var p []byte
	for i, st := range stmts {
		s.cl.SetMore(i < len(stmts)-1)
		p = append(append(p[:0], mysql.COM_QUERY), st...)
		if err := s.query(p); err != nil {
			return err
		}
	}
	return nil
}
