package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestOpenAPI checks docs/openapi.yaml against the web port: every path
// registered in proxy/admin is documented and every documented one is
// registered; kingshard's endpoints are all there and tagged so; every
// operation is called with the spec's examples and its status, content
// type and JSON answer must be documented and match the schema; the
// documented authentication is what the server asks for; and the
// documented error answers are what it gives.
func TestOpenAPI(t *testing.T) {
	spec := loadOpenAPI(t)
	ops := spec.operations(t)

	t.Run("registrations", func(t *testing.T) { checkRegistrations(t, ops) })
	t.Run("kingshard", func(t *testing.T) { checkKingshardTags(t, spec, ops) })
	t.Run("examples", func(t *testing.T) { checkExamples(t, spec, ops) })

	// Sharded rules, so that proxy/schema shows kingshard's Locations and
	// DateRange, and shards/check has rows.
	defaults := "  - user: ks\n    nodes: [node1, node2]\n    default: node1\n    shard:\n      -\n"
	rules := "  - user: ks\n    nodes: [node1, node2]\n    default: node1\n    shard:\n" +
		"      - {db: ks_oapi, table: t_hash, key: id, type: hash, nodes: [node1, node2], locations: [2, 2]}\n" +
		"      - {db: ks_oapi, table: t_month, key: dt, type: date_month, nodes: [node1, node2], date_range: [202401-202406, 202407-202412]}\n"
	yml := baseYAML("%ADDR%")
	if !strings.Contains(yml, defaults) {
		t.Fatalf("baseYAML changed: update TestOpenAPI's shard rules")
	}
	yml = strings.Replace(yml, defaults, rules, 1) + "web_user: admin\nweb_password: webpw\nweb_allow_ips: 127.0.0.1\n"
	p := startProxy(t, yml)

	// Something for digests, processlist and the status page to show: a
	// statement run, and a session left open.
	db := p.open(t, "ks:ks", "", "")
	db.SetMaxOpenConns(1)
	mustExec(t, db, "SELECT 1")
	// The XA decision table, for PUT /api/v1/xa/rollback.
	mustExec(t, direct(t, basePort, ""), "CREATE DATABASE IF NOT EXISTS keyshard")
	mustExec(t, direct(t, basePort, ""), "CREATE TABLE IF NOT EXISTS keyshard.xa_log (gtrid VARCHAR(64) NOT NULL PRIMARY KEY, "+
		"outcome CHAR(1) NOT NULL, decided_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)) ENGINE=InnoDB")

	// The examples' addresses are kingshard's documentation's: node1's
	// master 127.0.0.1:3306 and a slave 127.0.0.1:3307 are this run's.
	addrs := strings.NewReplacer("127.0.0.1:3306", fmt.Sprintf("127.0.0.1:%d", basePort),
		"127.0.0.1:3307", fmt.Sprintf("127.0.0.1:%d", refPort))

	t.Run("walk", func(t *testing.T) {
		var reads, changes []*oaOp
		for _, op := range ops {
			switch {
			case slices.Contains(openAPIChanges, op.key()):
			case op.method != "GET":
				t.Errorf("%s changes state: add it to openAPIChanges in the order the walk may call it", op.key())
			default:
				reads = append(reads, op)
			}
		}
		for _, k := range openAPIChanges {
			i := slices.IndexFunc(ops, func(op *oaOp) bool { return op.key() == k })
			if i < 0 {
				t.Errorf("openAPIChanges lists %s, which the spec does not have", k)
				continue
			}
			changes = append(changes, ops[i])
		}
		calls := 0
		for _, op := range reads {
			calls += walkOp(t, spec, p, op, addrs)
		}
		for _, op := range changes {
			calls += walkOp(t, spec, p, op, addrs)
		}
		for _, op := range reads { // again, on the state the changes left
			if strings.HasPrefix(op.path, "/api/") {
				calls += walkOp(t, spec, p, op, addrs)
			}
		}
		t.Logf("%d operations, %d calls", len(ops), calls)
	})

	t.Run("auth", func(t *testing.T) {
		for _, op := range ops {
			auth, _ := op.op["x-keyshard-auth"].(string)
			want := 0
			switch auth {
			case "web_user", "web_pprof_auth": // web_pprof_auth is on by default
				want = http.StatusUnauthorized
			case "never", "web_metrics_auth": // web_metrics_auth is off by default
			default:
				t.Errorf("%s: x-keyshard-auth %q: want web_user, web_metrics_auth, web_pprof_auth or never", op.key(), auth)
				continue
			}
			sec := op.security(spec)
			switch auth {
			case "web_user":
				if len(sec) != 1 || !sec[0] {
					t.Errorf("%s: security must be basicAuth only", op.key())
				}
			case "never":
				if len(sec) != 0 {
					t.Errorf("%s: security must be []", op.key())
				}
			default:
				if len(sec) != 2 || sec[0] == sec[1] {
					t.Errorf("%s: security must be basicAuth or none", op.key())
				}
			}
			if want == 0 {
				continue // walked without credentials: see walkOp
			}
			r := callOp(t, spec, p, op, addrs, "", false)
			if r.code != want {
				t.Errorf("%s without credentials: %d, want %d", op.key(), r.code, want)
				continue
			}
			checkAnswer(t, spec, op, r)
			if r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without WWW-Authenticate", op.key())
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		find := func(k string) *oaOp {
			i := slices.IndexFunc(ops, func(op *oaOp) bool { return op.key() == k })
			if i < 0 {
				t.Fatalf("the spec has no %s", k)
			}
			return ops[i]
		}
		for _, c := range []struct {
			op, body string
			code     int
		}{
			{"PUT /api/v1/proxy/status", `{"opt":"sideways"}`, 400},
			{"PUT /api/v1/proxy/status", `{"opt":"online","extra":1}`, 400},
			{"PUT /api/v1/proxy/status", `{"opt":`, 400},
			{"PUT /api/v1/nodes/slaves/status", `{"opt":"down","node":"nope","addr":"1.2.3.4:5"}`, 400},
			{"POST /api/v1/proxy/allow_ips", `{"allow_ips":["not an address"]}`, 400},
			{"DELETE /api/v1/proxy/black_sqls", `{"sql":"select 424242 from nowhere"}`, 404},
			{"PUT /api/v1/proxy/slow_sql/time", `{"slow_time":"soon"}`, 400},
		} {
			op := find(c.op)
			r := callOp(t, spec, p, op, addrs, c.body, true)
			if r.code != c.code {
				t.Errorf("%s %s: %d, want %d: %s", c.op, c.body, r.code, c.code, r.body)
				continue
			}
			checkAnswer(t, spec, op, r)
		}
		// No web_user: the REST API is off (JSON 403); /metrics still open.
		off := startProxy(t, baseYAML("%ADDR%"))
		for _, k := range []string{"GET /api/v1/proxy/status", "GET /api/v1/status", "GET /status"} {
			op := find(k)
			r := callOp(t, spec, off, op, addrs, "", true)
			if r.code != http.StatusForbidden {
				t.Errorf("%s without web_user set: %d, want 403", k, r.code)
				continue
			}
			checkAnswer(t, spec, op, r)
		}
		// An address outside web_allow_ips: a plain-text 403 on every path.
		far := startProxy(t, baseYAML("%ADDR%")+"web_user: admin\nweb_password: webpw\nweb_allow_ips: 10.9.8.7\n")
		for _, op := range ops {
			if op.method != "GET" {
				continue
			}
			r := callOp(t, spec, far, op, addrs, "", true)
			if r.code != http.StatusForbidden {
				t.Errorf("%s from outside web_allow_ips: %d, want 403", op.key(), r.code)
				continue
			}
			checkAnswer(t, spec, op, r)
		}
	})
}

// openAPIChanges are the operations that change state, in the order the
// walk calls them so that each finds what it needs (a slave added before
// it is taken down and deleted, an entry added before it is deleted); an
// operation with several examples is called with each, in the order of
// their names (down then up, offline then online).
var openAPIChanges = []string{
	"POST /api/v1/nodes/slaves",
	"PUT /api/v1/nodes/slaves/status",
	"DELETE /api/v1/nodes/slaves",
	"PUT /api/v1/nodes/masters/status",
	"PUT /api/v1/proxy/status",
	"POST /api/v1/proxy/allow_ips",
	"DELETE /api/v1/proxy/allow_ips",
	"POST /api/v1/proxy/black_sqls",
	"DELETE /api/v1/proxy/black_sqls",
	"PUT /api/v1/proxy/slow_sql/status",
	"PUT /api/v1/proxy/slow_sql/time",
	"PUT /api/v1/proxy/config/save",
	"PUT /api/v1/proxy/config/reload",
	"DELETE /api/v1/digests",
	"PUT /api/v1/xa/rollback",
	"PUT /api/v1/xa/commit",
}

// openAPIStatus is the status an operation's examples get when it is not
// 200: the example xid has no commit decision (the rollback before
// recorded one), so only a rollback can finish it.
var openAPIStatus = map[string]int{
	"PUT /api/v1/xa/commit": http.StatusBadRequest,
}

// kingshardAPI is kingshard's REST API (its web/server.go RegisterURL).
var kingshardAPI = []string{
	"GET /api/v1/nodes/status",
	"POST /api/v1/nodes/slaves",
	"DELETE /api/v1/nodes/slaves",
	"PUT /api/v1/nodes/slaves/status",
	"PUT /api/v1/nodes/masters/status",
	"GET /api/v1/proxy/status",
	"PUT /api/v1/proxy/status",
	"GET /api/v1/proxy/schema",
	"GET /api/v1/proxy/allow_ips",
	"POST /api/v1/proxy/allow_ips",
	"DELETE /api/v1/proxy/allow_ips",
	"GET /api/v1/proxy/black_sqls",
	"POST /api/v1/proxy/black_sqls",
	"DELETE /api/v1/proxy/black_sqls",
	"GET /api/v1/proxy/slow_sql/time",
	"PUT /api/v1/proxy/slow_sql/status",
	"PUT /api/v1/proxy/slow_sql/time",
	"PUT /api/v1/proxy/config/save",
}

// oaSpec is the parsed OpenAPI document.
type oaSpec struct{ doc map[string]any }

// oaOp is one operation of the spec.
type oaOp struct {
	method, path string
	op           map[string]any
}

func (o *oaOp) key() string { return o.method + " " + o.path }

func loadOpenAPI(t *testing.T) *oaSpec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("docs/openapi.yaml: %v", err)
	}
	if doc["openapi"] != "3.0.3" {
		t.Fatalf("docs/openapi.yaml: openapi %v, want 3.0.3", doc["openapi"])
	}
	return &oaSpec{doc: doc}
}

