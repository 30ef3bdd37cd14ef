// Package admin is keyshard's operator surface: admin SQL on the proxy port
// (SQL), kingshard's REST API under /api/v1 with basic auth (REST), and the
// HTTP endpoints Prometheus /metrics, Go's pprof under /debug/pprof/
// (mounted explicitly, never via the default mux), /healthz (the process
// lives) and /readyz (it can serve). Every
// change goes through proxy.Server's controls, shared by SQL and REST.
package admin

import (
	"net/http"
	"net/http/pprof"
	"runtime"

	"github.com/keyshard/keyshard/proxy"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// EnableContentionProfiles turns on sampling for the mutex and block
// profiles so /debug/pprof/mutex and /debug/pprof/block have data. The
// rates keep the overhead small: 1 in 100 mutex contentions, and blocking
// events sampled in proportion to their length (all of 1 ms or more).
func EnableContentionProfiles() {
	runtime.SetMutexProfileFraction(100)
	runtime.SetBlockProfileRate(1_000_000)
}

// Handler returns the admin mux of srv. health reports whether keyshard
// can serve (nil) or why not. /metrics asks for the web credentials with
// web_metrics_auth, pprof unless web_pprof_auth is false (read at each
// request: a reload applies). Mount the REST API on it with REST.
func Handler(srv *proxy.Server, health func() error) *http.ServeMux {
	mux := http.NewServeMux()
	gated := func(on func(*config.Config) bool, h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if on(srv.Config()) && !authorized(srv, w, r) {
				return
			}
			h(w, r)
		}
	}
	metricsAuth := func(c *config.Config) bool { return c.WebMetricsAuth != nil && *c.WebMetricsAuth }
	pprofAuth := func(c *config.Config) bool { return c.WebPprofAuth == nil || *c.WebPprofAuth }
	mux.Handle("/metrics", gated(metricsAuth, promhttp.HandlerFor(srv.Metrics().Registry, promhttp.HandlerOpts{}).ServeHTTP))
	mux.HandleFunc("/debug/pprof/", gated(pprofAuth, pprof.Index))
	mux.HandleFunc("/debug/pprof/cmdline", gated(pprofAuth, pprof.Cmdline))
	mux.HandleFunc("/debug/pprof/profile", gated(pprofAuth, pprof.Profile))
	mux.HandleFunc("/debug/pprof/symbol", gated(pprofAuth, pprof.Symbol))
	mux.HandleFunc("/debug/pprof/trace", gated(pprofAuth, pprof.Trace))
	probe := func(check func() error) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if err := check(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
		}
	}
	mux.HandleFunc("/healthz", probe(health))   // the process lives
	mux.HandleFunc("/readyz", probe(srv.Ready)) // it can serve: route clients here
	return mux
}

// Guard admits to h only the requests from addresses allowed (web_allow_ips,
// else allow_ips); the others get 403 before anything else, credentials
// and REST changes included.
func Guard(allowed func(remote string) bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed(r.RemoteAddr) {
			http.Error(w, "keyshard: this address may not use the web port (web_allow_ips, else allow_ips)", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}
