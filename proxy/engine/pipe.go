package engine

import (
	"errors"
	"time"
	"unsafe"

	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/backend/wire"
)

// errAbandoned ends the turn of a relay that stopped abruptly.
var errAbandoned = errors.New("the relay of a pipelined answer stopped before its end")

// piped runs a COM_QUERY on a pipelined connection (backend.Pipeline)
// when the session and the node's pool allow it. done false: nothing was
// sent (or a read failed before its answer came and may run again), run
// it the usual way.
func (e *Engine) piped(n *backend.Node, raw []byte, sql *string, p Purpose, retriable bool) (done bool, err error) {
	var q []byte
	if sql != nil {
		q = unsafe.Slice(unsafe.StringData(*sql), len(*sql)) // read only
	} else {
		q = raw[1:]
	}
	t, err := e.Conns.Pipe(n, p, q)
	if err != nil {
		return true, e.Fail(err)
	}
	if t == nil {
		return false, nil
	}
	e.Trace.Piped(t)
	finished := false
	defer func() {
		if !finished { // a panic: the answer may be half read, the pipe is done for
			t.Done(errAbandoned, false)
		}
	}()
	bc, err := t.Wait()
	var res Result
	if err == nil {
		start := time.Now()
		e.Client.Drain(true)
		res, err = e.Relay(bc, false, nil)
		gone := e.Client.Drain(false)
		bc.Pool().Observe(time.Since(start), err != nil || res.Err != nil)
		// A statement that left state behind after all (a stored
		// function that sets a variable, say) ends the pipe's sharing
		// (those already sent behind it run with that state: it cannot
		// be known beforehand). An error leaves none: autocommit is on.
		keep := err == nil && (res.Err != nil || bc.Answered() && bc.Status&(wire.StatusInTrans|wire.StatusSessionStateChange) == 0) &&
			len(res.Tracked) == 0
		t.Done(err, keep)
		if err == nil {
			err = gone
		}
	} else {
		t.Done(nil, true)
	}
	finished = true
	e.Trace.Piped(nil)
	if err == nil {
		if res.Err != nil { // a *mysql.MyError: a nil one is no nil error
			return true, res.Err
		}
		return true, nil
	}
	var ce *ClientError
	if errors.As(err, &ce) {
		return true, err
	}
	if retriable && !res.Started && backend.KindOf(err) == backend.KindLost && !e.Trace.Killed() && !backend.IsFrozen(err) {
		e.Trace.Retry()
		return false, nil // nothing of it reached the client: once more, the usual way
	}
	if e.Trace.Killed() {
		err = Errorf(KindKilled, "Query execution was interrupted (connection killed)")
	}
	return true, e.Fail(err)
}
