package admin

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/proxy"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/control"
	"github.com/keyshard/keyshard/proxy/digest"
)

// REST mounts kingshard's /api/v1 endpoints on mux, behind HTTP basic auth
// with web_user and web_password (read from the running config, so a
// reload changes them). JSON in and out, in kingshard's shapes for its
// endpoints (docs/openapi.yaml describes them all); a change answers "ok",
// a failure {"error": "..."} with 400 for a bad argument, 404 for a
// blacklist entry to delete that is not there (as kingshard), 409 or 503
// for a change a shared config (etcd) does not take, 500 otherwise.
func REST(mux *http.ServeMux, srv *proxy.Server) {
	// by is the controls as the request's web user uses them.
	by := func(r *http.Request) control.Controls {
		u, _, _ := r.BasicAuth()
		return srv.Control().By(control.Actor{User: u, Via: "REST", From: r.RemoteAddr})
	}
	h := func(pattern string, f func(r *http.Request) (any, error)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			if !authorized(srv, w, r) {
				return
			}
			v, err := f(r)
			if err != nil {
				writeJSON(w, httpStatus(err), map[string]string{"error": mysqlMessage(err)})
				return
			}
			if v == nil {
				v = "ok"
			}
			writeJSON(w, http.StatusOK, v)
		})
	}
	h("GET /api/v1/nodes/status", func(*http.Request) (any, error) { return kingshardNodes(srv.Backends()), nil })
	h("POST /api/v1/nodes/slaves", func(r *http.Request) (any, error) {
		var a nodeArgs
		if err := bind(r, &a); err != nil {
			return nil, err
		}
		return nil, by(r).AddSlave(a.Node, a.Addr)
	})
	h("DELETE /api/v1/nodes/slaves", func(r *http.Request) (any, error) {
		var a nodeArgs
		if err := bind(r, &a); err != nil {
			return nil, err
		}
		return nil, by(r).DelSlave(a.Node, a.Addr)
	})
	upDown := func(role string) func(r *http.Request) (any, error) {
		return func(r *http.Request) (any, error) {
			var a nodeArgs
			if err := bind(r, &a); err != nil {
				return nil, err
			}
			switch strings.ToLower(a.Opt) {
			case "up", "down":
				return nil, by(r).SetBackendDown(a.Node, role, a.Addr, strings.EqualFold(a.Opt, "down"))
			}
			return nil, argErr("opt must be up or down, not %q", a.Opt)
		}
	}
	h("PUT /api/v1/nodes/slaves/status", upDown("slave"))
	h("PUT /api/v1/nodes/masters/status", upDown("master"))

	// kingshard answers the bare string "online" or "offline" (LVS health
	// checks match it); the details are in GET /api/v1/status.
	h("GET /api/v1/proxy/status", func(*http.Request) (any, error) { return srv.Control().Status().State, nil })
	h("PUT /api/v1/proxy/status", func(r *http.Request) (any, error) {
		var a struct {
			Opt string `json:"opt"`
		}
		if err := bind(r, &a); err != nil {
			return nil, err
		}
		return nil, change(by(r), "proxy", a.Opt)
	})
	h("GET /api/v1/proxy/config", func(*http.Request) (any, error) { return kv(configRows(srv)), nil })
	h("GET /api/v1/proxy/schema", func(*http.Request) (any, error) { return kingshardSchema(srv.Config()), nil })

	h("GET /api/v1/proxy/allow_ips", func(*http.Request) (any, error) { return nonNil(srv.AllowIPs()), nil })
	allowIPs := func(add bool) func(r *http.Request) (any, error) {
		return func(r *http.Request) (any, error) {
			var a struct {
				AllowIPs []string `json:"allow_ips"`
			}
			if err := bind(r, &a); err != nil {
				return nil, err
			}
			for _, ip := range a.AllowIPs {
				// As kingshard: adding an address already there, or
				// deleting one that is not, is no error.
				if slices.Contains(srv.AllowIPs(), strings.TrimSpace(ip)) == add {
					continue
				}
				var err error
				if add {
					err = by(r).AddAllowIP(ip)
				} else {
					err = by(r).DelAllowIP(ip)
				}
				if err != nil {
					return nil, err
				}
			}
			return nil, nil
		}
	}
	h("POST /api/v1/proxy/allow_ips", allowIPs(true))
	h("DELETE /api/v1/proxy/allow_ips", allowIPs(false))

	h("GET /api/v1/proxy/black_sqls", func(*http.Request) (any, error) { return nonNil(srv.BlackSQLs()), nil })
	blackSQL := func(add bool) func(r *http.Request) (any, error) {
		return func(r *http.Request) (any, error) {
			var a struct {
				SQL string `json:"sql"`
			}
			if err := bind(r, &a); err != nil {
				return nil, err
			}
			if add {
				return nil, by(r).AddBlackSQL(a.SQL)
			}
			return nil, by(r).DelBlackSQL(a.SQL)
		}
	}
	h("POST /api/v1/proxy/black_sqls", blackSQL(true))
	h("DELETE /api/v1/proxy/black_sqls", blackSQL(false))

	h("GET /api/v1/proxy/slow_sql/time", func(*http.Request) (any, error) { return srv.Config().SlowLogTime, nil })
	h("PUT /api/v1/proxy/slow_sql/time", func(r *http.Request) (any, error) {
		var a struct {
			SlowTime json.Number `json:"slow_time"` // a number, as kingshard takes it; a string as its first versions did
		}
		if err := bind(r, &a); err != nil {
			return nil, err
		}
		return nil, change(by(r), "slow_log_time", a.SlowTime.String())
	})
	h("PUT /api/v1/proxy/slow_sql/status", func(r *http.Request) (any, error) {
		var a struct {
			Opt string `json:"opt"`
		}
		if err := bind(r, &a); err != nil {
			return nil, err
		}
		return nil, change(by(r), "log_sql", a.Opt)
	})
	h("GET /api/v1/digests", func(r *http.Request) (any, error) {
		limit := defaultDigests
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, argErr("limit: want a row count >= 0 (0: all), not %q", v)
			}
			limit = n
		}
		top, err := srv.Digests(limit, r.URL.Query().Get("order"))
		if err != nil {
			return nil, err
		}
		return map[string]any{"since": srv.DigestsSince().UTC(), "digests": digestsJSON(top)}, nil
	})
	h("DELETE /api/v1/digests", func(r *http.Request) (any, error) { return nil, by(r).ResetDigests() })
	h("GET /api/v1/proxies", func(r *http.Request) (any, error) { return orEmpty(srv.Control().Proxies(r.Context())) })
	h("GET /api/v1/processlist", func(r *http.Request) (any, error) {
		full, _ := strconv.ParseBool(r.URL.Query().Get("full"))
		return srv.Processes("", full), nil
	})
	h("GET /api/v1/xa", func(r *http.Request) (any, error) { return orEmpty(srv.XABranches(r.Context())) })
	h("PUT /api/v1/xa/commit", func(r *http.Request) (any, error) { return resolveXA(by(r), r, true) })
	h("PUT /api/v1/xa/rollback", func(r *http.Request) (any, error) { return resolveXA(by(r), r, false) })
	h("GET /api/v1/shards/check", func(r *http.Request) (any, error) {
		return orEmpty(srv.CheckShards(r.Context()))
	})
	h("PUT /api/v1/proxy/config/save", func(r *http.Request) (any, error) { return nil, by(r).SaveConfig() })
	h("PUT /api/v1/proxy/config/reload", func(r *http.Request) (any, error) {
		force, _ := strconv.ParseBool(r.URL.Query().Get("force"))
		warnings, err := reload(by(r), force)
		if err != nil {
			return nil, err
		}
		return map[string]any{"result": "ok", "warnings": nonNil(warnings)}, nil
	})
	statusPage(mux, srv, h)
}

