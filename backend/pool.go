package backend

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Options configure one pool. Zero values get the defaults in withDefaults.
type Options struct {
	User, Password string
	// NativeKey, for an account whose password keyshard does not know,
	// is SHA1(password): enough for a mysql_native_password login (see
	// NativeToken), not for any other plugin. Used when Password is "";
	// empty but not nil: an account without a password.
	NativeKey   []byte
	DB          string // database selected at connect (may be empty)
	CollationID uint8  // handshake collation
	Charset     string // charset/collation the handshake sets: the base State
	Collation   string
	BaseState   *State // shared base state object (optional): sessions in it need no sync

	MaxConns       int           // hard cap on open connections
	MinIdle        int           // warm set kept open
	WaitTimeout    time.Duration // Get waits at most this long for a free slot
	IdleTimeout    time.Duration // idle connections above MinIdle close after this
	MaxLifetime    time.Duration // connections are retired after this
	ValidateAfter  time.Duration // connections idle longer are pinged before use
	ConnectTimeout time.Duration // dial + handshake
	// Silence: a connection waiting this long for a byte of an answer
	// checks that its server lives (see watchConn); 0: never.
	Silence     time.Duration
	NoDelay     bool
	ReadBuffer  int
	WriteBuffer int
	MaxPacket   int
	StmtCache   int // prepared statements cached per connection (LRU)
	// PipelineDepth: statements in flight at most on one pipelined
	// connection (see Pipeline); below 2, no pipelining.
	PipelineDepth int
	// Refs counts the client statements of each text; cached statements
	// no client holds are closed (nil: only the LRU bounds them).
	Refs *StmtRefs
	Role Role
	// OnState is told of each state change of the backend (nil: none).
	OnState *StateHook
}

func (o *Options) withDefaults() {
	if o.MaxConns <= 0 {
		o.MaxConns = 16
	}
	if o.StmtCache <= 0 {
		o.StmtCache = 64
	}
	if o.MinIdle > o.MaxConns {
		o.MinIdle = o.MaxConns
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = 5 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = time.Minute
	}
	if o.MaxLifetime <= 0 {
		o.MaxLifetime = time.Hour
	}
	if o.ValidateAfter <= 0 {
		o.ValidateAfter = 2 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 3 * time.Second
	}
	if o.ReadBuffer <= 0 {
		o.ReadBuffer = 16 << 10
	}
	if o.WriteBuffer <= 0 {
		o.WriteBuffer = 16 << 10
	}
	if o.MaxPacket <= 0 {
		o.MaxPacket = 64 << 20
	}
	if o.Charset == "" {
		o.Charset = "utf8mb4"
	}
	if o.CollationID == 0 {
		o.CollationID = 45 // utf8mb4_general_ci
	}
}

// PoolStats is a snapshot of a pool's counters.
type PoolStats struct {
	Open, InUse, Idle int64
	Waits             int64         // Get calls that had to wait
	WaitTime          time.Duration // total time spent waiting
	Timeouts          int64         // Get calls that gave up
	DialErrors        int64
	Dials             int64
	Closed            int64 // connections closed (broken, expired, idle)
	// Statements prepared on the backend by keyshard, and those still
	// open there (closed on cache eviction or with their connection).
	StmtPrepares, StmtsOpen int64
	// Pipelines: pipelined connections now; Pipelined: statements that
	// joined one with others in flight (see Pipeline).
	Pipelines, Pipelined int64
}

// Add sums two pools' stats.
func (a PoolStats) Add(b PoolStats) PoolStats {
	return PoolStats{Open: a.Open + b.Open, InUse: a.InUse + b.InUse, Idle: a.Idle + b.Idle, Waits: a.Waits + b.Waits,
		WaitTime: a.WaitTime + b.WaitTime, Timeouts: a.Timeouts + b.Timeouts, DialErrors: a.DialErrors + b.DialErrors,
		Dials: a.Dials + b.Dials, Closed: a.Closed + b.Closed, StmtPrepares: a.StmtPrepares + b.StmtPrepares, StmtsOpen: a.StmtsOpen + b.StmtsOpen,
		Pipelines: a.Pipelines + b.Pipelines, Pipelined: a.Pipelined + b.Pipelined}
}

