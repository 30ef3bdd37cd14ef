package backend

import (
	"encoding/binary"
	"errors"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
)

// Stmt is a statement prepared on one backend connection. Client sessions
// never see its id: they hold keyshard's own statement ids and the session
// prepares the text lazily on whichever connection runs it. A connection
// keeps its statements in a bounded LRU (Options.StmtCache); the least
// recently used one is closed on the server when the cache is full, and
// all die with the connection, so the server's Prepared_stmt_count stays
// under pool size × cache size.
type Stmt struct {
	ID     uint32
	Params int
	Cols   int
	// Types are the parameter types last bound on the server for this
	// statement (an EXECUTE without new-params-bound reuses them).
	Types []byte
	// Cursor is set while a cursor is open on the statement: the cache
	// does not evict it then.
	Cursor bool

	orphan     bool     // replaced in the cache while its cursor was open
	ref        *StmtRef // the client statements it serves (nil: not counted)
	key        string
	prev, next *Stmt
}

// stmtCache is an LRU of the statements prepared on one connection.
type stmtCache struct {
	byKey      map[string]*Stmt
	head, tail *Stmt // head = most recently used
}

// CachedStmt returns the statement prepared on c under key, marking it
// recently used, or nil. ref (nil: unchanged) is the client statements it
// now serves (see StmtRefs).
func (c *Conn) CachedStmt(key string, ref *StmtRef) *Stmt {
	st := c.stmts.byKey[key]
	if st != nil {
		if c.stmts.head != st {
			c.stmts.unlink(st)
			c.stmts.push(st)
		}
		if ref != nil {
			st.ref = ref
		}
	}
	return st
}

// StmtCount is the number of statements prepared on c.
func (c *Conn) StmtCount() int { return len(c.stmts.byKey) }

// Prepare prepares sql on the connection and caches it under key (the
// caller's key includes what else the statement depends on, such as the
// database it was prepared in). Each packet of the server's answer after
// the first (parameter and column definitions) is passed to each, when
// not nil, together with the answer's first packet up front. A MySQL error
// (bad SQL) is returned as *mysql.MyError and leaves the connection
// usable; others mark it broken.
//
// The server's limit on prepared statements is server-wide
// (max_prepared_stmt_count): when a PREPARE meets it (1461), the
// statements this connection keeps cached are closed and the PREPARE is
// tried once more.
//
// ref (nil: none) counts the client statements the statement serves: it is
// closed once none is left (see StmtRefs).
func (c *Conn) Prepare(key, sql string, ref *StmtRef, each func(p []byte) error) (*Stmt, error) {
	st, err := c.prepare(key, sql, ref, each)
	var me *mysql.MyError
	if errors.As(err, &me) && me.Code == mysql.ER_MAX_PREPARED_STMT_COUNT_REACHED && c.evictStmts() > 0 {
		return c.prepare(key, sql, ref, each)
	}
	return st, err
}

// evictStmts closes every cached statement but cursor holders (their
// COM_STMT_CLOSE goes out with the next command); it returns how many.
func (c *Conn) evictStmts() int {
	return c.closeStmts(func(*Stmt) bool { return true })
}

// closeStmts closes the cached statements drop picks, but cursor holders
// (their COM_STMT_CLOSE goes out with the next command); it returns how
// many.
func (c *Conn) closeStmts(drop func(st *Stmt) bool) int {
	n := 0
	for st := c.stmts.tail; st != nil; {
		prev := st.prev
		if !st.Cursor && drop(st) {
			c.stmts.unlink(st)
			delete(c.stmts.byKey, st.key)
			c.closeStmt(st.ID)
			n++
		}
		st = prev
	}
	return n
}

