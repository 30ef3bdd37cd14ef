// Package hold pauses the statements that touch some tables while their
// layout is switched (the cut-over of an online reshard, proxy/reshard),
// and tells when the transactions already using them have ended.
//
// Each session keeps a Mark: whether it is in a transaction, and an epoch
// counting the transactions it has ended. When a Gate closes, every
// session then in a transaction is taken to have touched the tables (a
// superset: keyshard does not track which tables a transaction used): its
// statements pass the gate until its transaction ends, and Drained waits
// for that. Every other statement that touches the tables waits in Wait
// until the gate opens again, then is planned anew under the layout
// swapped in meanwhile. So no statement runs with the old layout once the
// new one serves, and a transaction never waits for itself.
//
// It imports nothing of keyshard's.
package hold

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Mark is a session's state as a gate sees it: busy (a statement runs, or
// a transaction is open) or not, and an epoch counting the times it
// became idle. Its zero value is an idle session.
type Mark struct {
	v atomic.Uint64 // epoch<<1 | busy
}

// Set records whether the session is busy: true before each statement
// (before it looks at the gate), then, after it, whether a transaction is
// still open; becoming idle advances the epoch. It costs a load when
// nothing changed.
func (m *Mark) Set(inTx bool) {
	v := m.v.Load()
	switch {
	case inTx && v&1 == 0:
		m.v.Store(v | 1)
	case !inTx && v&1 == 1:
		m.v.Store((v>>1 + 1) << 1)
	}
}

// state is the epoch and whether the session is in a transaction.
func (m *Mark) state() (epoch uint64, inTx bool) {
	v := m.v.Load()
	return v >> 1, v&1 == 1
}

// Gate holds the statements that touch its tables.
//
// It is closed in two steps, so that no statement slips between them:
// New makes it and the owner publishes it where sessions look (an atomic
// pointer), then Arm reads every session's Mark. A session marks itself
// busy, then looks for a gate (both atomic): either Arm sees it busy (it
// is waited for, and passes), or the session sees the gate (and waits).
type Gate struct {
	tables map[string]bool  // "db.table", lower case
	wait   map[*Mark]uint64 // sessions busy at Arm: their epoch then
	armed  chan struct{}    // closed by Arm: wait is complete
	open   chan struct{}    // closed by Open
	opened atomic.Bool
	once   sync.Once
	held   atomic.Int64 // statements waiting now
	since  time.Time
}

// New makes a gate for tables ("db.table"): publish it, then Arm it.
func New(tables []string) *Gate {
	g := &Gate{tables: map[string]bool{}, wait: map[*Mark]uint64{}, armed: make(chan struct{}), open: make(chan struct{}), since: time.Now()}
	for _, t := range tables {
		g.tables[strings.ToLower(t)] = true
	}
	return g
}

// Arm takes the marks of every session: those busy now are waited for by
// Drained, and their statements pass.
func (g *Gate) Arm(marks []*Mark) {
	for _, m := range marks {
		if e, busy := m.state(); busy {
			g.wait[m] = e
		}
	}
	close(g.armed)
}

// Close is New and Arm at once, for a gate no session can see before it
// is armed (tests, a data plane without sessions).
func Close(tables []string, marks []*Mark) *Gate {
	g := New(tables)
	g.Arm(marks)
	return g
}

// Touches says whether db.table is held.
func (g *Gate) Touches(db, table string) bool {
	if len(g.tables) == 0 {
		return false
	}
	return g.tables[strings.ToLower(db)+"."+strings.ToLower(table)]
}

// Passes says whether the session of m may go on with the layout it has:
// the gate is open, or its transaction was open when the gate closed and
// still is.
func (g *Gate) Passes(m *Mark) bool {
	if g.opened.Load() {
		return true
	}
	<-g.armed // between New and Arm: microseconds
	e0, ok := g.wait[m]
	if !ok {
		return false
	}
	e, in := m.state()
	return in && e == e0
}

// ErrTimeout is Wait's error when the gate stays closed past its bound.
var ErrTimeout = errors.New("hold: the tables stayed held past the bound")

// Wait blocks until the gate opens (nil), ctx ends, or max passes.
func (g *Gate) Wait(ctx context.Context, max time.Duration) error {
	g.held.Add(1)
	defer g.held.Add(-1)
	t := time.NewTimer(max)
	defer t.Stop()
	select {
	case <-g.open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return ErrTimeout
	}
}

// Opened says Open was called.
func (g *Gate) Opened() bool { return g.opened.Load() }

// Held is how many statements wait now.
func (g *Gate) Held() int64 { return g.held.Load() }

// Since is when the gate closed.
func (g *Gate) Since() time.Time { return g.since }

// Drained waits until every transaction open when the gate closed has
// ended (nil), or ctx ends (its error: the caller opens the gate and
// tries again later). It polls: a cut-over is rare, a session's statement
// path must not pay for it.
func (g *Gate) Drained(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if g.Busy() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Busy is how many transactions open at Close are still open.
func (g *Gate) Busy() int {
	<-g.armed
	busy := 0
	for m, e0 := range g.wait {
		if e, in := m.state(); in && e == e0 {
			busy++
		}
	}
	return busy
}

// Open lets every held statement go (idempotent).
func (g *Gate) Open() {
	g.once.Do(func() {
		g.opened.Store(true)
		close(g.open)
	})
}