// Pool is a bounded pool of connections to one backend server.
//
// Concurrency: a slot in sem is held by every connection in use (or being
// dialed), so at most MaxConns are in use. Get takes a slot (waiting up to
// WaitTimeout), then reuses an idle connection or dials; Put frees the slot.
// Put closes instead of idling when more than MaxConns are open, so the open
// count stays bounded too. The idle stack is guarded by a mutex held only for
// a push or pop.
type Pool struct {
	node string
	addr string
	opts Options

	baseState *State

	sem chan struct{}

	mu      sync.Mutex
	idle    []*Conn // LIFO: hot connections stay hot, cold ones age out
	dialing int64   // Get's dials in flight (under mu)

	closed atomic.Bool
	stop   chan struct{}
	wg     sync.WaitGroup

	open, inUse, waits, waitNanos, timeouts, dialErrors, dials, closedN atomic.Int64
	stmtPrepares, stmtsOpen                                             atomic.Int64

	// health and stmts are shared with the pool a view pool (Node.As)
	// stands for: one state and one count per server.
	*health
	live  liveness
	stmts *Latency // statements run through Observe: count, errors, latency
	// standsFor: the base node's pool a view's pool (Node.As) reaches the
	// same server as; nil for others.
	standsFor *Pool

	version   atomic.Pointer[string] // the server's version, as its last handshake said
	serverExt atomic.Uint32          // MariaDB extended capabilities it offers
	newStatus atomic.Uint32          // 1<<16 | the status a new session starts with (see SessionStatus)
	globals   atomic.Int64           // generation of the server's global variables (see GlobalsChanged)

	pipes     pipes        // pipelined connections (see Pipeline)
	pipelined atomic.Int64 // statements that joined a pipe (PipelineStats)
}

// GlobalsChanged records that the server's global variables changed (a
// SET GLOBAL that keyshard ran there). A new session on the server takes
// its session variables from the globals; a pooled connection keeps the
// values of its own start, so each idle connection is reset once before
// it is handed out again.
func (p *Pool) GlobalsChanged() {
	p.globals.Add(1)
	p.newStatus.Store(0) // autocommit may have changed: learned again
}

// SessionStatus is the server status a new session on the server starts
// with (autocommit per the server's global setting...), as the last login
// or reset said; ok is false when none did since the pool began or the
// globals last changed (see LearnSessionStatus).
func (p *Pool) SessionStatus() (status uint16, ok bool) {
	v := p.newStatus.Load()
	return uint16(v), v != 0
}

// noteSessionStatus records the status c got from a login or a reset (a
// new session's), unless the globals changed since c's session began.
func (p *Pool) noteSessionStatus(c *Conn) {
	if c.globals == p.globals.Load() {
		p.newStatus.Store(1<<16 | uint32(c.Status))
	}
}

// LearnSessionStatus is SessionStatus, taking and giving back a connection
// to learn it when it is not known. ok is false when the server cannot be
// reached.
func (p *Pool) LearnSessionStatus(ctx context.Context) (status uint16, ok bool) {
	if st, ok := p.SessionStatus(); ok {
		return st, true
	}
	c, err := p.Get(ctx, DefaultFlavor)
	if err != nil {
		return 0, false
	}
	p.Put(c)
	return p.SessionStatus()
}

// ServerExt are the MariaDB extended capabilities the server offered in
// its last handshake with the pool (0 for MySQL, or before any).
func (p *Pool) ServerExt() uint32 { return p.serverExt.Load() }

