package backend

import (
	"sync"
	"sync/atomic"
)

// StmtRefs counts, for each statement text, the client statements that
// hold it (prepared and not closed), so that the backend statements
// prepared for it are closed once no client holds it any more, as the
// server closes a statement its client closes: a statement nobody will
// execute again must not count against the server-wide
// max_prepared_stmt_count. Connections check at their next Get or Put
// after any count fell to zero (Conn.closeUnheld). One StmtRefs serves
// every pool of a proxy.
type StmtRefs struct {
	mu    sync.Mutex
	refs  map[string]*StmtRef
	drops atomic.Uint64 // how many times a count fell to zero
}

// StmtRef is one statement text's count of client holders.
type StmtRef struct {
	key string
	n   atomic.Int32
}

// NewStmtRefs returns an empty registry.
func NewStmtRefs() *StmtRefs { return &StmtRefs{refs: make(map[string]*StmtRef)} }

// Hold records one more client statement of text key (the client's
// database and SQL) and returns its ref, for Drop and for the backend
// statements prepared for it (Conn.Prepare).
func (r *StmtRefs) Hold(key string) *StmtRef {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref := r.refs[key]
	if ref == nil {
		ref = &StmtRef{key: key}
		r.refs[key] = ref
	}
	ref.n.Add(1)
	return ref
}

// Drop records that a client statement of ref was closed (or its session
// ended).
func (r *StmtRefs) Drop(ref *StmtRef) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ref.n.Add(-1) > 0 {
		return
	}
	if r.refs[ref.key] == ref {
		delete(r.refs, ref.key)
	}
	r.drops.Add(1)
}

// Len is the number of statement texts some client holds.
func (r *StmtRefs) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.refs)
}

// closeUnheld closes the cached statements whose text no client holds any
// more (their COM_STMT_CLOSE goes out with the next command), if a count
// fell to zero since the connection last looked; it returns how many.
func (c *Conn) closeUnheld() int {
	r := c.pool.opts.Refs
	if r == nil {
		return 0
	}
	d := r.drops.Load()
	if d == c.dropsSeen {
		return 0
	}
	c.dropsSeen = d
	return c.closeStmts(func(st *Stmt) bool { return st.ref != nil && st.ref.n.Load() <= 0 })
}