func (c *Conn) prepare(key, sql string, ref *StmtRef, each func(p []byte) error) (*Stmt, error) {
	c.makeRoom(key)
	if err := c.pkt.WriteCommandString(mysql.COM_STMT_PREPARE, sql); err != nil {
		return nil, c.lost(err)
	}
	if err := c.pkt.Flush(); err != nil {
		return nil, c.lost(err)
	}
	p, err := c.pkt.ReadPacket()
	if err != nil {
		return nil, c.lost(err)
	}
	if len(p) > 0 && p[0] == wire.ErrHeader {
		return nil, wire.ParseErr(p)
	}
	if len(p) < 12 || p[0] != wire.OKHeader {
		return nil, c.lost(wire.ErrMalformed)
	}
	st := &Stmt{
		ID:     binary.LittleEndian.Uint32(p[1:]),
		Cols:   int(binary.LittleEndian.Uint16(p[5:])),
		Params: int(binary.LittleEndian.Uint16(p[7:])),
		key:    key,
		ref:    ref,
	}
	var werr error
	if each != nil {
		werr = each(p)
	}
	for _, n := range [2]int{st.Params, st.Cols} {
		for range n {
			d, err := c.pkt.ReadPacket()
			if err != nil {
				return nil, c.lost(err)
			}
			if each != nil && werr == nil {
				werr = each(d)
			}
		}
		if n > 0 && !c.DeprecateEOF() {
			// The EOF that ends the definitions: each sees the same
			// packets whatever the connection's framing.
			if _, err := c.pkt.ReadPacket(); err != nil {
				return nil, c.lost(err)
			}
		}
	}
	c.pool.stmtPrepares.Add(1)
	c.pool.stmtsOpen.Add(1)
	c.addStmt(st)
	return st, werr
}

// makeRoom closes, before a PREPARE of key, the statement it replaces and
// the least recently used ones beyond StmtCache-1: their COM_STMT_CLOSE
// goes out ahead of the PREPARE, so the server never holds more than
// StmtCache statements of this connection (cursor holders excepted).
func (c *Conn) makeRoom(key string) {
	if old := c.stmts.byKey[key]; old != nil && !old.Cursor {
		c.stmts.unlink(old)
		delete(c.stmts.byKey, key)
		c.closeStmt(old.ID)
	}
	for old := c.stmts.tail; len(c.stmts.byKey) >= c.pool.opts.StmtCache && old != nil; {
		prev := old.prev
		if !old.Cursor {
			c.stmts.unlink(old)
			delete(c.stmts.byKey, old.key)
			c.closeStmt(old.ID)
		}
		old = prev
	}
}

func (c *Conn) addStmt(st *Stmt) {
	if c.stmts.byKey == nil {
		c.stmts.byKey = make(map[string]*Stmt)
	}
	if old := c.stmts.byKey[st.key]; old != nil {
		c.stmts.unlink(old)
		if old.Cursor {
			old.orphan = true // closed when its cursor ends (UnpinStmt)
		} else {
			c.closeStmt(old.ID)
		}
	}
	c.stmts.byKey[st.key] = st
	c.stmts.push(st)
	for old := c.stmts.tail; len(c.stmts.byKey) > c.pool.opts.StmtCache && old != nil; {
		prev := old.prev
		if !old.Cursor && old != st {
			c.stmts.unlink(old)
			delete(c.stmts.byKey, old.key)
			c.closeStmt(old.ID)
		}
		old = prev
	}
}

// DropStmt forgets a statement and closes it on the server (after an
// error that says the server no longer has it, say).
func (c *Conn) DropStmt(st *Stmt) {
	if c.stmts.byKey[st.key] != st {
		return
	}
	c.stmts.unlink(st)
	delete(c.stmts.byKey, st.key)
	c.closeStmt(st.ID)
}

// closeStmt buffers COM_STMT_CLOSE (which has no answer): it goes out with
// the connection's next command.
func (c *Conn) closeStmt(id uint32) {
	c.pool.stmtsOpen.Add(-1)
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], id)
	if err := c.pkt.WriteCommand(mysql.COM_STMT_CLOSE, b[:]); err != nil {
		c.MarkLost()
	}
}

// UnpinStmt ends the cursor hold on st (see Stmt.Cursor).
func (c *Conn) UnpinStmt(st *Stmt) {
	st.Cursor = false
	if st.orphan {
		st.orphan = false
		c.closeStmt(st.ID)
	}
}

// forgetStmts empties the cache after the server dropped every statement
// (COM_RESET_CONNECTION, COM_CHANGE_USER).
func (c *Conn) forgetStmts() {
	c.pool.stmtsOpen.Add(-int64(len(c.stmts.byKey)))
	c.stmts = stmtCache{}
}

func (l *stmtCache) push(st *Stmt) {
	st.prev, st.next = nil, l.head
	if l.head != nil {
		l.head.prev = st
	}
	l.head = st
	if l.tail == nil {
		l.tail = st
	}
}

func (l *stmtCache) unlink(st *Stmt) {
	if st.prev != nil {
		st.prev.next = st.next
	} else {
		l.head = st.next
	}
	if st.next != nil {
		st.next.prev = st.prev
	} else {
		l.tail = st.prev
	}
	st.prev, st.next = nil, nil
}