// digestsJSON converts digests for REST (never nil: an empty list is []).
func digestsJSON(top []digest.Stats) []digestJSON {
	out := make([]digestJSON, 0, len(top))
	for _, d := range top {
		j := digestJSON{Stats: d, TotalMs: digest.Millis(d.Total), AvgMs: digest.Millis(d.Avg), MinMs: digest.Millis(d.Min), MaxMs: digest.Millis(d.Max),
			P50Ms: digest.Millis(d.P50), P99Ms: digest.Millis(d.P99), StagesMs: map[string]float64{}}
		for i, v := range d.Stages {
			j.StagesMs[digest.Stage(i).String()] = digest.Millis(v)
		}
		out = append(out, j)
	}
	return out
}

// digestJSON is a digest as REST shows it: times in milliseconds.
type digestJSON struct {
	digest.Stats
	TotalMs  float64            `json:"total_ms"`
	AvgMs    float64            `json:"avg_ms"`
	MinMs    float64            `json:"min_ms"`
	MaxMs    float64            `json:"max_ms"`
	P50Ms    float64            `json:"p50_ms"`
	P99Ms    float64            `json:"p99_ms"`
	StagesMs map[string]float64 `json:"stages_ms"`
}

type nodeArgs struct {
	Opt  string `json:"opt"`
	Node string `json:"node"`
	Addr string `json:"addr"`
}

// kingshardNode is a backend as kingshard's GET /api/v1/nodes/status shows
// it (its web/api.go DBStatus), keyshard's Backend fields besides.
// keyshard keeps no time of the last check and does not count the
// connections taken from and given back to a pool: laste_ping is "" and
// push_conn_count and pop_conn_count are 0.
type kingshardNode struct {
	proxy.Backend
	LastPing      string `json:"laste_ping"` // sic: kingshard's name
	CacheConn     int64  `json:"cache_conn"` // open idle connections, kingshard's cached ones
	PushConnCount int64  `json:"push_conn_count"`
	PopConnCount  int64  `json:"pop_conn_count"`
}

