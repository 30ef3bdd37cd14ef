// Package admin is keyshard's operator surface: admin SQL on the proxy port
// (SQL), kingshard's REST API under /api/v1 with basic auth (REST), and the
// HTTP endpoints Prometheus /metrics, Go's pprof under /debug/pprof/
// (mounted explicitly, never via the default mux) and /healthz. Every
// change goes through proxy.Server's controls, shared by SQL and REST.
package admin

import (
	"net/http"
	"net/http/pprof"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
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

// Handler returns the admin mux. health reports whether keyshard can serve
// (nil) or why not. Mount the REST API on it with REST.
func Handler(reg *prometheus.Registry, health func() error) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := health(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
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