// noteVersion records the version a handshake announced and returns it
// (the pool's copy: no allocation per dial while it stays the same).
func (p *Pool) noteVersion(v []byte) string {
	if cur := p.version.Load(); cur != nil && *cur == string(v) {
		return *cur
	}
	s := string(v)
	p.version.Store(&s)
	return s
}

// ServerVersion is the version the server announced in its last
// handshake with the pool ("" before any).
func (p *Pool) ServerVersion() string {
	if v := p.version.Load(); v != nil {
		return *v
	}
	return ""
}

// Probe learns the server's version, connecting once if no connection was
// made yet.
func (p *Pool) Probe(ctx context.Context) (string, error) {
	if v := p.ServerVersion(); v != "" {
		return v, nil
	}
	c, err := p.Get(ctx, DefaultFlavor)
	if err != nil {
		return "", err
	}
	p.Put(c)
	return p.ServerVersion(), nil
}

// NewPool creates a pool and starts its maintenance goroutine, which opens
// the warm set in the background. It never fails: a dead backend shows up
// as errors from Get.
func NewPool(node, addr string, opts Options) *Pool {
	return newPool(node, addr, opts, nil)
}

// newPool is NewPool for a view's pool when standsFor is set: it shares
// standsFor's health state and statement counts.
func newPool(node, addr string, opts Options, standsFor *Pool) *Pool {
	opts.withDefaults()
	p := &Pool{
		node:      node,
		addr:      addr,
		opts:      opts,
		baseState: opts.BaseState,
		sem:       make(chan struct{}, opts.MaxConns),
		stop:      make(chan struct{}),
		health:    &health{},
		stmts:     &Latency{},
		standsFor: standsFor,
	}
	p.pipes.seed = maphash.MakeSeed()
	if standsFor != nil {
		p.health, p.stmts = standsFor.health, standsFor.stmts
	} else {
		p.changedAt.Store(time.Now().UnixNano())
	}
	if p.baseState == nil {
		p.baseState = NewState(opts.Charset, opts.Collation)
	}
	p.wg.Add(1)
	go p.maintain()
	return p
}

// Node is the node name this pool serves.
func (p *Pool) Node() string { return p.node }

// Addr is the backend address.
func (p *Pool) Addr() string { return p.addr }

// Role is the pool's role in its node.
func (p *Pool) Role() Role { return p.opts.Role }

// InUse is the number of connections in use: statements in flight.
func (p *Pool) InUse() int64 { return p.inUse.Load() }

// Observe records one statement run on the pool: its time and whether it
// failed.
func (p *Pool) Observe(d time.Duration, failed bool) { p.stmts.Observe(d, failed) }

// Statements returns the statements recorded by Observe.
func (p *Pool) Statements() *Latency { return p.stmts }

// Options returns the pool's effective options.
func (p *Pool) Options() Options { return p.opts }

// BaseState is the session state of a freshly opened connection.
func (p *Pool) BaseState() *State { return p.baseState }

// Get returns a connection of flavor f, waiting up to the pool's
// WaitTimeout (or ctx) for a free slot. An idle connection of another
// flavor is closed to make room when the pool is at its bound.
func (p *Pool) Get(ctx context.Context, f Flavor) (*Conn, error) {
	return p.GetBy(ctx, time.Time{}, f)
}

