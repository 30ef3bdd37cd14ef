package reshard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/binlog"
	"github.com/keyshard/keyshard/proxy/hold"
)

// Phase is where a workflow is.
type Phase string

const (
	Copying     Phase = "copying"
	CatchingUp  Phase = "catching-up"
	Verifying   Phase = "verifying"
	CuttingOver Phase = "cutting-over"
	Switched    Phase = "switched"
	Complete    Phase = "complete"
	Cancelled   Phase = "cancelled"
	Failed      Phase = "failed"
)

// Switcher is what the cut-over needs of keyshard's data plane.
type Switcher interface {
	// Hold pauses the statements on tables ("db.table") for the switch.
	Hold(tables []string) *hold.Gate
	// Unhold lets them go.
	Unhold(g *hold.Gate)
	// Switch swaps in the layout the workflow moved the rows to (the
	// pending config), as a reload does but without refusing it for the
	// rows it places elsewhere: they are there now.
	Switch() error
}

// Options tune a workflow.
type Options struct {
	// Chunk is how many rows one copy step reads (DefaultChunk).
	Chunk int
	// CutoverTimeout bounds how long statements are held and the
	// transactions open at the hold may take to end; past it the
	// cut-over is abandoned (nothing is killed) and tried again.
	CutoverTimeout time.Duration
	// CutoverTries is how many cut-overs are tried before the workflow
	// fails (it keeps its copy: START again after the long transactions).
	CutoverTries int
}

// DefaultCutoverTimeout is reshard_cutover_timeout's default.
const DefaultCutoverTimeout = 5 * time.Second

// Workflow moves the rows of some tables to the pending layout and
// switches to it: copy, catch-up, verify, cut-over. One runs at a time.
type Workflow struct {
	nodes  Nodes
	sw     Switcher
	opts   Options
	plans  []*TablePlan
	copier *Copier
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	phase    Phase
	err      error
	diffs    []Diff
	started  time.Time
	switched time.Time
	tries    int
	held     time.Duration // the last cut-over's hold, from close to open
}

// New checks what the plans need (every source node's binlog can be
// followed; every source has a primary key; no target exists), creates
// the targets, and returns the workflow ready to Run.
func New(ctx context.Context, nodes Nodes, sw Switcher, plans []*TablePlan, opts Options) (*Workflow, error) {
	if len(plans) == 0 {
		return nil, errors.New("reshard: no table's rows move between the running layout and the pending one")
	}
	if opts.CutoverTimeout <= 0 {
		opts.CutoverTimeout = DefaultCutoverTimeout
	}
	if opts.CutoverTries <= 0 {
		opts.CutoverTries = 10
	}
	checked := map[string]bool{}
	for _, p := range plans {
		for _, i := range p.Sources {
			node := p.Source(i).Node
			if checked[node] {
				continue
			}
			checked[node] = true
			c, err := openConn(ctx, nodes, node)
			if err != nil {
				return nil, err
			}
			err = binlog.Requirements(node, c)
			c.Close()
			if err != nil {
				return nil, err
			}
		}
	}
	cp, err := NewCopier(ctx, nodes, plans, opts.Chunk)
	if err != nil {
		return nil, err
	}
	if err := cp.Create(ctx); err != nil {
		cp.Close()
		return nil, err
	}
	return &Workflow{nodes: nodes, sw: sw, opts: opts, plans: plans, copier: cp, phase: Copying, started: time.Now(), done: make(chan struct{})}, nil
}

// Run drives the workflow to the switch (or a failure) in the background.
func (w *Workflow) Run() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go func() {
		defer close(w.done)
		defer w.nodes.Close()
		defer w.copier.Close()
		err := w.run(ctx)
		w.mu.Lock()
		defer w.mu.Unlock()
		switch {
		case err == nil:
			w.phase, w.switched = Switched, time.Now()
		case ctx.Err() != nil:
			w.phase = Cancelled
		default:
			w.phase, w.err = Failed, err
		}
	}()
}

func (w *Workflow) set(p Phase) {
	w.mu.Lock()
	w.phase = p
	w.mu.Unlock()
}

func (w *Workflow) run(ctx context.Context) error {
	if err := w.copier.Copy(ctx); err != nil {
		return err
	}
	w.set(CatchingUp)
	if err := w.copier.CatchUp(ctx); err != nil {
		return err
	}
	w.set(Verifying)
	diffs, err := w.copier.Verify(ctx)
	if err != nil {
		return err
	}
	if len(diffs) > 0 {
		w.mu.Lock()
		w.diffs = diffs
		w.mu.Unlock()
		return fmt.Errorf("verify found %d differences between the old layout and the new one; the switch is blocked: %s", len(diffs), diffs[0])
	}
	w.set(CuttingOver)
	for try := 1; ; try++ {
		w.mu.Lock()
		w.tries = try
		w.mu.Unlock()
		ok, err := w.cutover(ctx)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if try >= w.opts.CutoverTries {
			return fmt.Errorf("the cut-over was abandoned %d times: transactions open on the tables outlived reshard_cutover_timeout (%s) each time", try, w.opts.CutoverTimeout)
		}
		// Let the held statements and the long transaction go on, keep
		// up with their writes, and try again.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(try) * 200 * time.Millisecond):
		}
		if err := w.copier.CatchUp(ctx); err != nil {
			return err
		}
	}
}

