package admin

import (
	"context"
	_ "embed"
	"net/http"
	"time"

	"github.com/keyshard/keyshard/proxy"
	"github.com/keyshard/keyshard/proxy/control"
)

// statusHTML is the status page: one self-contained file (inline CSS and
// JS, nothing fetched but /api/v1/status) that redraws itself every 2 s.
//
//go:embed status.html
var statusHTML []byte

// statusDigests is how many digests (by total time) the status page shows.
const statusDigests = 10

// statusPage mounts the live status page on mux: GET /status (the HTML,
// behind the web credentials like the REST API) and GET /api/v1/status,
// the JSON it reads, registered with REST's handler wrapper h.
func statusPage(mux *http.ServeMux, srv *proxy.Server, h func(pattern string, f func(r *http.Request) (any, error))) {
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		if !authorized(srv, w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		// Only the page's own inline style and script, and fetches to this origin.
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; "+
			"connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		_, _ = w.Write(statusHTML)
	})
	h("GET /api/v1/status", func(r *http.Request) (any, error) {
		top, err := srv.Digests(statusDigests, "total")
		if err != nil {
			return nil, err
		}
		nodes := srv.Backends()
		if nodes == nil {
			nodes = []proxy.Backend{}
		}
		// The instances sharing the config (etcd); the page goes on
		// without them when etcd does not answer.
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		instances, err := srv.Control().Proxies(ctx)
		cancel()
		instancesErr := ""
		if err != nil {
			instances, instancesErr = []control.Proxy{}, err.Error()
		}
		return statusJSON{
			Instances:      instances,
			InstancesError: instancesErr,
			Proxy:          srv.Control().Status(),
			Config:         srv.ConfigRevision(),
			Nodes:          nodes,
			History:        srv.History(),
			Digests:        digestsJSON(top),
			DigestsSince:   srv.DigestsSince().UTC().Format(time.RFC3339),
			Processes:      srv.Processes("", false),
			Now:            time.Now().Format(time.RFC3339),
		}, nil
	})
}

// statusJSON is GET /api/v1/status: everything the status page shows.
type statusJSON struct {
	Proxy        control.Status       `json:"proxy"`
	Config       proxy.ConfigRevision `json:"config"`
	Nodes        []proxy.Backend      `json:"nodes"`
	History      []proxy.Sample       `json:"history"` // one per second, oldest first
	Digests      []digestJSON         `json:"digests"` // the top statusDigests by total time
	DigestsSince string               `json:"digests_since"`
	Processes    []proxy.Process      `json:"processes"`
	Now          string               `json:"now"`
	// Instances are the keyshard instances sharing this one's config
	// (only this one for a config file); InstancesError says why they
	// could not be listed.
	Instances      []control.Proxy `json:"instances"`
	InstancesError string          `json:"instances_error"`
}
