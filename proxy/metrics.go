package proxy

import (
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
	"github.com/keyshard/keyshard/proxy/digest"
	"github.com/keyshard/keyshard/proxy/xa"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are keyshard's Prometheus metrics. Children are resolved once at
// start, so recording a query is two atomic adds and a histogram observe.
type Metrics struct {
	Registry *prometheus.Registry

	accepted    prometheus.Counter
	rejectedVec *prometheus.CounterVec
	ok, failed  [256]prometheus.Counter
	latency     [256]prometheus.Observer
	stmtsOpen   prometheus.Gauge

	// One per command name, for History.
	histograms, failures []metricReader
}

var commandNames = map[byte]string{
	mysql.COM_QUIT: "quit", mysql.COM_INIT_DB: "init_db", mysql.COM_QUERY: "query",
	mysql.COM_FIELD_LIST: "field_list", mysql.COM_STATISTICS: "statistics",
	mysql.COM_PROCESS_KILL: "process_kill", mysql.COM_PING: "ping",
	mysql.COM_CHANGE_USER: "change_user", mysql.COM_SET_OPTION: "set_option",
	mysql.COM_RESET_CONNECTION: "reset_connection", mysql.COM_STMT_PREPARE: "stmt_prepare",
	mysql.COM_STMT_EXECUTE: "stmt_execute", mysql.COM_STMT_CLOSE: "stmt_close",
	mysql.COM_STMT_RESET: "stmt_reset", mysql.COM_STMT_SEND_LONG_DATA: "stmt_send_long_data",
	mysql.COM_STMT_FETCH: "stmt_fetch",
}

func newMetrics(s *Server) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{Registry: reg}
	m.accepted = prometheus.NewCounter(prometheus.CounterOpts{Name: "keyshard_client_connections_accepted_total", Help: "Client connections accepted."})
	m.rejectedVec = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyshard_client_connections_rejected_total", Help: "Client connections refused, by reason (host, max_connections, unauthenticated_per_host, auth, ...)."}, []string{"reason"})
	queries := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "keyshard_queries_total", Help: "Client commands handled, by command and result."}, []string{"command", "result"})
	lat := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "keyshard_query_duration_seconds",
		Help:    "Time from reading a client command to the end of its answer.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"command"})
	seen := map[string]bool{}
	for i := range 256 {
		name, ok := commandNames[byte(i)]
		if !ok {
			name = "other"
		}
		m.ok[i] = queries.WithLabelValues(name, "ok")
		m.failed[i] = queries.WithLabelValues(name, "error")
		m.latency[i] = lat.WithLabelValues(name)
		if !seen[name] {
			seen[name] = true
			m.histograms = append(m.histograms, m.latency[i].(metricReader))
			m.failures = append(m.failures, m.failed[i])
		}
	}
	m.stmtsOpen = prometheus.NewGauge(prometheus.GaugeOpts{Name: "keyshard_client_prepared_statements", Help: "Prepared statements open in client sessions."})
	reg.MustRegister(m.accepted, m.rejectedVec, queries, lat, m.stmtsOpen,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keyshard_client_connections", Help: "Client connections open."},
			func() float64 { return float64(s.fe.Conns()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_backend_accounts_reads_total", Help: "Reads of the backend's accounts (backend_accounts): the first login, a failed login (at most once a second), after a reload."},
			func() float64 { return float64(s.accounts.Reads()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_deadlock_checks_total", Help: "Wait-for graphs read across nodes (a statement of a transaction over several nodes ran past 50 ms)."},
			func() float64 { return float64(s.deadlocks.Stats().Checks) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_deadlocks_total", Help: "Deadlocks found whose cycle of lock waits spans several nodes."},
			func() float64 { return float64(s.deadlocks.Stats().Cycles) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_deadlock_victims_total", Help: "Statements stopped as a deadlock's victim (their clients got 1213; their transactions rolled back on every node)."},
			func() float64 { return float64(s.deadlocks.Stats().Victims) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_deadlock_detection_seconds_total", Help: "Summed over victims: from the start of the last wait of the cycle to the victim's stop (divide by keyshard_deadlock_victims_total for the mean)."},
			func() float64 { return s.deadlocks.Stats().Latency.Seconds() }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_xa_commits_total", Help: "Writes over several nodes committed by two-phase commit."},
			func() float64 { return xaStat(s, func(x xa.Stats) int64 { return x.Commits }) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_xa_rollbacks_total", Help: "Writes over several nodes rolled back on every node (an error on one)."},
			func() float64 { return xaStat(s, func(x xa.Stats) int64 { return x.Rollbacks }) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_atomic_commits_total", Help: "All-or-nothing writes and transactions committed: " +
			"over several sub-tables of one node (a local transaction) or over several nodes (two-phase, also in keyshard_xa_commits_total)."},
			func() float64 { return xaStat(s, func(x xa.Stats) int64 { return x.AtomicCommits }) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_atomic_rollbacks_total", Help: "All-or-nothing writes and transactions rolled back: " +
			"on one node or on several (also in keyshard_xa_rollbacks_total)."},
			func() float64 { return xaStat(s, func(x xa.Stats) int64 { return x.AtomicRollbacks }) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_xa_recovered_total", Help: "Prepared XA branches finished by recovery (committed by their decision or rolled back)."},
			func() float64 { return xaStat(s, func(x xa.Stats) int64 { return x.Recovered }) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keyshard_xa_in_doubt", Help: "Prepared XA branches of keyshard's left after the last recovery (not decided yet, or unreachable)."},
			func() float64 { return xaStat(s, func(x xa.Stats) int64 { return x.InDoubt }) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_result_cache_hits_total", Help: "Statements answered from the result cache."},
			func() float64 { return float64(s.rcache.hits.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_result_cache_misses_total", Help: "Cacheable statements not found in the result cache (or found stale)."},
			func() float64 { return float64(s.rcache.misses.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_result_cache_stores_total", Help: "Answers stored in the result cache."},
			func() float64 { return float64(s.rcache.stores.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_result_cache_evictions_total", Help: "Result cache entries dropped to stay within result_cache_mb."},
			func() float64 { return float64(s.rcache.evictions.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "keyshard_result_cache_invalidations_total", Help: "Writes through keyshard that made result cache entries of their tables stale."},
			func() float64 { return float64(s.rcache.invalidations.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keyshard_result_cache_bytes", Help: "Memory the result cache holds (bounded by result_cache_mb)."},
			func() float64 { _, b := s.rcache.stats(); return float64(b) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "keyshard_result_cache_entries", Help: "Answers held in the result cache."},
			func() float64 { n, _ := s.rcache.stats(); return float64(n) }),
		&poolCollector{s: s}, &planCacheCollector{s: s}, &digestCollector{s: s})
	return m
}

// digestCollector exports the stage counters of all statements and, at
// scrape time, the top digest_metrics_top digests by total time.
type digestCollector struct{ s *Server }

var (
	digestLabels     = []string{"digest", "schema", "text"}
	descStage        = prometheus.NewDesc("keyshard_stage_seconds_total", "Statement time by stage (parse, route, pool_wait, backend, relay), all statements.", []string{"stage"}, nil)
	descDigests      = prometheus.NewDesc("keyshard_digests", "Statement digests held (bounded by digest_size).", nil, nil)
	descDigestCalls  = prometheus.NewDesc("keyshard_digest_calls_total", "Statements run, for the top digests by total time.", digestLabels, nil)
	descDigestErrors = prometheus.NewDesc("keyshard_digest_errors_total", "Statements that ended in an error, for the top digests.", digestLabels, nil)
	descDigestRows   = prometheus.NewDesc("keyshard_digest_rows_total", "Rows sent and rows affected, for the top digests.", digestLabels, nil)
	descDigestTime   = prometheus.NewDesc("keyshard_digest_seconds_total", "Statement time, for the top digests.", digestLabels, nil)
	descDigestStage  = prometheus.NewDesc("keyshard_digest_stage_seconds_total", "Statement time by stage, for the top digests.", append(digestLabels, "stage"), nil)
	descDigestP99    = prometheus.NewDesc("keyshard_digest_p99_seconds", "Estimated 99th percentile of statement time since the digests were reset, for the top digests.", digestLabels, nil)
)

// maxLabelText bounds the text label of digest metrics.
const maxLabelText = 120

func (c *digestCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStage, descDigests, descDigestCalls, descDigestErrors, descDigestRows, descDigestTime, descDigestStage, descDigestP99} {
		ch <- d
	}
}

func (c *digestCollector) Collect(ch chan<- prometheus.Metric) {
	for i, ns := range c.s.stages() {
		ch <- prometheus.MustNewConstMetric(descStage, prometheus.CounterValue, time.Duration(ns).Seconds(), digest.Stage(i).String())
	}
	ch <- prometheus.MustNewConstMetric(descDigests, prometheus.GaugeValue, float64(c.s.digests.Len()))
	n := c.s.snap.Load().cfg.DigestMetricsTop
	if n <= 0 {
		return
	}
	top, _ := c.s.digests.Top(n, "total")
	for _, d := range top {
		l := []string{d.ID, labelText(d.Schema), labelText(d.Text)}
		ch <- prometheus.MustNewConstMetric(descDigestCalls, prometheus.CounterValue, float64(d.Count), l...)
		ch <- prometheus.MustNewConstMetric(descDigestErrors, prometheus.CounterValue, float64(d.Errors), l...)
		ch <- prometheus.MustNewConstMetric(descDigestRows, prometheus.CounterValue, float64(d.Rows+d.Affected), l...)
		ch <- prometheus.MustNewConstMetric(descDigestTime, prometheus.CounterValue, d.Total.Seconds(), l...)
		ch <- prometheus.MustNewConstMetric(descDigestP99, prometheus.GaugeValue, d.P99.Seconds(), l...)
		for i, v := range d.Stages {
			ch <- prometheus.MustNewConstMetric(descDigestStage, prometheus.CounterValue, v.Seconds(), append(l, digest.Stage(i).String())...)
		}
	}
}

// labelText is a digest's text (or schema) as a label value: valid UTF-8
// (Prometheus refuses anything else; a shape may hold bytes of any
// charset), cut to maxLabelText bytes.
func labelText(t string) string {
	t = strings.ToValidUTF8(t, "\uFFFD")
	if len(t) <= maxLabelText {
		return t
	}
	end := maxLabelText
	for end > 0 && !utf8.RuneStart(t[end]) {
		end--
	}
	return t[:end] + "..."
}

// planCacheCollector reads each schema's plan cache counters at scrape time.
type planCacheCollector struct{ s *Server }

var (
	planLabels      = []string{"user"}
	descPlanSize    = prometheus.NewDesc("keyshard_plan_cache_entries", "Routing plans cached.", planLabels, nil)
	descPlanHits    = prometheus.NewDesc("keyshard_plan_cache_hits_total", "Statements routed with a cached plan.", planLabels, nil)
	descPlanMisses  = prometheus.NewDesc("keyshard_plan_cache_misses_total", "Statements whose shape was not cached (parsed and planned).", planLabels, nil)
	descPlanEvicted = prometheus.NewDesc("keyshard_plan_cache_evictions_total", "Plans dropped to keep the cache bounded.", planLabels, nil)
)

func (c *planCacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPlanSize, descPlanHits, descPlanMisses, descPlanEvicted} {
		ch <- d
	}
}

func (c *planCacheCollector) Collect(ch chan<- prometheus.Metric) {
	for user, r := range c.s.snap.Load().routes {
		if !r.Sharded() {
			continue
		}
		st := r.CacheStats()
		ch <- prometheus.MustNewConstMetric(descPlanSize, prometheus.GaugeValue, float64(st.Size), user)
		ch <- prometheus.MustNewConstMetric(descPlanHits, prometheus.CounterValue, float64(st.Hits), user)
		ch <- prometheus.MustNewConstMetric(descPlanMisses, prometheus.CounterValue, float64(st.Misses), user)
		ch <- prometheus.MustNewConstMetric(descPlanEvicted, prometheus.CounterValue, float64(st.Evicted), user)
	}
}

func (m *Metrics) rejected(reason string) prometheus.Counter {
	return m.rejectedVec.WithLabelValues(reason)
}

func (m *Metrics) observe(cmd byte, err error, d time.Duration) {
	if err == nil || errors.Is(err, errQuit) {
		m.ok[cmd].Inc()
	} else {
		m.failed[cmd].Inc()
	}
	m.latency[cmd].Observe(d.Seconds())
}

// poolCollector reads pool counters at scrape time.
type poolCollector struct{ s *Server }

var (
	poolLabels    = []string{"node", "addr", "role", "user"} // user: the backend user (the node's, or a user_list backend_user)
	serverLabels  = []string{"node", "addr", "role"}
	descPoolOpen  = prometheus.NewDesc("keyshard_pool_connections", "Backend connections open.", poolLabels, nil)
	descPoolInUse = prometheus.NewDesc("keyshard_pool_in_use", "Backend connections checked out.", poolLabels, nil)
	descPoolIdle  = prometheus.NewDesc("keyshard_pool_idle", "Backend connections idle in the pool.", poolLabels, nil)
	descPoolWaits = prometheus.NewDesc("keyshard_pool_waits_total", "Pool gets that had to wait for a free connection.", poolLabels, nil)
	descPoolWait  = prometheus.NewDesc("keyshard_pool_wait_seconds_total", "Time spent waiting for a free connection.", poolLabels, nil)
	descPoolTO    = prometheus.NewDesc("keyshard_pool_timeouts_total", "Pool gets that gave up after pool_wait_timeout.", poolLabels, nil)
	descPoolDial  = prometheus.NewDesc("keyshard_pool_dials_total", "Backend connections opened.", poolLabels, nil)
	descPoolDErr  = prometheus.NewDesc("keyshard_pool_dial_errors_total", "Backend connection attempts that failed.", poolLabels, nil)
	descPoolStmts = prometheus.NewDesc("keyshard_pool_prepared_statements", "Statements keyshard holds prepared on the backend (bounded by connections x stmt_cache_size).", poolLabels, nil)
	descPoolPreps = prometheus.NewDesc("keyshard_pool_prepares_total", "Statements prepared on the backend.", poolLabels, nil)
	descPoolPipes = prometheus.NewDesc("keyshard_pool_pipelines", "Backend connections with pipelined statements in flight (backend_pipeline_depth).", poolLabels, nil)
	descPoolPiped = prometheus.NewDesc("keyshard_pool_pipelined_total", "Statements sent on a backend connection while another session's was in flight there (backend_pipeline_depth).", poolLabels, nil)

	descBackendState = prometheus.NewDesc("keyshard_backend_state", "Backend state from its health checks: 0 up, 1 down, 2 lagging (a replica behind max_replication_lag).", serverLabels, nil)
	descBackendLag   = prometheus.NewDesc("keyshard_backend_replication_lag_seconds", "Replication lag of a replica at its last check (-1: replication not running; 0 for a master).", serverLabels, nil)
	descBackendStmts = prometheus.NewDesc("keyshard_backend_statements_total", "Statements sent to the backend: every leg of fan-outs and merges counts.", serverLabels, nil)
	descBackendErrs  = prometheus.NewDesc("keyshard_backend_errors_total", "Statements relayed from the backend that ended in an error.", serverLabels, nil)
	descBackendTime  = prometheus.NewDesc("keyshard_backend_statement_seconds", "Time from sending a statement to the backend to the end of its answer.", serverLabels, nil)
)

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPoolOpen, descPoolInUse, descPoolIdle, descPoolWaits, descPoolWait, descPoolTO, descPoolDial, descPoolDErr, descPoolStmts, descPoolPreps, descPoolPipes, descPoolPiped,
		descBackendState, descBackendLag, descBackendStmts, descBackendErrs, descBackendTime} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	snap := c.s.snap.Load()
	// One series per server and backend user: a backend_user that is
	// also a node's user has two pools there, summed.
	type poolKey struct{ node, addr, role, user string }
	sums := map[poolKey]backend.PoolStats{}
	add := func(name, user string, p *backend.Pool) {
		k := poolKey{name, p.Addr(), p.Role().String(), user}
		sums[k] = sums[k].Add(p.Stats())
	}
	for name, n := range snap.nodes {
		views := snap.viewsOf(name)
		for _, p := range n.Pools() {
			add(name, n.User(), p)
			c.collectBackend(ch, name, p)
			for _, v := range views {
				if vp := v.PoolFor(p); vp != nil {
					add(name, v.User(), vp)
				}
			}
		}
	}
	for k, st := range sums {
		c.collectPool(ch, []string{k.node, k.addr, k.role, k.user}, st)
	}
}

// collectPool writes the pool counters st of labels l (poolLabels).
func (c *poolCollector) collectPool(ch chan<- prometheus.Metric, l []string, st backend.PoolStats) {
	ch <- prometheus.MustNewConstMetric(descPoolOpen, prometheus.GaugeValue, float64(st.Open), l...)
	ch <- prometheus.MustNewConstMetric(descPoolInUse, prometheus.GaugeValue, float64(st.InUse), l...)
	ch <- prometheus.MustNewConstMetric(descPoolIdle, prometheus.GaugeValue, float64(st.Idle), l...)
	ch <- prometheus.MustNewConstMetric(descPoolWaits, prometheus.CounterValue, float64(st.Waits), l...)
	ch <- prometheus.MustNewConstMetric(descPoolWait, prometheus.CounterValue, st.WaitTime.Seconds(), l...)
	ch <- prometheus.MustNewConstMetric(descPoolTO, prometheus.CounterValue, float64(st.Timeouts), l...)
	ch <- prometheus.MustNewConstMetric(descPoolDial, prometheus.CounterValue, float64(st.Dials), l...)
	ch <- prometheus.MustNewConstMetric(descPoolDErr, prometheus.CounterValue, float64(st.DialErrors), l...)
	ch <- prometheus.MustNewConstMetric(descPoolStmts, prometheus.GaugeValue, float64(st.StmtsOpen), l...)
	ch <- prometheus.MustNewConstMetric(descPoolPreps, prometheus.CounterValue, float64(st.StmtPrepares), l...)
	ch <- prometheus.MustNewConstMetric(descPoolPipes, prometheus.GaugeValue, float64(st.Pipelines), l...)
	ch <- prometheus.MustNewConstMetric(descPoolPiped, prometheus.CounterValue, float64(st.Pipelined), l...)
}

// collectBackend reads the state and statement counts of a server of node
// name (one per server, whatever the backend users).
func (c *poolCollector) collectBackend(ch chan<- prometheus.Metric, name string, p *backend.Pool) {
	l := []string{name, p.Addr(), p.Role().String()}
	ch <- prometheus.MustNewConstMetric(descBackendState, prometheus.GaugeValue, float64(p.Health()), l...)
	ch <- prometheus.MustNewConstMetric(descBackendLag, prometheus.GaugeValue, float64(p.Lag()), l...)
	ls := p.Statements().Snapshot()
	ch <- prometheus.MustNewConstMetric(descBackendStmts, prometheus.CounterValue, float64(ls.Count), l...)
	ch <- prometheus.MustNewConstMetric(descBackendErrs, prometheus.CounterValue, float64(ls.Errors), l...)
	buckets := make(map[float64]uint64, len(backend.LatencyBounds))
	for k, b := range backend.LatencyBounds {
		buckets[b] = ls.Cumulative[k]
	}
	ch <- prometheus.MustNewConstHistogram(descBackendTime, uint64(ls.Count), ls.Sum.Seconds(), buckets, l...)
}

// xaStat reads one of the XA coordinator's counters (0 before it exists).
func xaStat(s *Server, f func(xa.Stats) int64) float64 {
	if s.xa == nil {
		return 0
	}
	return float64(f(s.xa.Stats()))
}
