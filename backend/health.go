package backend

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Role is a backend's place in its node.
type Role uint8

// Backend roles.
const (
	RoleMaster Role = iota
	RoleReplica
)

func (r Role) String() string {
	if r == RoleReplica {
		return "slave" // kingshard's word, as in ks.yaml
	}
	return "master"
}

// Health is a backend's state as its checker last saw it.
type Health int32

// Health states.
const (
	Up      Health = iota
	Down           // checks failed for down_after_noalive: no statement is sent to it
	Lagging        // a replica behind by more than max_replication_lag: no reads
)

func (h Health) String() string {
	switch h {
	case Down:
		return "down"
	case Lagging:
		return "lagging"
	}
	return "up"
}

// health is the part of a Pool its checker maintains.
type health struct {
	state     atomic.Int32
	lag       atomic.Int64 // replication lag in seconds; -1 unknown (replication stopped), 0 for a master
	failSince atomic.Int64 // unix nanos of the first failed check in a row; 0 when the last check passed
	fails     atomic.Int32 // failed checks in a row
	lastErr   atomic.Pointer[string]
	adminDown atomic.Bool // taken down by an operator: stays down until put up
	// watched: a health checker runs for the server (it brings back a
	// replica connLost took out); confirming: connLost's check runs.
	watched, confirming atomic.Bool
	changedAt           atomic.Int64 // unix nanos of the last state change (or the pool's start)
	// reached: keyshard has logged in to the server at least once since
	// the pool started (a check or a connection).
	reached atomic.Bool
}

// StateChange is a backend's state moving from one to another: by its
// health checks, a failed connection, or an operator (admin down/up).
type StateChange struct {
	Node, Addr string
	Role       Role
	From, To   Health
	Reason     string
	After      time.Duration // in the state it left
}

// StateHook is called on each state change of a backend (from the
// goroutine that saw it; keep it short). One hook serves every pool:
// Options holds a pointer to it, so node options stay comparable.
type StateHook struct{ F func(StateChange) }

// setState moves the pool to st; it reports whether that was a change,
// which it tells the hook of (with reason).
func (p *Pool) setState(st Health, reason string) bool {
	from := Health(p.state.Swap(int32(st)))
	if from == st {
		return false
	}
	p.tell(from, st, reason)
	return true
}

// tell reports a change of the pool's state to the hook.
func (p *Pool) tell(from, to Health, reason string) {
	now := time.Now().UnixNano()
	prev := p.changedAt.Swap(now)
	if h := p.opts.OnState; h != nil && h.F != nil {
		h.F(StateChange{Node: p.node, Addr: p.addr, Role: p.opts.Role, From: from, To: to, Reason: reason, After: time.Duration(now - prev)})
	}
}

// Health returns the pool's state.
func (p *Pool) Health() Health {
	if p.adminDown.Load() {
		return Down
	}
	return Health(p.state.Load())
}

// Readable reports whether reads may be sent to the pool.
func (p *Pool) Readable() bool { return p.Health() == Up }

// Lag is the replication lag in seconds the last check saw (-1: unknown,
// replication not running).
func (p *Pool) Lag() int64 { return p.lag.Load() }

// LastCheckError is the error of the last failed check ("" after a pass).
func (p *Pool) LastCheckError() string {
	if e := p.lastErr.Load(); e != nil {
		return *e
	}
	return ""
}

// SetAdminDown takes the backend out of service (true) or puts it back
// (false); when down, its idle connections are closed.
func (p *Pool) SetAdminDown(down bool) {
	if p.adminDown.Swap(down) != down {
		st := Health(p.state.Load())
		if down {
			p.tell(st, Down, "taken down by an operator (admin)")
		} else {
			p.tell(Down, st, "put up by an operator (admin)")
		}
	}
	if down {
		p.dropIdle()
	}
}

// AdminDown reports whether an admin command took the backend down.
func (p *Pool) AdminDown() bool { return p.adminDown.Load() }

// downError is the error for a statement sent to a backend that is down.
func (p *Pool) downError() *Error {
	msg := p.opts.Role.String() + " is down"
	switch {
	case p.adminDown.Load():
		msg += " (taken down by an admin command)"
	case p.failSince.Load() != 0:
		since := time.Since(time.Unix(0, p.failSince.Load())).Round(time.Millisecond)
		msg += " (health checks failing for " + since.String()
		if e := p.LastCheckError(); e != "" {
			msg += ": " + e
		}
		msg += ")"
	case p.LastCheckError() != "":
		msg += " (" + p.LastCheckError() + ")"
	}
	return &Error{Kind: KindDown, Node: p.node, Addr: p.addr, Role: p.opts.Role, Msg: msg}
}