// GetBy is Get for a statement with a time limit: a wait for a free
// connection gives up at deadline (zero: only at pool_wait_timeout).
func (p *Pool) GetBy(ctx context.Context, deadline time.Time, f Flavor) (*Conn, error) {
	if p.closed.Load() {
		return nil, &Error{Kind: KindClosed, Node: p.node, Addr: p.addr, Role: p.opts.Role, Msg: "pool is closed"}
	}
	if p.Health() == Down {
		return nil, p.downError()
	}
	select {
	case p.sem <- struct{}{}:
	default:
		if err := p.wait(ctx, deadline); err != nil {
			return nil, err
		}
	}
	for {
		c := p.popIdle(f)
		if c == nil {
			break
		}
		now := time.Now()
		if now.Sub(c.created) > p.opts.MaxLifetime {
			p.closeConn(c, false)
			continue
		}
		if c.globals != p.globals.Load() {
			_ = c.SetDeadline(now.Add(p.opts.ConnectTimeout))
			err := c.Reset()
			_ = c.SetDeadline(time.Time{})
			if err != nil {
				p.closeConn(c, false)
				continue
			}
		} else if c.check || now.Sub(c.lastUsed) > p.opts.ValidateAfter {
			_ = c.SetDeadline(now.Add(p.opts.ConnectTimeout))
			err := c.Ping()
			_ = c.SetDeadline(time.Time{})
			if err != nil {
				p.closeConn(c, false)
				if timedOut(err) {
					// The server does not answer: its other idle
					// connections would not either, each after a timeout.
					p.dropIdle()
					<-p.sem
					return nil, &Error{Kind: KindLost, Node: p.node, Addr: p.addr, Role: p.opts.Role,
						Msg: "an idle connection did not answer a ping within connect_timeout " + p.opts.ConnectTimeout.String(), Err: err}
				}
				continue
			}
			c.check = false
		}
		if c.closeUnheld(); c.broken { // sent with the connection's next command
			p.closeConn(c, false)
			continue
		}
		p.inUse.Add(1)
		return c, nil
	}
	// No idle connection fits: make room for a new one. The idle ones that
	// hold the places are of other flavors; the coldest go. Counted under
	// mu with the dials in flight, so that concurrent dials never take the
	// open count past MaxConns.
	var evict []*Conn
	p.mu.Lock()
	for p.open.Load()+p.dialing-int64(len(evict)) >= int64(p.opts.MaxConns) && len(p.idle) > 0 {
		c := p.idle[0]
		n := copy(p.idle, p.idle[1:])
		p.idle[n] = nil
		p.idle = p.idle[:n]
		evict = append(evict, c)
	}
	p.dialing++
	p.mu.Unlock()
	for _, c := range evict {
		p.closeConn(c, false)
	}
	c, err := p.dialCounted(ctx, f)
	if err != nil {
		<-p.sem
		return nil, err
	}
	p.inUse.Add(1)
	return c, nil
}

func (p *Pool) wait(ctx context.Context, deadline time.Time) error {
	p.waits.Add(1)
	start := time.Now()
	d := p.opts.WaitTimeout
	if !deadline.IsZero() && deadline.Sub(start) < d {
		d = max(deadline.Sub(start), 0)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case p.sem <- struct{}{}:
		p.waitNanos.Add(int64(time.Since(start)))
		return nil
	case <-t.C:
		p.waitNanos.Add(int64(time.Since(start)))
		p.timeouts.Add(1)
		return &Error{Kind: KindPoolTimeout, Node: p.node, Addr: p.addr, Role: p.opts.Role,
			Msg: "no backend connection free within pool_wait_timeout " + p.opts.WaitTimeout.String() +
				" (max_conns_limit " + itoa(p.opts.MaxConns) + " in use)"}
	case <-ctx.Done():
		p.waitNanos.Add(int64(time.Since(start)))
		return &Error{Kind: KindPoolTimeout, Node: p.node, Addr: p.addr, Role: p.opts.Role, Msg: "waiting for a backend connection", Err: ctx.Err()}
	case <-p.stop:
		return &Error{Kind: KindClosed, Node: p.node, Addr: p.addr, Role: p.opts.Role, Msg: "pool is closed"}
	}
}

// dialCounted dials for a place reserved with dialing++ under mu: the
// place turns into an open connection (or is given up) in one step under
// mu, so that open+dialing never counts it twice.
func (p *Pool) dialCounted(ctx context.Context, f Flavor) (c *Conn, err error) {
	defer func() {
		p.mu.Lock()
		p.dialing--
		if err == nil {
			p.open.Add(1)
		}
		p.mu.Unlock()
	}()
	p.dials.Add(1)
	if c, err = dial(ctx, p, f); err != nil {
		p.dialErrors.Add(1)
		var me *mysql.MyError
		if !errors.As(err, &me) && ctx.Err() == nil {
			// Refused, timed out, cut: not a server that answers with
			// an error (too many connections, access denied).
			p.connLost()
		}
	}
	return c, err
}