// Tables are the tables the workflow moves ("db.table").
func (w *Workflow) Tables() []string {
	var out []string
	for _, p := range w.plans {
		out = append(out, p.Name())
	}
	return out
}

// cutover holds the tables, waits for the transactions open on them,
// applies the binlog to the exact position, renames the shadows into
// place and swaps the layout in: true when switched; false when the
// transactions did not end in time (nothing changed; try again).
func (w *Workflow) cutover(ctx context.Context) (bool, error) {
	g := w.sw.Hold(w.Tables())
	begin := time.Now()
	keepHeld := false
	defer func() {
		if !keepHeld {
			w.sw.Unhold(g)
		}
		w.mu.Lock()
		w.held = time.Since(begin)
		w.mu.Unlock()
	}()
	hctx, cancel := context.WithTimeout(ctx, w.opts.CutoverTimeout)
	defer cancel()
	if err := g.Drained(hctx); err != nil {
		return false, nil
	}
	// Branches prepared now may be of the sessions just drained, their
	// XA COMMIT not sent yet (keyshard answers the client first) or left
	// to recovery: wait for their decision, so that their rows are before
	// the last position. Branches prepared later cannot touch the tables.
	if err := w.copier.waitPrepared(hctx); err != nil {
		if hctx.Err() != nil && ctx.Err() == nil {
			return false, nil
		}
		return false, err
	}
	// Nothing writes the tables now: the position now is the last.
	if err := w.copier.CatchUp(hctx); err != nil {
		if hctx.Err() != nil && ctx.Err() == nil {
			return false, nil
		}
		return false, err
	}
	renamed, err := w.rename(hctx, false, nil)
	if err == nil {
		if err = w.sw.Switch(); err != nil {
			err = fmt.Errorf("switching the layout: %w", err)
		}
	}
	if err != nil {
		// Undone whatever the workflow's context says: the old layout
		// must find its tables before its statements go on.
		uctx, ucancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer ucancel()
		if _, uerr := w.rename(uctx, true, renamed); uerr != nil {
			// The tables' names are neither layout's: statements on them
			// stay held (and fail with the hold's error) rather than
			// read or write the wrong rows.
			keepHeld = true
			return false, fmt.Errorf("%v; renaming the sub-tables back failed too, so their statements stay held: %v; "+
				"rename them by hand (see SHOW RESHARD STATUS's plan), then restart keyshard", err, uerr)
		}
		if hctx.Err() != nil && ctx.Err() == nil {
			return false, nil // the rename waited past the cut-over's time: try again
		}
		return false, err
	}
	return true, nil
}

// rename puts every shadow in place of the old sub-table of its name (kept
// as NAME__ksold), one RENAME TABLE per node (atomic there), and returns
// the nodes done; back undoes it on the nodes in only.
func (w *Workflow) rename(ctx context.Context, back bool, only []string) ([]string, error) {
	per := map[string][]string{}
	for _, p := range w.plans {
		for _, t := range p.Targets {
			if !t.Shadow {
				continue
			}
			final := backend.QuoteName(t.DB) + "." + backend.QuoteName(t.Final)
			old := backend.QuoteName(t.DB) + "." + backend.QuoteName(t.Final+OldSuffix)
			shadow := backend.QuoteName(t.DB) + "." + backend.QuoteName(t.Name)
			if back {
				per[t.Node] = append(per[t.Node], final+" TO "+shadow, old+" TO "+final)
			} else {
				per[t.Node] = append(per[t.Node], final+" TO "+old, shadow+" TO "+final)
			}
		}
	}
	nodes := make([]string, 0, len(per))
	for n := range per {
		if !back || slices.Contains(only, n) {
			nodes = append(nodes, n)
		}
	}
	slices.Sort(nodes)
	var done []string
	for _, node := range nodes {
		c, err := openConn(ctx, w.nodes, node)
		if err != nil {
			return done, err
		}
		// RENAME waits for the tables' metadata locks (a long query, a
		// backup): at most until the cut-over gives up.
		wait := 30 * time.Second
		if d, ok := ctx.Deadline(); ok {
			wait = time.Until(d)
		}
		if _, err = c.Exec(fmt.Sprintf("SET SESSION lock_wait_timeout = %d", max(1, int(wait.Seconds()+0.5)))); err == nil {
			q := "RENAME TABLE " + strings.Join(per[node], ", ")
			w.copier.own(q)
			_, err = c.Exec(q)
		}
		c.Close()
		if err != nil {
			return done, fmt.Errorf("node %s: renaming the new sub-tables into place: %w", node, err)
		}
		done = append(done, node)
	}
	return done, nil
}

