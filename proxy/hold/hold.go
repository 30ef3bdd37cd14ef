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

// Mark is a session's transaction state, read by the gate's owner from
// another goroutine. Its zero value is a session outside a transaction.
type Mark struct {
	v atomic.Uint64 // epoch<<1 | in a transaction
}

// Set records, after each statement, whether the session is now in a
// transaction; leaving one advances the epoch. It costs a load when
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
type Gate struct {
	tables map[string]bool  // "db.table", lower case
	wait   map[*Mark]uint64 // sessions in a transaction at Close: their epoch then
	open   chan struct{}    // closed by Open
	opened atomic.Bool
	once   sync.Once
	held   atomic.Int64 // statements waiting now
	since  time.Time
}

// Close makes a gate for tables ("db.table"), given the marks of every
// session (those in a transaction now are waited for by Drained).
func Close(tables []string, marks []*Mark) *Gate {
	g := &Gate{tables: map[string]bool{}, wait: map[*Mark]uint64{}, open: make(chan struct{}), since: time.Now()}
	for _, t := range tables {
		g.tables[strings.ToLower(t)] = true
	}
	for _, m := range marks {
		if e, in := m.state(); in {
			g.wait[m] = e
		}
	}
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
