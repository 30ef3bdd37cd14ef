package proxy

import (
	"time"

	"github.com/keyshard/keyshard/proxy/hold"
	"github.com/keyshard/keyshard/router"
)

// heldWaitMargin is how much longer than reshard_cutover_timeout a
// statement waits for a layout switch: the cut-over gives up at the
// timeout (its rename and swap are bounded by it too), so reaching it
// means the switch is stuck.
const heldWaitMargin = 25 * time.Second

// held is a layout switch's hold as the data plane keeps it: the gate,
// and the configuration that ran when it closed. After a switch it stays
// (opened) so that a session still on an older configuration, in a
// transaction begun during the hold, takes the new one before it touches
// the tables.
type held struct {
	gate   *hold.Gate
	before int64 // the revision of the configuration at the hold
}

// heldStatement makes a statement that touches a table held for a layout
// switch (an online reshard's cut-over: proxy/hold, proxy/reshard) wait
// until the new layout serves, unless the session was busy (a statement
// running, a transaction open) when the hold began: it goes on, and the
// switch waits for it to be idle. After a wait, or after a switch when
// the session still runs an older configuration, the session takes the
// new layout and the caller plans the statement again (replan).
func heldStatement(s *Session, pl *router.Plan) (replan bool, err error) {
	if pl == nil {
		return false, nil
	}
	return heldTables(s, pl.Tables(), false)
}

// heldTables is heldStatement for a statement on tables; all: the
// statement may touch any table (a node hint sends it as it is), so it
// waits whenever tables are held.
func heldTables(s *Session, tables []*router.TableRule, all bool) (replan bool, err error) {
	h := s.srv.held.Load()
	if h == nil {
		return false, nil
	}
	g := h.gate
	if g.Opened() {
		if s.snap.rev > h.before || !all && !touches(g, tables) {
			return false, nil
		}
		return true, takeNewLayout(s)
	}
	if g.Passes(&s.mark) || !all && !touches(g, tables) {
		return false, nil
	}
	max := s.snap.cfg.ReshardCutoverTimeout.D() + heldWaitMargin
	if err := g.Wait(s.srv.ctx, max); err != nil {
		return false, newErr(errHeld, "keyshard: the statement waited %s for the layout switch of an online reshard, which did not end; "+
			"see SHOW RESHARD STATUS (nothing ran)", max)
	}
	return true, takeNewLayout(s)
}

func touches(g *hold.Gate, tables []*router.TableRule) bool {
	for _, t := range tables {
		if g.Touches(t.DB, t.Table) {
			return true
		}
	}
	return false
}

// takeNewLayout rebinds the session to the running configuration, even in
// a transaction (its tables' layout changed; the node its transaction is
// on must still be there).
func takeNewLayout(s *Session) error {
	snap := s.srv.snap.Load()
	if snap == s.snap {
		return nil
	}
	if !snap.keeps(s.user, s.lease.Pinned()) {
		return newErr(errHeld, "keyshard: the layout switch of an online reshard removed the node this session's "+
			"transaction is on; the statement did not run: roll back and start again")
	}
	s.rebind(snap)
	return nil
}

// hold closes a gate over tables ("db.table") for a layout switch: every
// session's statements on them wait until unhold, except those of the
// sessions busy now, which the gate's Drained waits for.
func (srv *Server) hold(tables []string) *hold.Gate {
	g := hold.New(tables)
	srv.held.Store(&held{gate: g, before: srv.snap.Load().rev}) // before the marks are read: see hold.Gate
	var marks []*hold.Mark
	srv.sessions.Range(func(_, v any) bool {
		marks = append(marks, &v.(*Session).mark)
		return true
	})
	g.Arm(marks)
	return g
}

// unhold opens g. Without a switch it is forgotten; after one it stays
// (see held).
func (srv *Server) unhold(g *hold.Gate) {
	h := srv.held.Load()
	if h != nil && h.gate == g && srv.snap.Load().rev == h.before {
		srv.held.CompareAndSwap(h, nil)
	}
	g.Open()
}
