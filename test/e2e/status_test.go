package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStatusPage opens the web port's /status page in a real headless
// Chromium (installed with scripts/chromium.sh if missing) and watches the
// live page, without reloading it, while queries run through the proxy.
// The browser is driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: NUL-separated JSON on fds 3 and 4), so no
// websocket library is needed. On failure a screenshot is saved under
// os.TempDir(); KS_STATUS_SCREENSHOT=PATH saves one always.
func TestStatusPage(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%")+"web_user: admin\nweb_password: webpw\n")

	// Without credentials: 401 for the page and its JSON.
	for _, path := range []string{"/status", "/api/v1/status"} {
		resp, err := http.Get(p.Web + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
			t.Fatalf("GET %s without credentials: %d (WWW-Authenticate %q), want 401 asking for basic auth",
				path, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	// With them: the page, not cached, self-contained.
	req, _ := http.NewRequest("GET", p.Web+"/status", nil)
	req.SetBasicAuth("admin", "webpw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("GET /status: %d, Content-Type %q, Cache-Control %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"))
	}
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?(https?:)?//`).Find(html); m != nil {
		t.Errorf("the page loads something from elsewhere: %q", m)
	}

	// The JSON the page reads.
	var st map[string]json.RawMessage
	if code := rest(t, p, "GET", "/api/v1/status", "", true, &st); code != 200 {
		t.Fatalf("GET /api/v1/status: %d", code)
	}
	for _, k := range []string{"proxy", "config", "nodes", "history", "digests", "processes", "now"} {
		if len(st[k]) == 0 || string(st[k]) == "null" {
			t.Errorf("GET /api/v1/status: no %q in %v", k, st)
		}
	}

	b := startBrowser(t)
	base := strings.Replace(p.Web, "http://", "http://admin:webpw@", 1)
	pg := b.open(t, base+"/status")
	t.Cleanup(func() {
		path := os.Getenv("KS_STATUS_SCREENSHOT")
		if path == "" && !t.Failed() {
			return
		}
		if path == "" {
			path = filepath.Join(os.TempDir(), fmt.Sprintf("keyshard-status-%d.png", time.Now().UnixNano()))
		}
		if err := pg.screenshot(path); err != nil {
			t.Logf("screenshot: %v", err)
			return
		}
		t.Logf("screenshot of the status page: %s", path)
		var text string
		if t.Failed() && pg.eval("document.body.innerText", &text) == nil {
			t.Logf("page text:\n%s", text)
		}
	})

	// snap is what the page shows, read from its DOM.
	type nodeRow struct {
		Node, Addr, Role, Text string
		Statements             string // the Statements cell as shown
	}
	type snap struct {
		Refreshes int
		Marker    int
		Error     string
		Banner    string
		Header    string
		Proxy     string
		Nodes     []nodeRow
		NodesText string
		Procs     string
		Instances string
		Digests   string
		BackendIn string // the stage bars' classes of the SLEEP digest's row
		Qps       string
		LatPaths  int
		XSS       bool
	}
	const snapJS = `(() => {
		if (!document.body) return {}; // the page is still loading
		const t = id => { const e = document.getElementById(id); return e ? e.innerText : ''; };
		const nodes = [...document.querySelectorAll('#nodes-body tr[data-node]')].map(r => ({
			Node: r.dataset.node, Addr: r.dataset.addr, Role: r.dataset.role, Text: r.innerText,
			Statements: r.cells.length > 11 ? r.cells[11].innerText : ''}));
		const sleepRow = [...document.querySelectorAll('#digests-body tr')].find(r => /SLEEP/i.test(r.innerText));
		const banner = document.getElementById('error');
		return {
			Refreshes: Number(document.body.dataset.refreshes || 0), Marker: window.__ksMarker || 0,
			Error: document.body.dataset.error || '', Banner: banner && !banner.hidden ? banner.innerText : '',
			Header: document.querySelector('header') ? document.querySelector('header').innerText : '',
			Proxy: t('proxy'), Nodes: nodes, NodesText: t('nodes'), Procs: t('processes'), Instances: t('instances'), Digests: t('digests'),
			BackendIn: sleepRow ? [...sleepRow.querySelectorAll('.bar i')].map(i => i.className).join(' ') : '',
			Qps: t('qps-now'), LatPaths: document.querySelectorAll('#lat-chart path').length,
			XSS: document.getElementById('ksxss') !== null,
		};
	})()`
	read := func() snap {
		t.Helper()
		var s snap
		if err := pg.eval(snapJS, &s); err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		return s
	}
	// until polls the page until cond holds.
	until := func(what string, d time.Duration, cond func(s snap) bool) snap {
		t.Helper()
		deadline := time.Now().Add(d)
		for {
			s := read()
			if cond(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page did not show %s within %v (refreshes %d, error %q)", what, d, s.Refreshes, s.Error)
			}
			time.Sleep(150 * time.Millisecond)
		}
	}

	// 1. The page loads (its JS ran and fetched the JSON) and shows the
	// nodes of the config.
	s := until("a first refresh", 20*time.Second, func(s snap) bool { return s.Refreshes >= 1 || s.Error != "" })
	if s.Error != "" {
		t.Fatalf("the page's first refresh failed: %s", s.Error)
	}
	if err := pg.eval("window.__ksMarker = 4242", nil); err != nil {
		t.Fatal(err)
	}
	// The instances: this one alone (a config file), current.
	if !strings.Contains(s.Instances, p.Addr) || !strings.Contains(s.Instances, "(this one)") || !strings.Contains(s.Instances, "current") ||
		!strings.Contains(s.Instances, "1 live") {
		t.Errorf("the instances table does not show this instance at %s as current:\n%s", p.Addr, s.Instances)
	}
	for i, n := range []string{"node1", "node2", "node3"} {
		addr := fmt.Sprintf("127.0.0.1:%d", []int{basePort, basePort + 1, downPort}[i])
		if !strings.Contains(s.NodesText, n) || !strings.Contains(s.NodesText, addr) {
			t.Errorf("the nodes table does not show %s at %s:\n%s", n, addr, s.NodesText)
		}
	}
	if len(s.Nodes) != 3 {
		t.Fatalf("node rows: %+v", s.Nodes)
	}
	for _, n := range s.Nodes {
		if n.Role != "master" || !strings.Contains(n.Text, "up") || !strings.Contains(n.Text, "/ 16") && !strings.Contains(n.Text, "/ 4") {
			t.Errorf("node row %s: %q", n.Node, n.Text)
		}
	}
	if !strings.Contains(s.Header, "online") || !strings.Contains(s.Proxy, "config revision") || !strings.Contains(s.Proxy, p.File) {
		t.Errorf("proxy section: header %q\n%s", s.Header, s.Proxy)
	}
	if strings.Contains(s.Procs, "SLEEP") {
		t.Fatalf("the process list shows a SLEEP before any ran:\n%s", s.Procs)
	}
	stmts := func(s snap) int {
		for _, n := range s.Nodes {
			if n.Node == "node1" && n.Role == "master" {
				v, err := strconv.Atoi(strings.ReplaceAll(n.Statements, ",", ""))
				if err != nil {
					t.Fatalf("node1 statements cell %q: %v", n.Statements, err)
				}
				return v
			}
		}
		t.Fatalf("no node1 master row: %+v", s.Nodes)
		return 0
	}
	peak := func(s snap) int {
		m := regexp.MustCompile(`peak ([\d,]+)`).FindStringSubmatch(s.Qps)
		if m == nil {
			if strings.Contains(s.Qps, "no samples yet") {
				return 0 // the first second is not over
			}
			return -1
		}
		v, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
		return v
	}
	before, refreshes0, peak0 := stmts(s), s.Refreshes, peak(s)
	const burst = 60
	if peak0 < 0 || peak0 >= burst/3 {
		t.Fatalf("QPS before the burst: %q, want a peak below %d", s.Qps, burst/3)
	}

	// 2. Queries while the page stays open: a long one shows in the process
	// list (its text HTML-escaped), the statements of node1 and the QPS
	// grow, with no reload (the marker set above survives).
	db := p.open(t, "ks:ks", "ks_test", "")
	db.SetMaxOpenConns(4)
	const sleepSQL = "SELECT SLEEP(5) AS `<b id=ksxss>x</b>`"
	sleepDone := make(chan error, 1)
	go func() {
		_, err := db.Exec(sleepSQL)
		sleepDone <- err
	}()
	for range burst {
		mustExec(t, db, "SELECT 1")
	}
	// The page refreshes every 2 s: it catches the 5 s SLEEP at least twice.
	s = until("the running SLEEP in the process list", 5*time.Second, func(s snap) bool {
		return strings.Contains(s.Procs, "SELECT SLEEP(5)")
	})
	if !strings.Contains(s.Procs, "<b id=ksxss>x</b>") || s.XSS {
		t.Errorf("the statement's text is not shown escaped (element made: %v):\n%s", s.XSS, s.Procs)
	}
	for _, want := range []string{"ks_test", "Query", "node1"} {
		if !strings.Contains(s.Procs, want) {
			t.Errorf("the process list lacks %q:\n%s", want, s.Procs)
		}
	}
	s = until(fmt.Sprintf("node1's statements grow by %d", burst), 6*time.Second, func(s snap) bool { return stmts(s) >= before+burst })
	s = until(fmt.Sprintf("a QPS peak of at least %d", burst/3), 6*time.Second, func(s snap) bool { return peak(s) >= burst/3 })
	if err := <-sleepDone; err != nil {
		t.Fatalf("%s: %v", sleepSQL, err)
	}
	s = until("the SLEEP digest with its backend stage", 6*time.Second, func(s snap) bool {
		return strings.Contains(s.BackendIn, "s-backend") && !strings.Contains(s.Procs, "SELECT SLEEP(5)")
	})
	if s.LatPaths == 0 {
		t.Errorf("the latency chart draws nothing")
	}
	if s.Marker != 4242 || s.Refreshes <= refreshes0 {
		t.Errorf("the page reloaded or stopped refreshing: marker %d, refreshes %d then %d", s.Marker, refreshes0, s.Refreshes)
	}

	// 3. A failed fetch raises the error banner; it goes once fetches work.
	if err := pg.call("Network.enable", nil, nil); err != nil {
		t.Fatal(err)
	}
	offline := func(off bool) {
		t.Helper()
		if err := pg.call("Network.emulateNetworkConditions", map[string]any{
			"offline": off, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}, nil); err != nil {
			t.Fatal(err)
		}
	}
	offline(true)
	s = until("the error banner", 8*time.Second, func(s snap) bool { return s.Banner != "" })
	if !strings.Contains(s.Banner, "Refresh failed") || !strings.Contains(s.Banner, "showing data from") {
		t.Errorf("error banner: %q", s.Banner)
	}
	offline(false)
	r := s.Refreshes
	until("the banner gone after a good refresh", 8*time.Second, func(s snap) bool { return s.Banner == "" && s.Refreshes > r })
}

// browser is a headless Chromium driven over the DevTools protocol on a
// pipe.
type browser struct {
	cmd    *exec.Cmd
	to     *os.File // Chromium's fd 3
	stderr *lockedBuffer

	mu      sync.Mutex
	next    int
	waiting map[int]chan cdpMessage
	dead    chan struct{} // closed when the pipe from Chromium ends
}

type cdpMessage struct {
	ID        int             `json:"id"`
	Method    string          `json:"method"`
	SessionID string          `json:"sessionId"`
	Result    json.RawMessage `json:"result"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// chromiumPath installs Chromium if missing (scripts/chromium.sh) and
// returns its path.
func chromiumPath(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(repoRoot, "scripts", "chromium.sh")).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("scripts/chromium.sh: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("scripts/chromium.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// startBrowser starts headless Chromium; the test's cleanup stops it.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	bin := chromiumPath(t)
	toR, toW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{to: toW, stderr: &lockedBuffer{}, waiting: map[int]chan cdpMessage{}, dead: make(chan struct{})}
	b.cmd = exec.Command(bin, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--remote-debugging-pipe", "--user-data-dir="+t.TempDir(), "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--disable-sync", "--mute-audio",
		"--hide-scrollbars", "--window-size=1400,1000", "about:blank")
	b.cmd.ExtraFiles = []*os.File{toR, fromW} // fd 3: commands in, fd 4: answers out
	b.cmd.Stdout, b.cmd.Stderr = b.stderr, b.stderr
	b.cmd.WaitDelay = 3 * time.Second // a helper process left holding its stderr does not block Wait
	if err := b.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	toR.Close()
	fromW.Close()
	go b.readLoop(fromR)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = b.call(ctx, "", "Browser.close", nil, nil)
		cancel()
		exited := make(chan struct{})
		go func() { _ = b.cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = b.cmd.Process.Kill()
			<-exited
		}
		b.to.Close()
		if t.Failed() {
			var keep []string // without the noise of a machine with no D-Bus
			for _, l := range strings.Split(b.stderr.String(), "\n") {
				if !strings.Contains(l, "dbus") {
					keep = append(keep, l)
				}
			}
			t.Logf("chromium output (tail):\n%s", tail(strings.Join(keep, "\n"), 3000))
		}
	})
	return b
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (b *browser) readLoop(r io.ReadCloser) {
	defer close(b.dead)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
			continue // an event
		}
		b.mu.Lock()
		ch := b.waiting[m.ID]
		delete(b.waiting, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// call sends a DevTools command (to the browser, or to an attached
// page's session) and decodes its result into out.
func (b *browser) call(ctx context.Context, session, method string, params, out any) error {
	if params == nil {
		params = map[string]any{}
	}
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan cdpMessage, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := b.to.Write(append(data, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-b.dead:
		return fmt.Errorf("%s: chromium exited", method)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// cdpPage is a browser tab attached in flat mode.
type cdpPage struct {
	b       *browser
	session string
}

// open makes a tab showing url.
func (b *browser) open(t *testing.T, url string) *cdpPage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": url}, &target); err != nil {
		t.Fatal(err)
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		t.Fatal(err)
	}
	return &cdpPage{b: b, session: att.SessionID}
}

func (p *cdpPage) call(method string, params, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return p.b.call(ctx, p.session, method, params, out)
}

// eval runs a JavaScript expression in the page and decodes its value.
func (p *cdpPage) eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if e := r.ExceptionDetails; e != nil {
		return fmt.Errorf("javascript: %s %s", e.Text, e.Exception.Description)
	}
	if out == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// screenshot saves a PNG of the whole page.
func (p *cdpPage) screenshot(path string) error {
	var height float64
	if err := p.eval("Math.ceil(document.documentElement.scrollHeight)", &height); err != nil {
		return err
	}
	if err := p.call("Emulation.setDeviceMetricsOverride", map[string]any{
		"width": 1400, "height": int(min(max(height, 600), 8000)), "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return err
	}
	var shot struct {
		Data string `json:"data"`
	}
	if err := p.call("Page.captureScreenshot", map[string]any{"format": "png"}, &shot); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}
