package admin

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/proxy"
	"github.com/keyshard/keyshard/proxy/digest"
)

// REST mounts kingshard's /api/v1 endpoints on mux, behind HTTP basic auth
// with web_user and web_password (read from the running config, so a
// reload changes them). JSON in and out; a change answers "ok", a failure
// {"error": "..."} with 400 for a bad argument, 500 otherwise.
func REST(mux *http.ServeMux, srv *proxy.Server) {
	// by is the controls as the request's web user uses them.
	by := func(r *http.Request) proxy.Controls {
		u, _, _ := r.BasicAuth()
		return srv.By(proxy.Actor{User: u, Via: "REST", From: r.RemoteAddr})
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
	h("GET /api/v1/nodes/status", func(*http.Request) (any, error) { return srv.Backends(), nil })
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

	h("GET /api/v1/proxy/status", func(*http.Request) (any, error) { return srv.Status(), nil })
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
	h("GET /api/v1/proxy/schema", func(*http.Request) (any, error) {
		var out []map[string]string
		for _, row := range schemaRows(srv.Config()) {
			m := map[string]string{}
			for i, c := range schemaCols {
				m[strings.ToLower(c)] = row[i]
			}
			out = append(out, m)
		}
		return out, nil
	})

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
			SlowTime json.Number `json:"slow_time"` // kingshard sends a string; a number is accepted too
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
		out := make([]digestJSON, 0, len(top))
		for _, d := range top {
			j := digestJSON{Stats: d, TotalMs: digest.Millis(d.Total), AvgMs: digest.Millis(d.Avg), MinMs: digest.Millis(d.Min), MaxMs: digest.Millis(d.Max),
				P50Ms: digest.Millis(d.P50), P99Ms: digest.Millis(d.P99), StagesMs: map[string]float64{}}
			for i, v := range d.Stages {
				j.StagesMs[digest.Stage(i).String()] = digest.Millis(v)
			}
			out = append(out, j)
		}
		return map[string]any{"since": srv.DigestsSince().UTC(), "digests": out}, nil
	})
	h("DELETE /api/v1/digests", func(r *http.Request) (any, error) { return nil, by(r).ResetDigests() })
	h("GET /api/v1/processlist", func(r *http.Request) (any, error) {
		full, _ := strconv.ParseBool(r.URL.Query().Get("full"))
		return srv.Processes("", full), nil
	})
	h("GET /api/v1/xa", func(r *http.Request) (any, error) { return srv.XABranches(r.Context()) })
	h("PUT /api/v1/xa/commit", func(r *http.Request) (any, error) { return resolveXA(by(r), r, true) })
	h("PUT /api/v1/xa/rollback", func(r *http.Request) (any, error) { return resolveXA(by(r), r, false) })
	h("GET /api/v1/shards/check", func(r *http.Request) (any, error) {
		return srv.CheckShards(r.Context())
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
	var me *mysql.MyError
	if errors.As(err, &me) || proxy.IsArgError(err) {
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
// proxy.Server.ResolveXA).
func resolveXA(ctl proxy.Controls, r *http.Request, commit bool) (any, error) {
	n, err := ctl.ResolveXA(r.Context(), r.URL.Query().Get("xid"), commit)
	if err != nil {
		return nil, argErr("%v", err)
	}
	return map[string]any{"result": "ok", "branches": n}, nil
}