// popIdle takes the most recently used idle connection that fits f. A
// session with a database prefers one that has one too, keeping those that
// never had one for the sessions without.
func (p *Pool) popIdle(f Flavor) *Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	pick := -1
	for i := len(p.idle) - 1; i >= 0; i-- {
		if c := p.idle[i]; c.fits(f) {
			if f.NoDB || c.db != "" {
				pick = i
				break
			}
			if pick < 0 {
				pick = i
			}
		}
	}
	if pick < 0 {
		return nil
	}
	c := p.idle[pick]
	n := len(p.idle) - 1
	copy(p.idle[pick:], p.idle[pick+1:])
	p.idle[n] = nil
	p.idle = p.idle[:n]
	return c
}

// Put returns a connection obtained from Get. A broken connection, or one
// the pool no longer wants, is closed and its slot freed.
func (p *Pool) Put(c *Conn) {
	p.inUse.Add(-1)
	if c.broken || p.closed.Load() {
		p.closeConn(c, true)
		return
	}
	if p.open.Load() > int64(p.opts.MaxConns) {
		p.closeConn(c, true)
		return
	}
	if c.closeUnheld() > 0 {
		// Sent now: the server drops them while the connection idles.
		if err := c.pkt.Flush(); err != nil || c.broken {
			p.closeConn(c, true)
			return
		}
	}
	c.lastUsed = time.Now()
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
	<-p.sem
}

// Discard closes a connection obtained from Get instead of returning it.
func (p *Pool) Discard(c *Conn) {
	p.inUse.Add(-1)
	p.closeConn(c, true)
}

// closeConn closes c; held says whether the caller holds a slot to release
// with it (idle connections hold none).
func (p *Pool) closeConn(c *Conn, held bool) {
	c.close()
	p.open.Add(-1)
	p.closedN.Add(1)
	if held {
		<-p.sem
	}
	if c.failed {
		p.connLost()
	}
}

// connLost learns that one of the pool's connections, or a dial, failed at
// the network level: the server may be gone (killed, restarted, frozen,
// unreachable). Its idle connections may be as dead, so each is pinged
// before its next use rather than handed to a statement that would fail
// on it. A replica's server is checked at once, in the background, when
// health checks run: one that does not let a new connection log in
// either leaves the read rotation now (down) instead of after the
// checks' down_after_noalive, and comes back with the first check that
// passes. (A master is left to its health checks: a write to one marked
// down fails at once, which down_after_noalive is there to delay.)
// Nothing here runs unless a connection failed.
func (p *Pool) connLost() {
	p.mu.Lock()
	for _, c := range p.idle {
		c.check = true
	}
	p.mu.Unlock()
	if p.opts.Role != RoleReplica || !p.watched.Load() || p.Health() == Down || !p.confirming.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer p.confirming.Store(false)
		if err := p.alive(); err != nil {
			p.takeOut(err)
		}
	}()
}

// timedOut reports whether err is a timeout (a deadline, a frozen server).
func timedOut(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// Stats returns a snapshot of the pool's counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	idle := len(p.idle)
	p.mu.Unlock()
	return PoolStats{
		Open: p.open.Load(), InUse: p.inUse.Load(), Idle: int64(idle),
		Waits: p.waits.Load(), WaitTime: time.Duration(p.waitNanos.Load()),
		Timeouts: p.timeouts.Load(), DialErrors: p.dialErrors.Load(),
		Dials: p.dials.Load(), Closed: p.closedN.Load(),
		StmtPrepares: p.stmtPrepares.Load(), StmtsOpen: p.stmtsOpen.Load(),
		Pipelines: p.pipelines(), Pipelined: p.pipelined.Load(),
	}
}

