package proxy

import (
	"math"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Sample is one second of client commands for the status page's chart.
type Sample struct {
	T       int64   `json:"t"` // unix seconds at the end of the second
	Queries int64   `json:"queries"`
	Errors  int64   `json:"errors"`
	AvgMs   float64 `json:"avg_ms"`
	P99Ms   float64 `json:"p99_ms"` // estimated from the histogram's buckets (an upper bound)
}

// historyLen is how many seconds History keeps: the last ten minutes.
const historyLen = 600

// history keeps the last historyLen per-second samples, read from the
// query metrics once a second (nothing is added to a statement's path).
type history struct {
	mu      sync.Mutex
	ring    [historyLen]Sample
	n, next int
	prev    totals
}

// totals are the query metrics summed over commands.
type totals struct {
	count, errors uint64
	sum           float64
	buckets       []uint64 // cumulative, by bound
	bounds        []float64
}

// read sums the metrics of every command.
func (m *Metrics) totals() totals {
	var t totals
	var d dto.Metric
	for _, h := range m.histograms {
		d.Reset()
		if h.Write(&d) != nil || d.Histogram == nil {
			continue
		}
		t.count += d.Histogram.GetSampleCount()
		t.sum += d.Histogram.GetSampleSum()
		bs := d.Histogram.GetBucket()
		if t.buckets == nil {
			t.buckets, t.bounds = make([]uint64, len(bs)), make([]float64, len(bs))
		}
		for i, b := range bs {
			if i < len(t.buckets) {
				t.buckets[i] += b.GetCumulativeCount()
				t.bounds[i] = b.GetUpperBound()
			}
		}
	}
	for _, c := range m.failures {
		d.Reset()
		if c.Write(&d) == nil && d.Counter != nil {
			t.errors += uint64(d.Counter.GetValue())
		}
	}
	return t
}

// sample adds the second ending at now.
func (h *history) sample(now time.Time, cur totals) {
	h.mu.Lock()
	defer h.mu.Unlock()
	prev := h.prev
	h.prev = cur
	if prev.buckets == nil {
		return // the first reading: nothing to compare with
	}
	s := Sample{T: now.Unix(), Queries: int64(cur.count - prev.count), Errors: int64(cur.errors - prev.errors)}
	if s.Queries > 0 {
		s.AvgMs = (cur.sum - prev.sum) * 1000 / float64(s.Queries)
		// The first bucket holding 99% of the second's commands.
		// (Beyond the last bound: shown as the last bound.)
		want := uint64(math.Ceil(float64(s.Queries) * 0.99))
		for i := range cur.buckets {
			s.P99Ms = cur.bounds[i] * 1000
			if i < len(prev.buckets) && cur.buckets[i]-prev.buckets[i] >= want {
				break
			}
		}
	}
	h.ring[h.next] = s
	h.next = (h.next + 1) % historyLen
	h.n = min(h.n+1, historyLen)
}

// History returns the per-second samples of the last ten minutes, oldest
// first.
func (s *Server) History() []Sample {
	h := &s.history
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Sample, 0, h.n)
	for i := range h.n {
		out = append(out, h.ring[(h.next-h.n+i+historyLen)%historyLen])
	}
	return out
}

// keepHistory samples the query metrics every second until the server
// shuts down.
func (s *Server) keepHistory() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	s.history.sample(time.Now(), s.metrics.totals())
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.history.sample(now, s.metrics.totals())
		}
	}
}

// metricReader is a metric History reads (a histogram or a counter).
type metricReader interface{ Write(*dto.Metric) error }