// runChecker checks p every interval until stop closes: a ping over a
// connection of its own and, for a replica, its replication lag.
func runChecker(p *Pool, o NodeOptions, stop chan struct{}) {
	timeout := o.HealthTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	var c *Conn
	defer func() {
		if c != nil {
			c.close()
		}
	}()
	t := time.NewTicker(o.HealthInterval)
	defer t.Stop()
	for {
		lag, err := probe(p, &c, timeout)
		p.checked(lag, err, o)
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// probe runs one check on *c, dialing it first when needed; a failed
// check closes it.
func probe(p *Pool, c **Conn, timeout time.Duration) (lag int64, err error) {
	if *c == nil {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		*c, err = dial(ctx, p, DefaultFlavor)
		cancel()
		if err != nil {
			*c = nil
			return 0, err
		}
	}
	cn := *c
	defer func() {
		if err != nil {
			cn.close()
			*c = nil
		}
	}()
	_ = cn.SetDeadline(time.Now().Add(timeout))
	defer func() { _ = cn.SetDeadline(time.Time{}) }()
	if p.opts.Role != RoleReplica {
		return 0, cn.Ping()
	}
	r, err := cn.Exec("SHOW SLAVE STATUS")
	if err != nil {
		var me *mysql.MyError
		if errors.As(err, &me) {
			// The server answers but will not tell its lag (the account
			// lacks REPLICA MONITOR, say): alive, lag unknown.
			return -1, nil
		}
		return 0, err
	}
	return slaveLag(r), nil
}

// slaveLag reads Seconds_Behind_Master from SHOW SLAVE STATUS: -1 when it
// is NULL (a replication thread stopped) or the server replicates nothing.
func slaveLag(r *Result) int64 {
	if len(r.Rows) == 0 {
		return -1
	}
	for i, col := range r.Columns {
		if !strings.EqualFold(col, "Seconds_Behind_Master") {
			continue
		}
		if v := r.Rows[0][i]; v != nil {
			if n, err := strconv.ParseInt(*v, 10, 64); err == nil {
				return n
			}
		}
		return -1
	}
	return -1
}

// takeOut marks the pool down after one of its connections failed and a
// new one could not log in (see connLost), err being the latter's error.
// Its next passing health check brings it back.
func (p *Pool) takeOut(err error) {
	s := "a connection failed and a new one could not log in: " + checkMsg(err)
	p.lastErr.Store(&s)
	if p.setState(Down, s) {
		p.dropIdle()
	}
}

// checkMsg is err as the pool's down error quotes it: not "node n (addr):
// ..." again.
func checkMsg(err error) string {
	s := err.Error()
	var be *Error
	if errors.As(err, &be) {
		s = be.Msg
		if be.Err != nil {
			s += ": " + be.Err.Error()
		}
	}
	return s
}

// checked records a check's outcome.
func (p *Pool) checked(lag int64, err error, o NodeOptions) {
	now := time.Now().UnixNano()
	if err != nil {
		s := checkMsg(err)
		p.lastErr.Store(&s)
		p.failSince.CompareAndSwap(0, now)
		// Down after down_after_noalive of failures, and never on a single
		// failed check: a busy server may miss one. But down at once when
		// the server refuses keyshard's own login (it answers, and will
		// refuse every connection until its account or the node's config
		// changes) or was never reached since the pool started (there is
		// no busy server to wait for: it is not ready).
		failing := time.Duration(now - p.failSince.Load())
		at := p.fails.Add(1) >= 2 && failing >= o.DownAfter
		if KindOf(err) == KindAuth || !p.reached.Load() {
			at = true
		}
		if at && p.setState(Down, "health checks failing for "+failing.Round(time.Millisecond).String()+": "+s) {
			p.dropIdle()
		}
		return
	}
	p.lastErr.Store(nil)
	p.failSince.Store(0)
	p.fails.Store(0)
	p.lag.Store(lag)
	st, why := Up, "health check passed"
	if o.MaxLag > 0 && (lag < 0 || time.Duration(lag)*time.Second > o.MaxLag) {
		st, why = Lagging, "replication lag "+strconv.FormatInt(lag, 10)+" s (-1: replication not running) over max_replication_lag "+o.MaxLag.String()
	}
	p.setState(st, why)
}

// dropIdle closes the pool's idle connections (the backend went down:
// they are most likely dead).
func (p *Pool) dropIdle() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		p.closeConn(c, false)
	}
}