var oaMethods = []string{"get", "put", "post", "delete", "patch", "head", "options"}

func (s *oaSpec) operations(t *testing.T) []*oaOp {
	paths, _ := s.doc["paths"].(map[string]any)
	if len(paths) == 0 {
		t.Fatal("docs/openapi.yaml has no paths")
	}
	var out []*oaOp
	for path, v := range paths {
		item, _ := v.(map[string]any)
		for _, m := range oaMethods {
			if op, ok := item[m].(map[string]any); ok {
				out = append(out, &oaOp{method: strings.ToUpper(m), path: path, op: op})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// resolve follows $ref (local references only).
func (s *oaSpec) resolve(v any) map[string]any {
	m, _ := v.(map[string]any)
	for i := 0; m != nil && i < 10; i++ {
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		var cur any = s.doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			cm, _ := cur.(map[string]any)
			cur = cm[part]
		}
		if cur == nil {
			panic("openapi: unresolved $ref " + ref)
		}
		m, _ = cur.(map[string]any)
	}
	return m
}

// security returns, for each alternative of the operation's security (or
// the document's), whether it is basicAuth (false: {}, no credentials).
func (o *oaOp) security(s *oaSpec) []bool {
	sec, ok := o.op["security"].([]any)
	if !ok {
		sec, _ = s.doc["security"].([]any)
	}
	var out []bool
	for _, alt := range sec {
		m, _ := alt.(map[string]any)
		_, basic := m["basicAuth"]
		out = append(out, basic)
	}
	return out
}

var (
	// h("METHOD /path", ...) in REST and the status page, and the
	// mux.Handle/HandleFunc("[METHOD ]/path", ...) of the other handlers.
	oaRegRE = regexp.MustCompile(`(?:\bh|\bmux\.Handle(?:Func)?)\(\s*"([^"]+)"`)
)

// checkRegistrations compares the paths registered in proxy/admin with the
// spec's, both ways.
func checkRegistrations(t *testing.T, ops []*oaOp) {
	files, err := filepath.Glob(filepath.Join(repoRoot, "proxy", "admin", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no proxy/admin sources: %v", err)
	}
	type reg struct{ method, path, file string }
	var regs []reg
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range oaRegRE.FindAllStringSubmatch(string(src), -1) {
			method, path, ok := strings.Cut(m[1], " ")
			if !ok {
				method, path = "", m[1] // any method: documented as GET
			}
			regs = append(regs, reg{method, strings.TrimSpace(path), filepath.Base(f)})
		}
	}
	if len(regs) < 20 {
		t.Fatalf("found only %d registrations in proxy/admin: is the pattern (%s) out of date?", len(regs), oaRegRE)
	}
	has := map[string]bool{}
	for _, op := range ops {
		has[op.key()] = true
	}
	for _, r := range regs {
		m := r.method
		if m == "" {
			m = "GET"
		}
		if !has[m+" "+r.path] {
			t.Errorf("%s registers %s %s, which docs/openapi.yaml does not describe", r.file, m, r.path)
		}
	}
	for _, op := range ops {
		found := slices.ContainsFunc(regs, func(r reg) bool {
			if r.method != "" && r.method != op.method || r.method == "" && op.method != "GET" {
				return false
			}
			if r.path == op.path {
				return true
			}
			// {name} under a subtree pattern ("/debug/pprof/").
			i := strings.Index(op.path, "{")
			return i > 0 && strings.HasSuffix(r.path, "/") && strings.HasPrefix(op.path[:i], r.path)
		})
		if !found {
			t.Errorf("docs/openapi.yaml describes %s, which proxy/admin does not register", op.key())
		}
	}
}

// checkKingshardTags checks that kingshard's API is all there and tagged
// kingshard, and the rest tagged keyshard with x-keyshard-addition.
func checkKingshardTags(t *testing.T, s *oaSpec, ops []*oaOp) {
	for _, op := range ops {
		tags, _ := op.op["tags"].([]any)
		addition, _ := op.op["x-keyshard-addition"].(bool)
		if slices.Contains(kingshardAPI, op.key()) {
			if len(tags) != 1 || tags[0] != "kingshard" || addition {
				t.Errorf("%s is kingshard's: want tags [kingshard] and no x-keyshard-addition, have %v %v", op.key(), tags, addition)
			}
		} else if len(tags) != 1 || tags[0] != "keyshard" || !addition {
			t.Errorf("%s is keyshard's: want tags [keyshard] and x-keyshard-addition: true, have %v %v", op.key(), tags, addition)
		}
		if id, _ := op.op["operationId"].(string); id == "" {
			t.Errorf("%s has no operationId", op.key())
		}
	}
	for _, k := range kingshardAPI {
		if !slices.ContainsFunc(ops, func(op *oaOp) bool { return op.key() == k }) {
			t.Errorf("kingshard's %s is not in docs/openapi.yaml", k)
		}
	}
}

// checkExamples validates the spec's own examples against its schemas: the
// request bodies and parameters the walk sends, and the answers shown.
func checkExamples(t *testing.T, s *oaSpec, ops []*oaOp) {
	for _, op := range ops {
		if rb := s.resolve(op.op["requestBody"]); rb != nil {
			bodies := requestExamples(s, op)
			if len(bodies) == 0 {
				t.Errorf("%s takes a body but has no example", op.key())
			}
			mt := s.resolve(s.resolve(rb["content"])["application/json"])
			for _, b := range bodies {
				for _, e := range s.validate(mt["schema"], jsonValue(t, b), "body") {
					t.Errorf("%s example body %s: %s", op.key(), b, e)
				}
			}
		}
		for _, pm := range op.params(s) {
			if ex, ok := pm["example"]; ok {
				for _, e := range s.validate(pm["schema"], jsonValue(t, mustJSON(t, ex)), "parameter "+fmt.Sprint(pm["name"])) {
					t.Errorf("%s example: %s", op.key(), e)
				}
			} else if pm["required"] == true {
				t.Errorf("%s: required parameter %v has no example", op.key(), pm["name"])
			}
		}
		for code, rv := range s.resolve(op.op["responses"]) {
			for ct, mv := range s.resolve(s.resolve(rv)["content"]) {
				mt := s.resolve(mv)
				if ex, ok := mt["example"]; ok && ct == "application/json" {
					for _, e := range s.validate(mt["schema"], jsonValue(t, mustJSON(t, ex)), "example") {
						t.Errorf("%s %s example: %s", op.key(), code, e)
					}
				}
			}
		}
	}
}

func (o *oaOp) params(s *oaSpec) []map[string]any {
	var out []map[string]any
	ps, _ := o.op["parameters"].([]any)
	for _, p := range ps {
		out = append(out, s.resolve(p))
	}
	return out
}

// requestExamples are the JSON bodies to send: the example, or each of the
// examples in the order of their names.
func requestExamples(s *oaSpec, op *oaOp) []string {
	rb := s.resolve(op.op["requestBody"])
	if rb == nil {
		return nil
	}
	mt := s.resolve(s.resolve(rb["content"])["application/json"])
	if ex, ok := mt["example"]; ok {
		b, _ := json.Marshal(ex)
		return []string{string(b)}
	}
	exs := s.resolve(mt["examples"])
	names := make([]string, 0, len(exs))
	for n := range exs {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		b, _ := json.Marshal(s.resolve(exs[n])["value"])
		out = append(out, string(b))
	}
	return out
}

// oaAnswer is a response.
type oaAnswer struct {
	code   int
	header http.Header
	body   []byte
	what   string // the request, for messages
}

// callOp calls op on p with body (sent as is) and the spec's parameter
// examples, with the web credentials if auth.
func callOp(t *testing.T, s *oaSpec, p *testProxy, op *oaOp, addrs *strings.Replacer, body string, auth bool) oaAnswer {
	t.Helper()
	path, q := op.path, url.Values{}
	for _, pm := range op.params(s) {
		ex, ok := pm["example"]
		if !ok {
			continue
		}
		v := addrs.Replace(fmt.Sprint(ex))
		switch pm["in"] {
		case "path":
			path = strings.ReplaceAll(path, "{"+fmt.Sprint(pm["name"])+"}", url.PathEscape(v))
		case "query":
			q.Set(fmt.Sprint(pm["name"]), v)
		}
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	body = addrs.Replace(body)
	req, err := http.NewRequest(op.method, p.Web+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth {
		req.SetBasicAuth("admin", "webpw")
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return oaAnswer{code: -1, body: []byte(err.Error()), what: op.method + " " + path + " " + body}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", op.method, path, err)
	}
	return oaAnswer{code: resp.StatusCode, header: resp.Header, body: data, what: op.method + " " + path + " " + body}
}

// walkOp calls op with each of its examples and checks the answers; it
// returns the number of calls.
func walkOp(t *testing.T, s *oaSpec, p *testProxy, op *oaOp, addrs *strings.Replacer) int {
	t.Helper()
	bodies := requestExamples(s, op)
	if bodies == nil {
		bodies = []string{""}
	}
	// What needs no credentials by default is called without.
	auth := true
	if a := op.op["x-keyshard-auth"]; a == "never" || a == "web_metrics_auth" {
		auth = false
	}
	want := http.StatusOK
	if c, ok := openAPIStatus[op.key()]; ok {
		want = c
	}
	for _, b := range bodies {
		r := callOp(t, s, p, op, addrs, b, auth)
		if r.code != want {
			t.Errorf("%s: %d, want %d: %s", r.what, r.code, want, r.body)
			continue
		}
		checkAnswer(t, s, op, r)
	}
	return len(bodies)
}

// checkAnswer checks that r's status and content type are documented for
// op and a JSON answer matches the documented schema.
func checkAnswer(t *testing.T, s *oaSpec, op *oaOp, r oaAnswer) {
	t.Helper()
	responses := s.resolve(op.op["responses"])
	rv, ok := responses[fmt.Sprint(r.code)]
	if !ok {
		rv, ok = responses["default"]
	}
	if !ok {
		t.Errorf("%s: status %d is not documented: %s", r.what, r.code, r.body)
		return
	}
	content := s.resolve(s.resolve(rv)["content"])
	if len(content) == 0 {
		if len(r.body) > 0 {
			t.Errorf("%s: %d has a body but the spec documents none", r.what, r.code)
		}
		return
	}
	ct, _, err := mime.ParseMediaType(r.header.Get("Content-Type"))
	if err != nil {
		t.Errorf("%s: Content-Type %q: %v", r.what, r.header.Get("Content-Type"), err)
		return
	}
	mv, ok := content[ct]
	if !ok {
		t.Errorf("%s: %d answered %s, the spec documents %v", r.what, r.code, ct, oaKeys(content))
		return
	}
	if ct != "application/json" {
		if len(r.body) == 0 {
			t.Errorf("%s: empty %s answer", r.what, ct)
		}
		return
	}
	v := jsonValue(t, string(r.body))
	for _, e := range s.validate(s.resolve(mv)["schema"], v, "answer") {
		t.Errorf("%s: %d: %s\n%s", r.what, r.code, e, abbrev(r.body))
	}
}

func oaKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func abbrev(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "..."
	}
	return string(b)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// jsonValue decodes JSON keeping numbers as json.Number, so that integers
// and other numbers can be told apart.
func jsonValue(t *testing.T, s string) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, s)
	}
	return v
}

// validate checks v against schema (the subset of OpenAPI 3.0 the spec
// uses: $ref, type, nullable, enum, required, properties,
// additionalProperties, items, oneOf, format date-time, pattern, minimum)
// and returns what does not match. An unknown keyword is an error, so
// that the spec cannot use one this validator would silently skip.
func (s *oaSpec) validate(schema any, v any, at string) []string {
	sch := s.resolve(schema)
	if sch == nil {
		return []string{at + ": no schema"}
	}
	for k := range sch {
		switch k {
		case "type", "nullable", "enum", "required", "properties", "additionalProperties", "items", "oneOf",
			"format", "pattern", "minimum", "description", "example", "default":
		default:
			return []string{fmt.Sprintf("%s: schema keyword %q is not supported by the test's validator", at, k)}
		}
	}
	if v == nil {
		if sch["nullable"] == true {
			return nil
		}
		return []string{at + ": null, but not nullable"}
	}
	if alts, ok := sch["oneOf"].([]any); ok {
		n := 0
		for _, a := range alts {
			if len(s.validate(a, v, at)) == 0 {
				n++
			}
		}
		if n != 1 {
			return []string{fmt.Sprintf("%s: %v matches %d of oneOf's %d schemas, want 1", at, v, n, len(alts))}
		}
	}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	typ, _ := sch["type"].(string)
	switch typ {
	case "":
		if _, ok := sch["oneOf"]; !ok {
			bad("schema without type")
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			bad("%T %v, want a string", v, v)
			break
		}
		if sch["format"] == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				bad("%q is not an RFC 3339 date-time", str)
			}
		}
		if pat, ok := sch["pattern"].(string); ok && !regexp.MustCompile(pat).MatchString(str) {
			bad("%q does not match %s", str, pat)
		}
	case "integer", "number":
		n, ok := v.(json.Number)
		if !ok {
			bad("%T %v, want a %s", v, v, typ)
			break
		}
		if typ == "integer" {
			if _, err := n.Int64(); err != nil {
				bad("%v, want an integer", n)
			}
		}
		f, _ := n.Float64()
		if min, ok := sch["minimum"]; ok {
			if m, _ := json.Number(fmt.Sprint(min)).Float64(); f < m {
				bad("%v is below the minimum %v", n, min)
			}
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			bad("%T %v, want a boolean", v, v)
		}
	case "array":
		arr, ok := v.([]any)
		if !ok {
			bad("%T %v, want an array", v, v)
			break
		}
		if _, ok := sch["items"]; !ok {
			bad("array schema without items")
		}
		for i, e := range arr {
			errs = append(errs, s.validate(sch["items"], e, fmt.Sprintf("%s[%d]", at, i))...)
		}
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			bad("%T %v, want an object", v, v)
			break
		}
		props := s.resolve(sch["properties"])
		req, _ := sch["required"].([]any)
		for _, r := range req {
			if _, ok := obj[fmt.Sprint(r)]; !ok {
				bad("required field %q is missing", r)
			}
			if _, ok := props[fmt.Sprint(r)]; !ok && sch["additionalProperties"] == false {
				bad("required field %q is not among the properties", r)
			}
		}
		names := oaKeys(obj)
		for _, k := range names {
			if ps, ok := props[k]; ok {
				errs = append(errs, s.validate(ps, obj[k], at+"."+k)...)
				continue
			}
			switch ap := sch["additionalProperties"].(type) {
			case bool:
				if !ap {
					bad("field %q is not documented (additionalProperties: false)", k)
				}
			case map[string]any:
				errs = append(errs, s.validate(ap, obj[k], at+"."+k)...)
			}
		}
	default:
		bad("unknown type %q", typ)
	}
	if enum, ok := sch["enum"].([]any); ok && len(errs) == 0 {
		if !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == fmt.Sprint(v) }) {
			bad("%v is not one of %v", v, enum)
		}
	}
	return errs
}