// maintain closes idle connections past IdleTimeout (above MinIdle) or
// MaxLifetime, and tops the idle set up to MinIdle.
func (p *Pool) maintain() {
	defer p.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	p.fill()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
			if p.standsFor != nil && p.standsFor.closed.Load() {
				// A view's pool for a replica its node dropped.
				go p.Close()
				return
			}
			p.reap()
			p.fill()
		}
	}
}

func (p *Pool) reap() {
	now := time.Now()
	var old []*Conn
	p.mu.Lock()
	keep := p.idle[:0]
	// idle[0] is the coldest; keep the newest MinIdle regardless of age.
	excess := len(p.idle) - p.opts.MinIdle
	for i, c := range p.idle {
		expired := now.Sub(c.created) > p.opts.MaxLifetime
		idleTooLong := i < excess && now.Sub(c.lastUsed) > p.opts.IdleTimeout
		if expired || idleTooLong {
			old = append(old, c)
			continue
		}
		keep = append(keep, c)
	}
	for i := len(keep); i < len(p.idle); i++ {
		p.idle[i] = nil
	}
	p.idle = keep
	p.mu.Unlock()
	for _, c := range old {
		p.closeConn(c, false)
	}
}

func (p *Pool) fill() {
	for !p.closed.Load() {
		select {
		case p.sem <- struct{}{}:
		default:
			return
		}
		p.mu.Lock()
		full := len(p.idle) >= p.opts.MinIdle || p.open.Load()+p.dialing >= int64(p.opts.MaxConns)
		if !full {
			p.dialing++
		}
		p.mu.Unlock()
		if full {
			<-p.sem
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.opts.ConnectTimeout)
		c, err := p.dialCounted(ctx, DefaultFlavor)
		cancel()
		if err != nil {
			<-p.sem
			return
		}
		c.lastUsed = time.Now()
		p.mu.Lock()
		p.idle = append(p.idle, c)
		p.mu.Unlock()
		<-p.sem
	}
}

// Close stops maintenance and closes idle connections. Connections in use
// are closed when they are returned.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	close(p.stop)
	p.wg.Wait()
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		c.close()
		p.open.Add(-1)
		p.closedN.Add(1)
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// Dial opens a connection of the caller's own to the pool's server: not
// counted by the pool, never pooled, closed with Conn.Close. For a
// session that must live as long as its owner wants, and no longer (the
// XA coordinator's liveness lock).
func (p *Pool) Dial(ctx context.Context) (*Conn, error) { return dial(ctx, p, DefaultFlavor) }

// KillQuery interrupts the statement running on the backend connection with
// the given thread id, over a fresh connection (the pool may be exhausted).
func (p *Pool) KillQuery(ctx context.Context, threadID uint32) error {
	c, err := dial(ctx, p, DefaultFlavor)
	if err != nil {
		return err
	}
	defer c.close()
	_, err = c.Exec("KILL QUERY " + itoa(int(threadID)))
	return err
}

// Query runs statement q of keyshard's own (a lookup in
// information_schema, a decision row) on a connection of the pool in its
// base state with autocommit on, so that it reads no old snapshot and
// commits at once. It waits for ctx's deadline, or 10 seconds.
func (p *Pool) Query(ctx context.Context, q string) (*Result, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	bc, err := p.Get(ctx, DefaultFlavor)
	if err != nil {
		return nil, err
	}
	dl, _ := ctx.Deadline()
	_ = bc.SetDeadline(dl)
	res, err := func() (*Result, error) {
		if err := bc.Sync("", bc.Multi(), true, p.BaseState()); err != nil {
			return nil, err
		}
		return bc.Exec(q)
	}()
	var me *mysql.MyError
	if err != nil && !errors.As(err, &me) || bc.SetDeadline(time.Time{}) != nil {
		bc.MarkBroken() // a server's error leaves the connection usable
	}
	p.Put(bc)
	return res, err
}
