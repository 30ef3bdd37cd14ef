package xa

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/keyshard/keyshard/backend"
	"go.uber.org/zap"
)

// Recovery runs at start (before anything else: a predecessor killed
// while committing left its undecided branches holding row locks, and its
// liveness lock is free, so they are rolled back in this first pass), then
// every xa_recover_interval. A pass that leaves another instance's branch
// in doubt (no decision yet, its instance alive or not known to be dead)
// runs again soon: after retrySoon if the pass saw that branch for the
// first time (its instance may be dying: its lock may be freed a moment
// after it dies), backing off to xa_recover_interval while branches stay
// in doubt. This instance's own branches never shorten the interval (it is
// alive: its coordinator decides them).

// forgetEvery is how often finished decisions are deleted, in one
// statement per node: a decision is read only for a branch still
// prepared, so one kept a moment longer costs nothing.
const forgetEvery = 200 * time.Millisecond

// retrySoon is how soon recovery runs again after a pass that found
// another instance's branch in doubt for the first time.
const retrySoon = time.Second

// Run forgets finished decisions and recovers prepared branches, until
// the server stops (the ctx of New); Stopped is closed when it returns.
// It holds this instance's liveness lock on every node meanwhile (see
// liveness.go) and frees it when it returns.
func (x *Coordinator) Run() {
	defer close(x.stopped)
	held := make(chan struct{})
	go x.holdLocks(held)
	defer func() { <-held }() // the locks are freed before Stopped
	x.log.Info("XA coordinator started", zap.String("instance", x.instance), zap.String("liveness_lock", lockName(x.instance)))
	interval := x.env.Config().XARecoverInterval.D()
	wait := x.nextPass(x.recoverAll(), interval, interval)
	t := time.NewTimer(wait)
	defer t.Stop()
	// Finished decisions are forgotten in batches, one DELETE per node
	// every forgetEvery at most: a write over several nodes costs its
	// first node one statement (and one commit) less.
	forget := map[string][]string{} // node -> quoted xids
	var flush <-chan time.Time
	for {
		select {
		case <-x.ctx.Done():
			return
		case xid := <-x.done:
			_, node, _ := parseXID(xid)
			forget[node] = append(forget[node], backend.Quote(xid))
			if flush == nil {
				flush = time.After(forgetEvery)
			}
		case <-flush:
			flush = nil
			for node, ids := range forget {
				if _, err := x.logExec(x.ctx, node, "DELETE FROM $T WHERE gtrid IN ("+strings.Join(ids, ", ")+")"); err != nil {
					x.log.Debug("forgetting XA decisions failed (recovery retries)", zap.String("node", node), zap.Int("decisions", len(ids)), zap.Error(err))
				}
			}
			clear(forget)
		case <-t.C:
			wait = x.nextPass(x.recoverAll(), wait, interval)
			t.Reset(wait)
		}
	}
}

// passResult is what a recovery pass left in doubt of other instances'
// branches: how many, and whether any was new to it.
type passResult struct {
	othersInDoubt int
	newInDoubt    bool
}

// nextPass is the wait before the next recovery pass, after one that
// found r and followed a wait of last (see retrySoon).
func (x *Coordinator) nextPass(r passResult, last, interval time.Duration) time.Duration {
	switch {
	case r.newInDoubt:
		return min(retrySoon, interval)
	case r.othersInDoubt > 0:
		return min(2*last, interval)
	}
	return interval
}

// preparedBranch is one branch XA RECOVER lists.
type preparedBranch struct{ gtrid, bqual string }

