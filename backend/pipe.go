package backend

import (
	"context"
	"errors"
	"hash/maphash"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Pipelined connections. A MariaDB or MySQL server reads the commands of
// a connection in order and answers them in order, so several statements
// may be in flight on one connection: one write carries several commands
// and one read brings several answers, which costs both sides fewer
// syscalls and wake-ups per statement than one connection each.
//
// Sessions whose backend state is the same (flavor, database,
// multi-statements, charset and variables: pipeKey) share such a
// connection for their autocommit statements that leave no state behind
// (the caller decides which). There is no dispatcher: a statement joins a
// pipe under the pool's pipe lock, which appends its command to the
// pipe's outgoing bytes and the statement to the pipe's queue in one
// step, so the queue is the order of the commands on the wire. The first
// joiner to find no write in progress writes what is queued, and goes on
// writing what others queued meanwhile. Each statement then waits for its
// turn (the head of the queue), reads and relays its own answer from the
// connection's reader, which often holds it already, and hands the turn
// to the next. A pipe exists while statements are in flight; the last
// one out gives the connection back to its pool.
//
// A statement joins the least busy pipe of its state that takes it, and
// opens a new one only when none does. (Measured on 2 CPUs, see
// bench/RESULTS.md: sharing at once cost nothing at 4 clients and saved
// the most at 16 and 64; opening 4 pipes before sharing saved little.)
// Bounds: at most Options.PipelineDepth statements are in flight on a
// pipe; a pipe whose head has waited longer than pipeStall takes no more
// (a slow statement holds up at most the depth behind it); and two
// statements of the same text are never in flight on one pipe, so that a
// KILL QUERY can find exactly the one meant (Turn.Kill).

// pipeStall: a pipe whose head statement has waited this long for its
// answer takes no new statements.
const pipeStall = 10 * time.Millisecond

// pipeMaxSQL bounds a pipelined statement's text and pipeMaxOut the
// commands a pipe has not written yet: what is written stays well below
// the server's socket buffer, so a write never waits for the server to
// read, which it does not while it sends a big answer nobody reads yet
// (the writer may be the head, whose answer that is). The server's
// process list also keeps such a statement's text whole (KILL finds it
// there).
const (
	pipeMaxSQL = 16 << 10
	pipeMaxOut = 32 << 10
)

// pipeKey is what must be the same for two sessions' statements to share
// a connection.
type pipeKey struct {
	flavor Flavor
	db     string
	multi  bool
	state  string
}

// pipes are a pool's pipelined connections.
type pipes struct {
	mu   sync.Mutex
	m    map[pipeKey][]*pipe
	seed maphash.Seed
}

// pipe is one connection with statements in flight.
type pipe struct {
	pool  *Pool
	key   pipeKey
	bc    *Conn
	queue []*Turn // in flight, in the order sent; queue[0] has the turn
	// out: commands not written yet; spare: the other buffer.
	out, spare []byte
	writing    bool      // a joiner is writing (it writes what is queued)
	killing    bool      // a KILL looks for its statement: none joins meanwhile
	headAt     time.Time // when queue[0] got the turn
	err        error     // the connection failed: every turn left gets it
	closed     bool      // takes no new statements
}

// Turn is one statement's place on a pipelined connection. It belongs to
// the session that sent the statement, but for Kill.
type Turn struct {
	p     *pipe
	hash  uint64
	sql   []byte // the statement's text (the caller's; valid until Done)
	ready chan struct{}
	// Under the pool's pipe lock:
	head, done, killed bool
}

// Pipeline sends COM_QUERY sql on a connection it shares with other
// sessions of the same backend state (db, multi-statements, st, flavor
// f), with autocommit on, and returns the statement's turn; nil, nil
// when it is not to be pipelined (pipelining off, a server other than
// MariaDB, a long statement, a connection that could not be synced: the
// caller runs it the usual way); an error when no connection could be
// had. Wait, then Done, must follow a turn.
func (p *Pool) Pipeline(ctx context.Context, deadline time.Time, f Flavor, db string, multi bool, st *State, sql []byte) (*Turn, error) {
	// MariaDB only: a KILL QUERY there names the query (KILL QUERY ID);
	// MySQL's names the connection, which may run another's statement
	// by the time it arrives.
	if !p.Pipelines() || len(sql) > pipeMaxSQL || p.Health() == Down || !strings.Contains(p.ServerVersion(), "MariaDB") {
		return nil, nil
	}
	key := pipeKey{flavor: f, db: db, multi: multi, state: st.Key()}
	ps := &p.pipes
	t := &Turn{sql: sql, hash: maphash.Bytes(ps.seed, sql), ready: make(chan struct{}, 1)}
	now := time.Now()
	ps.mu.Lock()
	var best *pipe // the least busy pipe that takes it
	for _, pp := range ps.m[key] {
		if pp.takes(t, p.opts.PipelineDepth, now) && (best == nil || len(pp.queue) < len(best.queue)) {
			best = pp
		}
	}
	if best != nil {
		p.pipelined.Add(1)
		best.send(t, now) // unlocks
		return t, nil
	}
	ps.mu.Unlock()

	bc, err := p.GetBy(ctx, deadline, f)
	if err != nil {
		return nil, err
	}
	if err := bc.Sync(db, multi, true, st); err != nil || !bc.Autocommit() {
		if bc.broken {
			p.Discard(bc)
		} else {
			p.Put(bc)
		}
		return nil, nil
	}
	pp := &pipe{pool: p, key: key, bc: bc}
	ps.mu.Lock()
	if ps.m == nil {
		ps.m = make(map[pipeKey][]*pipe)
	}
	ps.m[key] = append(ps.m[key], pp)
	pp.send(t, time.Now()) // unlocks
	return t, nil
}

// Pipelines reports whether the pool pipelines at all (a cheap check
// before anything else is done for it).
func (p *Pool) Pipelines() bool { return p.opts.PipelineDepth > 1 }

// takes reports whether t may join pp (under the pipe lock).
func (pp *pipe) takes(t *Turn, depth int, now time.Time) bool {
	if pp.closed || pp.killing || len(pp.queue) >= depth || now.Sub(pp.headAt) > pipeStall || len(pp.out)+len(t.sql) > pipeMaxOut {
		return false
	}
	for _, q := range pp.queue {
		if q.hash == t.hash && string(q.sql) == string(t.sql) {
			return false
		}
	}
	return true
}

// send queues t's command on pp, under the pipe lock, which it releases;
// it writes what is queued unless a write is in progress.
func (pp *pipe) send(t *Turn, now time.Time) {
	ps := &pp.pool.pipes
	t.p = pp
	n := 1 + len(t.sql)
	pp.out = append(pp.out, byte(n), byte(n>>8), byte(n>>16), 0, mysql.COM_QUERY)
	pp.out = append(pp.out, t.sql...)
	pp.queue = append(pp.queue, t)
	if len(pp.queue) == 1 {
		t.head, pp.headAt = true, now
		t.ready <- struct{}{}
	}
	if pp.writing {
		ps.mu.Unlock()
		return
	}
	pp.writing = true
	if len(pp.queue) > 1 {
		// Statements are in flight before this one: let the sessions
		// that are ready to run queue theirs too, then write them all
		// at once. (An idle pipe's first statement goes at once.)
		ps.mu.Unlock()
		runtime.Gosched()
		ps.mu.Lock()
	}
	for len(pp.out) > 0 && pp.err == nil {
		buf := pp.out
		pp.out, pp.spare = pp.spare[:0], nil
		ps.mu.Unlock()
		_, err := pp.bc.pkt.NetConn().Write(buf)
		ps.mu.Lock()
		pp.spare = buf[:0]
		if err != nil {
			pp.fail(pp.bc.errorf(KindLost, err, "sending a pipelined statement"))
		}
	}
	pp.out = pp.out[:0]
	pp.writing = false
	ps.mu.Unlock()
}

// fail records that pp's connection failed (under the pipe lock): it
// takes nothing more, and each statement still in flight gets err at its
// turn.
func (pp *pipe) fail(err error) {
	if pp.err == nil {
		pp.err = err
		pp.closed = true
		_ = pp.bc.pkt.Close() // a turn waiting for an answer gets the error now
	}
}

// Wait blocks until the statement has the turn: its answer is the next
// on the connection, which it returns ready to read. An error (a
// *Error) says that the connection failed before the answer came; Done
// must be called either way.
func (t *Turn) Wait() (*Conn, error) {
	<-t.ready
	pp := t.p
	ps := &pp.pool.pipes
	ps.mu.Lock()
	failed := pp.err
	ps.mu.Unlock()
	if failed != nil {
		cause := failed
		var be *Error
		if errors.As(cause, &be) && be.Err != nil {
			cause = be.Err
		}
		return nil, pp.bc.errorf(KindLost, cause, "the connection this statement was pipelined on failed before its answer came")
	}
	pp.bc.pkt.Seq = 1
	pp.bc.ClearAnswered()
	return pp.bc, nil
}

// Node is the node of the connection the statement went to.
func (t *Turn) Node() string { return t.p.pool.node }

// Done ends the statement's turn: its answer was read (err nil), or
// reading it failed (err set: the connection is lost for every statement
// behind it). keep false says the connection's state may no longer be
// the pipe's (the answer reported a session state change, or a
// transaction): it takes no new statements and closes when empty. The
// turn passes to the next statement; the last one out gives the
// connection back to its pool.
func (t *Turn) Done(err error, keep bool) {
	pp := t.p
	ps := &pp.pool.pipes
	ps.mu.Lock()
	t.done, t.sql = true, nil
	if err != nil {
		pp.fail(err)
	}
	if !keep {
		pp.closed = true
	}
	copy(pp.queue, pp.queue[1:])
	pp.queue[len(pp.queue)-1] = nil
	pp.queue = pp.queue[:len(pp.queue)-1]
	if len(pp.queue) > 0 {
		next := pp.queue[0]
		next.head, pp.headAt = true, time.Now()
		next.ready <- struct{}{}
		if next.killed {
			go pp.kill(next)
		}
		ps.mu.Unlock()
		return
	}
	list := ps.m[pp.key]
	for i, q := range list {
		if q == pp {
			list[i] = list[len(list)-1]
			list[len(list)-1] = nil
			list = list[:len(list)-1]
			break
		}
	}
	if len(list) == 0 {
		delete(ps.m, pp.key)
	} else {
		ps.m[pp.key] = list
	}
	ps.mu.Unlock()
	switch {
	case pp.err != nil:
		pp.bc.MarkLost() // its pool learns the server may be gone
	case pp.closed:
		pp.bc.MarkBroken()
	}
	pp.pool.Put(pp.bc)
}

// Kill interrupts the statement: now if it has the turn (the server runs
// it, or has run it), else when it gets the turn. The server is asked, on
// a connection of its own, which query of the connection's thread has the
// statement's text, and that query is killed (KILL QUERY ID). No other
// statement in flight has that text (see takes), so none other is hit.
// One that has ended is not killed.
func (t *Turn) Kill() {
	pp := t.p
	ps := &pp.pool.pipes
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if t.done || t.killed {
		return
	}
	t.killed = true
	if t.head {
		go pp.kill(t)
	}
}

// kill finds t's query on the server and kills it (KILL QUERY ID); it
// tries again for a while when the server has not started it yet (the
// command may still be on its way). Meanwhile the pipe takes no new
// statement, so none of the same text can join and be found instead.
func (pp *pipe) kill(t *Turn) {
	ps := &pp.pool.pipes
	ps.mu.Lock()
	if t.done || pp.killing {
		ps.mu.Unlock()
		return
	}
	pp.killing = true
	sql := string(t.sql)
	ps.mu.Unlock()
	defer func() {
		ps.mu.Lock()
		pp.killing = false
		ps.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := dial(ctx, pp.pool, DefaultFlavor)
	if err != nil {
		return
	}
	defer c.close()
	find := "SELECT QUERY_ID FROM information_schema.PROCESSLIST WHERE ID = " + itoa(int(pp.bc.threadID)) +
		" AND INFO_BINARY = _binary" + Quote(sql)
	for ctx.Err() == nil {
		r, err := c.Exec(find)
		if err != nil {
			return
		}
		ps.mu.Lock()
		done := t.done
		ps.mu.Unlock()
		if done {
			return
		}
		if len(r.Rows) > 0 && len(r.Rows[0]) > 0 && r.Rows[0][0] != nil {
			if id, err := strconv.ParseUint(*r.Rows[0][0], 10, 64); err == nil && id > 0 {
				_, _ = c.Exec("KILL QUERY ID " + strconv.FormatUint(id, 10))
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pipelines counts the pool's pipelined connections now.
func (p *Pool) pipelines() int64 {
	ps := &p.pipes
	ps.mu.Lock()
	defer ps.mu.Unlock()
	n := 0
	for _, list := range ps.m {
		n += len(list)
	}
	return int64(n)
}