// Cancel stops a workflow that has not switched and drops what it
// created; after the switch it is an error (REVERSE goes back).
func (w *Workflow) Cancel(ctx context.Context) error {
	w.mu.Lock()
	ph := w.phase
	w.mu.Unlock()
	if ph == Switched {
		return errors.New("reshard: the workflow has switched to the new layout; it cannot be cancelled")
	}
	defer w.nodes.Close()
	if w.cancel != nil {
		w.cancel()
		<-w.done
	}
	w.mu.Lock()
	ph = w.phase
	w.mu.Unlock()
	if ph == Switched {
		return errors.New("reshard: the workflow switched to the new layout before it could be cancelled")
	}
	var errs []error
	for _, p := range w.plans {
		for _, t := range p.Targets {
			if !t.Create {
				continue
			}
			c, err := openConn(ctx, w.nodes, t.Node)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if _, err := c.Exec("DROP TABLE IF EXISTS " + backend.QuoteName(t.DB) + "." + backend.QuoteName(t.Name)); err != nil {
				errs = append(errs, fmt.Errorf("node %s: dropping %s: %w", t.Node, t.Name, err))
			}
			c.Close()
		}
	}
	w.set(Cancelled)
	return errors.Join(errs...)
}

// Leftovers are the old layout's tables the new one does not use, after
// the switch: the sub-tables that moved to other nodes (still on their old
// ones) and the renamed ones (NAME__ksold).
func (w *Workflow) Leftovers() []Place {
	var out []Place
	for _, p := range w.plans {
		inNew := map[Place]bool{}
		for _, t := range p.Targets {
			inNew[Place{Node: t.Node, DB: t.DB, Name: t.Final}] = true
		}
		shadowed := map[Place]bool{}
		for _, t := range p.Targets {
			if t.Shadow {
				shadowed[Place{Node: t.Node, DB: t.DB, Name: t.Final}] = true
			}
		}
		for i := range p.Old.Rule.Tables() {
			pl := p.Source(i)
			switch {
			case shadowed[pl]:
				out = append(out, Place{Node: pl.Node, DB: pl.DB, Name: pl.Name + OldSuffix})
			case !inNew[pl]:
				out = append(out, pl)
			}
		}
	}
	return out
}

// Complete drops the leftovers of a switched workflow (see Leftovers) and
// ends it: after it, the old layout cannot come back.
func (w *Workflow) Complete(ctx context.Context) ([]Place, error) {
	w.mu.Lock()
	ph := w.phase
	w.mu.Unlock()
	if ph != Switched {
		return nil, fmt.Errorf("reshard: the workflow is %s; COMPLETE drops the old sub-tables once it has switched", ph)
	}
	defer w.nodes.Close()
	var dropped []Place
	for _, pl := range w.Leftovers() {
		c, err := openConn(ctx, w.nodes, pl.Node)
		if err != nil {
			return dropped, err
		}
		_, err = c.Exec("DROP TABLE IF EXISTS " + backend.QuoteName(pl.DB) + "." + backend.QuoteName(pl.Name))
		c.Close()
		if err != nil {
			return dropped, fmt.Errorf("node %s: dropping %s: %w", pl.Node, pl.Name, err)
		}
		dropped = append(dropped, pl)
	}
	w.set(Complete)
	return dropped, nil
}

// Wait waits for the workflow's background run to end.
func (w *Workflow) Wait(ctx context.Context) error {
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Status is what SHOW RESHARD STATUS shows of a workflow.
type Status struct {
	Phase    Phase
	Tables   []string
	Copied   int64 // rows written by the copy
	Applied  int64 // binlog changes applied
	Started  time.Time
	Switched time.Time
	Tries    int           // cut-overs tried
	Held     time.Duration // the last cut-over's hold
	Error    string
	Diffs    []string
	Plans    []string // TablePlan.Describe of each
}

// Status reports where the workflow is.
func (w *Workflow) Status() Status {
	copied, applied := w.copier.Progress()
	w.mu.Lock()
	defer w.mu.Unlock()
	st := Status{Phase: w.phase, Tables: w.Tables(), Copied: copied, Applied: applied, Started: w.started, Switched: w.switched,
		Tries: w.tries, Held: w.held}
	if w.err != nil {
		st.Error = w.err.Error()
	}
	for _, d := range w.diffs {
		st.Diffs = append(st.Diffs, d.String())
	}
	for _, p := range w.plans {
		st.Plans = append(st.Plans, p.Describe())
	}
	return st
}