// recoverAll finishes every prepared branch of keyshard's on every node:
// by its decision; with none, rolled back (the rollback recorded first)
// when the instance that made it is dead (its liveness lock is free on
// the transaction's decision node) or once recovery has seen it prepared
// for xa_prepared_timeout.
func (x *Coordinator) recoverAll() passResult {
	timeout := x.env.Config().XAPreparedTimeout.D()
	var res passResult
	inDoubt := int64(0)
	var seen []string // prepared transactions: their decisions stay
	seenNow := map[string]bool{}
	lives := map[string]liveness{} // by decision node and instance, for this pass
	complete := true
	for name, n := range x.env.Nodes() {
		branches, err := x.prepared(n.Master)
		if err != nil {
			x.log.Debug("XA RECOVER failed", zap.String("node", name), zap.Error(err))
			complete = false
			continue
		}
		for _, b := range branches {
			seen = append(seen, backend.Quote(b.gtrid))
			key := name + "\x00" + b.gtrid + "\x00" + b.bqual
			seenNow[key] = true
			age, isNew := x.firstSeen(key)
			mine := xidInstance(b.gtrid) == x.instance
			doubt := func() {
				inDoubt++
				if !mine {
					res.othersInDoubt++
					res.newInDoubt = res.newInDoubt || isNew
				}
			}
			out, err := x.outcome(x.ctx, b.gtrid)
			if err != nil {
				doubt()
				continue
			}
			why := "decided"
			if out == 0 {
				switch {
				case age >= timeout:
					why = "xa_prepared_timeout"
				case x.liveness(b.gtrid, lives) == dead:
					// Its coordinator is gone: no commit decision can come
					// from it any more (see liveness.go for why a live one
					// wrongly seen dead stays safe).
					why = "instance dead"
				default:
					doubt() // maybe still running: its coordinator decides
					continue
				}
				if out, err = x.decide(x.ctx, b.gtrid, 'R'); err != nil {
					doubt()
					continue
				}
			}
			verb := "XA ROLLBACK "
			if out == 'C' {
				verb = "XA COMMIT "
			}
			if err := x.finish(n.Master, verb+backend.Quote(b.gtrid)+","+backend.Quote(b.bqual)); err != nil {
				x.log.Warn("XA recovery could not finish a branch", zap.String("node", name), zap.String("xid", b.gtrid), zap.Error(err))
				doubt()
				continue
			}
			x.recovered.Add(1)
			x.log.Info("XA branch recovered", zap.String("node", name), zap.String("xid", b.gtrid), zap.String("action", verb),
				zap.String("reason", why))
		}
	}
	x.inDoubt.Store(inDoubt)
	x.forgetUnseen(seenNow)
	if complete {
		// Commit decisions whose transactions no node holds prepared any
		// more (their Done was lost) go, once well past the timeout;
		// rollback decisions stay a day, so that a coordinator stalled
		// that long still finds its transaction rolled back.
		q := fmt.Sprintf("DELETE FROM $T WHERE (outcome = 'C' AND decided_at < NOW(6) - INTERVAL %d SECOND OR "+
			"decided_at < NOW(6) - INTERVAL 1 DAY)", int(2*timeout/time.Second)+1)
		if len(seen) > 0 {
			q += " AND gtrid NOT IN (" + strings.Join(seen, ", ") + ")"
		}
		x.ready.Range(func(node, _ any) bool {
			_, _ = x.logExec(x.ctx, node.(string), q)
			return true
		})
	}
	return res
}

// prepared lists keyshard's prepared branches on pool p's server.
func (x *Coordinator) prepared(p *backend.Pool) ([]preparedBranch, error) {
	bc, put, err := conn(x.ctx, p)
	if err != nil {
		return nil, err
	}
	defer put()
	r, err := bc.Exec("XA RECOVER")
	if err != nil {
		return nil, err
	}
	var out []preparedBranch
	for _, row := range r.Rows {
		// formatID, gtrid_length, bqual_length, data
		if len(row) < 4 || row[0] == nil || *row[0] != "1" || row[1] == nil || row[2] == nil || row[3] == nil {
			continue
		}
		gl, _ := strconv.Atoi(*row[1])
		bl, _ := strconv.Atoi(*row[2])
		data := *row[3]
		if gl+bl != len(data) || !strings.HasPrefix(data, xidPrefix) {
			continue
		}
		if _, _, ok := parseXID(data[:gl]); !ok {
			continue
		}
		out = append(out, preparedBranch{gtrid: data[:gl], bqual: data[gl:]})
	}
	return out, nil
}

// finish runs q (XA COMMIT or ROLLBACK of a prepared branch) on p.
func (x *Coordinator) finish(p *backend.Pool, q string) error {
	bc, put, err := conn(x.ctx, p)
	if err != nil {
		return err
	}
	defer put()
	_, err = bc.Exec(q)
	return err
}

// firstSeen is preparedFor, and whether this call saw branch first.
func (x *Coordinator) firstSeen(branch string) (time.Duration, bool) {
	x.seenMu.Lock()
	_, ok := x.seen[branch]
	x.seenMu.Unlock()
	return x.preparedFor(branch), !ok
}

// preparedFor is how long recovery has seen branch prepared (its age
// counts from then, not from its coordinator's clock).
func (x *Coordinator) preparedFor(branch string) time.Duration {
	x.seenMu.Lock()
	defer x.seenMu.Unlock()
	t, ok := x.seen[branch]
	if !ok {
		t = time.Now()
		x.seen[branch] = t
	}
	return time.Since(t)
}

// forgetUnseen drops the branches recovery no longer sees prepared.
func (x *Coordinator) forgetUnseen(now map[string]bool) {
	x.seenMu.Lock()
	defer x.seenMu.Unlock()
	for b := range x.seen {
		if !now[b] {
			delete(x.seen, b)
		}
	}
}
