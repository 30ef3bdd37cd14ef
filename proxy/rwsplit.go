package proxy

import (
	"time"

	"github.com/keyshard/keyshard/backend"
)

// Read/write splitting: a read-only statement (router.ReadOnly) of a
// session that holds nothing on a connection (no transaction, no pinned or
// sticky state, no deferred BEGIN) goes to one of its node's replicas,
// picked by backend.Node.ReadPool. Everything else, and a session's reads
// within read_your_writes_window after it wrote, go to the master.

// readPool returns the pool a statement should read from on node n (nil:
// the default node), or nil for the session's usual master connection.
// read says whether the statement is read-only; skip is a pool a retry
// must avoid. With no replica able to serve and master_reads off, it fails
// with an error naming the node.
func (s *Session) readPool(n *backend.Node, read bool, skip *backend.Pool) (*backend.Pool, error) {
	if !read || !s.rwSplit || s.pinned != nil || s.txBegin != "" || s.sticky != "" {
		return nil, nil
	}
	if n == nil {
		n = s.node
	}
	if n == nil || !n.Splits() {
		return nil, nil
	}
	if w := s.snap.rywWindow; w > 0 && s.lastWrite != 0 && time.Duration(time.Now().UnixNano()-s.lastWrite) < w {
		return nil, nil
	}
	p := n.ReadPool(skip)
	if p == nil {
		return nil, &backend.Error{Kind: backend.KindDown, Node: n.Name, Addr: n.Master.Addr(), Role: backend.RoleReplica,
			Msg: "no replica can serve reads (all down, lagging or failed) and master_reads is off"}
	}
	return p, nil
}

// readConn is a connection from pool p synced to the session.
func (s *Session) readConn(p *backend.Pool) (*backend.Conn, error) {
	s.waitStart()
	bc, err := s.syncedConn(p)
	s.waitDone(bc)
	return bc, err
}

func (s *Session) syncedConn(p *backend.Pool) (*backend.Conn, error) {
	bc, err := p.Get(s.srv.ctx)
	if err != nil {
		return nil, err
	}
	if err := bc.Sync(s.db, s.multi, s.state); err != nil {
		s.releaseLoose(bc)
		return nil, err
	}
	return bc, nil
}

// connFor returns the connection for a statement on node n: from a read
// pool when readPool picks one (and that pool), else connOn's. A read pool
// that fails to give a connection is tried once more elsewhere (another
// replica or the master), unless this is already a retry (skip set).
func (s *Session) connFor(n *backend.Node, read bool, skip *backend.Pool) (*backend.Conn, *backend.Pool, error) {
	p, err := s.readPool(n, read, skip)
	if err != nil {
		return nil, nil, err
	}
	if p == nil {
		bc, err := s.connOn(n)
		return bc, nil, err
	}
	bc, err := s.readConn(p)
	if err != nil && skip == nil && retryRead(err) {
		return s.connFor(n, read, p)
	}
	return bc, p, err
}

// markWrite starts the session's read-your-writes window.
func (s *Session) markWrite() { s.lastWrite = time.Now().UnixNano() }

// retryRead reports whether a read that failed with err before anything
// reached the client may be retried on another backend.
func retryRead(err error) bool {
	switch backend.KindOf(err) {
	case backend.KindLost, backend.KindConnect, backend.KindDown, backend.KindPoolTimeout, backend.KindClosed:
		return true
	}
	return false
}

// splitting reports whether the session tracks its writes for
// read-your-writes (it splits reads and the window is on).
func (s *Session) splitting() bool { return s.rwSplit && s.snap.rywWindow > 0 }
