package proxy

import (
	"time"

	"github.com/keyshard/keyshard/proxy/hold"
	"github.com/keyshard/keyshard/router"
)

// heldWaitMax bounds how long a statement waits for a layout switch: the
// cut-over gives up well before (reshard_cutover_timeout), so reaching it
// means the switch is stuck.
const heldWaitMax = 30 * time.Second

// heldStatement makes a statement that touches a table held for a layout
// switch (an online reshard's cut-over: proxy/hold, proxy/reshard) wait
// until the new layout serves, unless the session was busy (a statement
// running, a transaction open) when the hold began: it goes on, and the
// switch waits for it to be idle. After a wait the
// session takes the new layout and the caller plans the statement again
// (replan).
func heldStatement(s *Session, pl *router.Plan) (replan bool, err error) {
	g := s.srv.gate.Load()
	if g == nil || pl == nil || g.Passes(&s.mark) {
		return false, nil
	}
	touches := false
	for _, t := range pl.Tables() {
		if g.Touches(t.DB, t.Table) {
			touches = true
			break
		}
	}
	if !touches {
		return false, nil
	}
	if err := g.Wait(s.srv.ctx, heldWaitMax); err != nil {
		return false, newErr(errHeld, "keyshard: the statement waited %s for the layout switch of an online reshard, which did not end; "+
			"see SHOW RESHARD STATUS (nothing ran)", heldWaitMax)
	}
	if snap := s.srv.snap.Load(); snap != s.snap {
		if !snap.keeps(s.user, s.lease.Pinned()) {
			return false, newErr(errHeld, "keyshard: the layout switch of an online reshard removed the node this session's "+
				"transaction is on; the statement did not run: roll back and start again")
		}
		s.rebind(snap)
	}
	return true, nil
}

// hold closes a gate over tables ("db.table") for a layout switch: every
// session's statements on them wait until unhold, except those of the
// transactions open now, which the gate's Drained waits for.
func (srv *Server) hold(tables []string) *hold.Gate {
	g := hold.New(tables)
	srv.gate.Store(g) // before the marks are read: see hold.Gate
	var marks []*hold.Mark
	srv.sessions.Range(func(_, v any) bool {
		marks = append(marks, &v.(*Session).mark)
		return true
	})
	g.Arm(marks)
	return g
}

// unhold opens g and forgets it.
func (srv *Server) unhold(g *hold.Gate) {
	srv.gate.CompareAndSwap(g, nil)
	g.Open()
}