func kingshardNodes(backends []proxy.Backend) []kingshardNode {
	out := make([]kingshardNode, 0, len(backends))
	for _, b := range backends {
		out = append(out, kingshardNode{Backend: b, CacheConn: b.Idle})
	}
	return out
}

// kingshardRule is a row of kingshard's GET /api/v1/proxy/schema (its
// web/api.go ShardConfig): a schema's default rule, then its shard rules.
// The names are kingshard's, whose fields without a json tag kept their
// Go names, and an empty list is null as there; keyshard's additions are
// lower case and left out when empty.
type kingshardRule struct {
	User          string   `json:"user"`
	DB            string   `json:"db"`
	Table         string   `json:"Table"`
	Key           string   `json:"Key"`
	Nodes         []string `json:"Nodes"`
	Locations     []int    `json:"Locations"`
	Type          string   `json:"Type"`
	TableRowLimit int      `json:"TableRowLimit"`
	DateRange     []string `json:"DateRange"`

	Default       string   `json:"default,omitempty"` // the default rule's node
	ListValues    []string `json:"list_values,omitempty"`
	AutoIncrement string   `json:"auto_increment,omitempty"`
}

func kingshardSchema(c *config.Config) []kingshardRule {
	out := make([]kingshardRule, 0, 8)
	for _, sc := range c.SchemaList {
		out = append(out, kingshardRule{User: sc.User, Type: "default", Nodes: sc.Nodes, Default: sc.Default})
		for _, r := range sc.ShardRule {
			out = append(out, kingshardRule{User: sc.User, DB: r.DB, Table: r.Table, Key: r.Key, Nodes: r.Nodes,
				Locations: r.Locations, Type: r.Type, TableRowLimit: r.TableRowLimit, DateRange: r.DateRange,
				ListValues: r.ListValues, AutoIncrement: r.AutoIncrement})
		}
	}
	return out
}

// orEmpty returns s, an empty list rather than null when there is none.
func orEmpty[T any](s []T, err error) (any, error) {
	if s == nil && err == nil {
		s = []T{}
	}
	return s, err
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func kv(rows [][]string) map[string]string {
	m := make(map[string]string, len(rows))
	for _, r := range rows {
		m[r[0]] = r[1]
	}
	return m
}

// bind decodes the JSON body into v (unknown fields are an error).
func bind(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return argErr("request body: %v", err)
	}
	return nil
}

func authorized(srv *proxy.Server, w http.ResponseWriter, r *http.Request) bool {
	c := srv.Config()
	if c.WebUser == "" {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "this needs web_user and web_password, which ks.yaml does not set " +
			"(the REST API is off; pprof opens without them with web_pprof_auth: false)"})
		return false
	}
	if d := srv.WebLockedFor(r.RemoteAddr); d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(d.Round(time.Second)/time.Second)))
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "this address is locked out after failed logins (login_lockout_failures); retry in " + d.Round(time.Second).String()})
		return false
	}
	u, p, ok := r.BasicAuth()
	if ok && subtle.ConstantTimeCompare([]byte(u), []byte(c.WebUser)) == 1 &&
		subtle.ConstantTimeCompare([]byte(p), []byte(c.WebPassword)) == 1 {
		srv.WebLoginOK(r.RemoteAddr)
		return true
	}
	if ok { // wrong credentials; none at all is a browser's first try
		time.Sleep(srv.WebLoginFailed(r.RemoteAddr, u))
	}
	w.Header().Set("WWW-Authenticate", `Basic realm="keyshard"`)
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
	return false
}

// httpStatus maps an operator error to an HTTP status: a bad argument (a
// MySQL argument or syntax error) is the client's fault.
func httpStatus(err error) int {
	if control.IsMissing(err) {
		return http.StatusNotFound // as kingshard, for a blacklist entry
	}
	if se := (*control.SharedError)(nil); errors.As(err, &se) {
		if se.Busy {
			return http.StatusConflict // the shared config's state: retry, or fix it first
		}
		return http.StatusServiceUnavailable // etcd unreachable
	}
	var me *mysql.MyError
	if errors.As(err, &me) || control.IsArgError(err) {
		if me == nil || me.Code == mysql.ER_WRONG_ARGUMENTS || me.Code == mysql.ER_PARSE_ERROR {
			return http.StatusBadRequest
		}
	}
	return http.StatusInternalServerError
}

func mysqlMessage(err error) string {
	var me *mysql.MyError
	if errors.As(err, &me) {
		return me.Message
	}
	return err.Error()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// resolveXA finishes the XA transaction ?xid= by hand (see
// control.Controls.ResolveXA, xa.Coordinator.Resolve).
func resolveXA(ctl control.Controls, r *http.Request, commit bool) (any, error) {
	n, err := ctl.ResolveXA(r.Context(), r.URL.Query().Get("xid"), commit)
	if err != nil {
		return nil, argErr("%v", err)
	}
	return map[string]any{"result": "ok", "branches": n}, nil
}
