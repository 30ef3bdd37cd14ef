package backend

import (
	"sync/atomic"
	"time"
)

// LatencyBounds are the upper bounds (seconds) of Latency's buckets.
var LatencyBounds = [...]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Latency counts statements and their times in fixed buckets, lock-free:
// one atomic add per field on the request path.
type Latency struct {
	count, errors, nanos atomic.Int64
	buckets              [len(LatencyBounds) + 1]atomic.Int64 // last: above every bound
}

// Observe records one statement.
func (l *Latency) Observe(d time.Duration, failed bool) {
	l.count.Add(1)
	if failed {
		l.errors.Add(1)
	}
	l.nanos.Add(int64(d))
	s := d.Seconds()
	i := 0
	for i < len(LatencyBounds) && s > LatencyBounds[i] {
		i++
	}
	l.buckets[i].Add(1)
}

// LatencySnapshot is a copy of a Latency's counters.
type LatencySnapshot struct {
	Count, Errors int64
	Sum           time.Duration
	// Cumulative[i] counts statements at or under LatencyBounds[i].
	Cumulative [len(LatencyBounds)]uint64
}

// Snapshot copies the counters (not atomically as a whole: good enough
// for metrics).
func (l *Latency) Snapshot() LatencySnapshot {
	s := LatencySnapshot{Count: l.count.Load(), Errors: l.errors.Load(), Sum: time.Duration(l.nanos.Load())}
	var acc uint64
	for i := range LatencyBounds {
		acc += uint64(l.buckets[i].Load())
		s.Cumulative[i] = acc
	}
	return s
}
