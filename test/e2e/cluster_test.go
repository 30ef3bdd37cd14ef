package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keyshard/keyshard/proxy"
	"github.com/keyshard/keyshard/proxy/cluster"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/control"
)

// Several keyshard instances on one config in a real etcd (scripts/etcd.sh):
// admin changes reach every instance, concurrent ones are all kept, and
// losing etcd costs no statement. etcd listens on base+44 (peer base+45).

// sharedStore starts etcd and returns a store on a prefix of the test's
// own (a reused etcd keeps what earlier runs wrote).
func sharedStore(t *testing.T) *cluster.Store {
	t.Helper()
	ep := etcdUp(t, basePort+44)
	url := fmt.Sprintf("etcd://%s/e2e/%s-%d", ep, t.Name(), time.Now().UnixNano())
	st, err := cluster.Open(url, cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// pushDoc writes doc as the shared config (as keyshard config push does),
// over whatever revision is there.
func pushDoc(t *testing.T, st *cluster.Store, doc string, forced bool) int64 {
	t.Helper()
	cur, err := st.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rev, err := st.PutConfig(context.Background(), []byte(doc), cur.ConfigRev, cur.Config, forced)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

// startClusterProxy starts an instance called name on the shared config
// of st, listening on a port of its own (as -addr does).
func startClusterProxy(t *testing.T, st *cluster.Store, name string) *testProxy {
	t.Helper()
	p, err := tryClusterProxy(t, st, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryClusterProxy is startClusterProxy that returns its error (it may run
// off the test's goroutine). A name held by another instance of this host
// is waited for a second, not the default lease time.
func tryClusterProxy(t *testing.T, st *cluster.Store, name string) (*testProxy, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*testProxy, error) {
		ln.Close()
		return nil, err
	}
	// Each instance its own connection to etcd, as separate processes.
	store, err := cluster.Open(st.Source(), cluster.Options{NameWait: time.Second})
	if err != nil {
		return fail(err)
	}
	state, err := store.Read(context.Background())
	if err != nil {
		store.Close()
		return fail(err)
	}
	cfg, _, err := config.Parse(state.Config, store.Source())
	if err == nil {
		err = (config.Local{Addr: ln.Addr().String(), Name: name}).Apply(cfg)
	}
	if err != nil {
		store.Close()
		return fail(err)
	}
	local := config.Local{Addr: ln.Addr().String(), Name: name}
	log, logs := testLogger(t)
	srv, err := proxy.NewClustered(cfg, log, control.ClusterOptions{Store: store, State: state, Local: local, Version: "e2e"})
	if err != nil {
		return fail(err)
	}
	return serveTestProxy(t, srv, ln, logs), nil
}

const clusterWeb = "web_user: admin\nweb_password: webpw\n"

func TestClusterSharedConfig(t *testing.T) {
	st := sharedStore(t)
	doc := baseYAML("127.0.0.1:9696") + clusterWeb
	pushDoc(t, st, doc, false)
	a, b := startClusterProxy(t, st, "ks-a"), startClusterProxy(t, st, "ks-b")
	rootA, rootB := adminDB(t, a), adminDB(t, b)
	ksB := b.open(t, "ks:ks", "ks_test", "")

	// Both listed, on the same revision.
	rows := queryRows(t, rootA, "SHOW PROXIES")
	if len(rows) != 2 || rows[0][0] != "ks-a" || rows[1][0] != "ks-b" || rows[0][8] != "current" || rows[1][8] != "current" ||
		rows[0][1] != a.Addr || rows[0][9] != "yes" || rows[1][9] != "no" {
		t.Fatalf("SHOW PROXIES on ks-a: %v", rows)
	}
	var list []control.Proxy
	if code := rest(t, b, "GET", "/api/v1/proxies", "", true, &list); code != 200 || len(list) != 2 || !list[1].Self || list[1].Addr != b.Addr {
		t.Fatalf("GET /api/v1/proxies on ks-b: %d %+v", code, list)
	}
	var status struct {
		Instances []control.Proxy `json:"instances"`
	}
	if code := rest(t, a, "GET", "/api/v1/status", "", true, &status); code != 200 || len(status.Instances) != 2 || !status.Instances[0].Self {
		t.Fatalf("the status page's instances on ks-a: %d %+v", code, status.Instances)
	}

	// A blacklist entry added on one instance is in force on the other.
	mustExec(t, rootA, "admin server(opt,k,v) values('add','black_sql','select * from cl_nope where id = 1')")
	within(t, 2*time.Second, "blacklist entry on ks-b", func() bool {
		_, err := ksB.Exec("select * from cl_nope where id = 7")
		return err != nil && strings.Contains(err.Error(), "blacklist")
	})
	// allow_ips, slow_log_time through REST on the other.
	mustExec(t, rootB, "admin server(opt,k,v) values('add','allow_ip','127.0.0.1')")
	within(t, 2*time.Second, "allow_ips on ks-a", func() bool { return slices.Equal(a.Srv.AllowIPs(), []string{"127.0.0.1"}) })
	if code := rest(t, a, "PUT", "/api/v1/proxy/slow_sql/time", `{"slow_time": 250}`, true, nil); code != 200 {
		t.Fatalf("PUT slow_log_time on ks-a: %d", code)
	}
	within(t, 2*time.Second, "slow_log_time on ks-b", func() bool { return b.Srv.Config().SlowLogTime == 250 })
	// A backend taken down on one is down on both, and back up.
	node3 := fmt.Sprintf("127.0.0.1:%d", downPort)
	mustExec(t, rootB, "admin node(opt,node,k,v) values('down','node3','master','"+node3+"')")
	within(t, 2*time.Second, "node3 down on ks-a", func() bool { return a.Srv.Nodes()["node3"].Master.AdminDown() })
	mustExec(t, rootA, "admin node(opt,node,k,v) values('up','node3','master','"+node3+"')")
	within(t, 2*time.Second, "node3 up on ks-b", func() bool { return !b.Srv.Nodes()["node3"].Master.AdminDown() })

	// The document in etcd has the changes, its comments and layout kept.
	cur, err := st.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"allow_ips: 127.0.0.1", "slow_log_time: 250", "addr: 127.0.0.1:9696"} {
		if !strings.Contains(string(cur.Config), want) {
			t.Errorf("shared document lacks %q:\n%s", want, cur.Config)
		}
	}
	if string(cur.Blacklist) != "select * from cl_nope where id = 1\n" {
		t.Errorf("shared blacklist: %q", cur.Blacklist)
	}
	// An instance keeps its own listener over the document's.
	if a.Srv.Config().Addr != a.Addr || b.Srv.Config().Addr != b.Addr {
		t.Errorf("listeners: %s, %s; want %s, %s", a.Srv.Config().Addr, b.Srv.Config().Addr, a.Addr, b.Addr)
	}

	// A document that does not validate is applied nowhere; SHOW PROXIES
	// flags both instances as behind, with the reason.
	before := a.Srv.Config()
	bad := pushDoc(t, st, strings.Replace(string(cur.Config), "default: node1", "default: nodeX", 1), false)
	within(t, 2*time.Second, "the invalid document flagged", func() bool {
		rows := queryRows(t, rootB, "SHOW PROXIES")
		return len(rows) == 2 && strings.Contains(rows[0][8], "behind") && strings.Contains(rows[0][8], "nodeX") &&
			strings.Contains(rows[1][8], "behind")
	})
	if a.Srv.Config() != before {
		t.Errorf("an invalid shared document changed the running config")
	}
	if v := metricValue(scrape(t, a), "keyshard_cluster_config_refused"); v != 1 {
		t.Errorf("keyshard_cluster_config_refused = %v with the invalid document, want 1", v)
	}
	// Fixed: both apply it.
	good := pushDoc(t, st, string(cur.Config)+"log_sql: on\n", false)
	if good <= bad {
		t.Fatalf("revisions %d then %d", bad, good)
	}
	within(t, 2*time.Second, "the fixed document on both", func() bool {
		return a.Srv.Config().LogSQL == "on" && b.Srv.Config().LogSQL == "on"
	})
	// The log names the revision SHOW PROXIES shows (etcd's), not the
	// count of configs this instance applied.
	if l := a.Logs.FilterMessage("config reloaded").All(); len(l) == 0 || l[len(l)-1].ContextMap()["revision"] != good {
		t.Errorf("the last 'config reloaded' line: %v, want revision %d", l, good)
	}
	if rows := queryRows(t, rootA, "SHOW PROXIES"); len(rows) != 2 || rows[0][7] != fmt.Sprint(good) {
		t.Errorf("SHOW PROXIES after revision %d: %v", good, rows)
	}
	m := scrape(t, a)
	if metricValue(m, "keyshard_cluster_config_refused") != 0 || metricValue(m, "keyshard_cluster_config_revision") != float64(good) ||
		metricValue(m, "keyshard_cluster_etcd_up") != 1 {
		t.Errorf("cluster gauges after the fixed document (revision %d):\n%s", good, grepLines(m, "keyshard_cluster_"))
	}

	// A document that moves rows of a sharded table is refused until
	// forced; ADMIN RELOAD FORCE on one instance forces it on all.
	sharded := strings.Replace(string(cur.Config)+"log_sql: on\n", "    shard:\n      -\n  - user: other", `    shard:
      - db: ks_test
        table: cl_t
        key: id
        type: hash
        nodes: [node1, node2]
        locations: [1, 1]
  - user: other`, 1)
	pushDoc(t, st, sharded, false)
	within(t, 2*time.Second, "the sharded table on both", func() bool {
		return len(a.Srv.Config().SchemaList[0].ShardRule) == 1 && len(b.Srv.Config().SchemaList[0].ShardRule) == 1
	})
	pushDoc(t, st, strings.Replace(sharded, "locations: [1, 1]", "locations: [2, 2]", 1), false)
	within(t, 2*time.Second, "the move flagged on both", func() bool {
		rows := queryRows(t, rootA, "SHOW PROXIES")
		return len(rows) == 2 && strings.Contains(rows[0][8], "look") && strings.Contains(rows[1][8], "behind")
	})
	// Meanwhile an admin change says why it cannot be made, at once.
	_, err = rootA.Exec("admin server(opt,k,v) values('change','slow_log_time','99')")
	if err == nil || !strings.Contains(err.Error(), "was not applied") || !strings.Contains(err.Error(), "ADMIN RELOAD FORCE") {
		t.Errorf("admin change on an instance behind: %v", err)
	}
	if code := rest(t, a, "PUT", "/api/v1/proxy/slow_sql/time", `{"slow_time": 99}`, true, nil); code != 409 {
		t.Errorf("REST change on an instance behind: %d, want 409", code)
	}
	mustExec(t, rootA, "admin reload force")
	within(t, 2*time.Second, "the forced document on both", func() bool {
		return a.Srv.Config().SchemaList[0].ShardRule[0].Locations[0] == 2 &&
			b.Srv.Config().SchemaList[0].ShardRule[0].Locations[0] == 2
	})
	within(t, 2*time.Second, "both current after the forced reload", func() bool {
		rows := queryRows(t, rootB, "SHOW PROXIES")
		return len(rows) == 2 && rows[0][8] == "current" && rows[1][8] == "current"
	})

	// A second instance called ks-a (on another address) is refused; of
	// two started at once with one name, one is.
	if _, err := tryClusterProxy(t, st, "ks-a"); err == nil || !strings.Contains(err.Error(), `another live instance is called "ks-a"`) {
		t.Errorf("a second ks-a: %v", err)
	}
	type started struct {
		p   *testProxy
		err error
	}
	twins := make(chan started, 2)
	for range 2 {
		go func() {
			p, err := tryClusterProxy(t, st, "twin")
			twins <- started{p, err}
		}()
	}
	t1, t2 := <-twins, <-twins
	if (t1.err == nil) == (t2.err == nil) {
		t.Errorf("two twins started at once: %v and %v; want exactly one refused", t1.err, t2.err)
	}
	for _, tw := range []started{t1, t2} {
		if tw.p != nil { // (its cleanup shuts it down again: a no-op)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = tw.p.Srv.Shutdown(ctx)
			cancel()
		}
	}

	// An instance that stops leaves the list at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	within(t, 2*time.Second, "ks-b off the list", func() bool {
		rows := queryRows(t, rootA, "SHOW PROXIES")
		return len(rows) == 1 && rows[0][0] == "ks-a"
	})
}

// Edits made at the same time on two instances are all kept: each is a
// compare-and-swap on the revision it started from, redone on the newer
// document after a lost race.
func TestClusterConcurrentEdits(t *testing.T) {
	st := sharedStore(t)
	pushDoc(t, st, baseYAML("127.0.0.1:9696")+clusterWeb, false)
	a, b := startClusterProxy(t, st, "ks-a"), startClusterProxy(t, st, "ks-b")
	const per = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	var want []string
	for i, p := range []*testProxy{a, b} {
		root := adminDB(t, p)
		for j := range per {
			ip := fmt.Sprintf("10.%d.%d.0/24", i, j)
			sql := fmt.Sprintf("select * from cl_conc_%d_%d", i, j)
			want = append(want, ip)
			wg.Add(2)
			go func() {
				defer wg.Done()
				if _, err := root.Exec("admin server(opt,k,v) values('add','allow_ip','" + ip + "')"); err != nil {
					mu.Lock()
					failed = append(failed, ip+": "+err.Error())
					mu.Unlock()
				}
			}()
			go func() {
				defer wg.Done()
				if _, err := root.Exec("admin server(opt,k,v) values('add','black_sql','" + sql + "')"); err != nil {
					mu.Lock()
					failed = append(failed, sql+": "+err.Error())
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	for _, f := range failed {
		t.Errorf("edit failed: %s", f)
	}
	slices.Sort(want)
	for _, p := range []*testProxy{a, b} {
		within(t, 2*time.Second, "every edit on "+p.Srv.Control().Name(), func() bool {
			got := p.Srv.AllowIPs()
			slices.Sort(got)
			return slices.Equal(got, want) && len(p.Srv.BlackSQLs()) == 2*per
		})
	}
}

// etcd stopped and started again under sysbench: no statement fails, an
// admin change meanwhile fails naming etcd and changes nothing, and the
// instances follow the shared config again once etcd is back.
func TestClusterEtcdLost(t *testing.T) {
	st := sharedStore(t)
	dbName, _ := bulkDB(t, "cluster")
	pushDoc(t, st, strings.ReplaceAll(reloadYAML(dbName, false, 1, 16), "%ADDR%", "127.0.0.1:9696")+clusterWeb, false)
	a, b := startClusterProxy(t, st, "ks-a"), startClusterProxy(t, st, "ks-b")
	sysbench := newSysbench(t, a, dbName)
	sysbench("prepare")
	sbB := newSysbench(t, b, dbName)

	var outA, outB string
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); outA = sysbench("run", "--threads=4", "--time=12", "--report-interval=0") }()
	go func() { defer wg.Done(); outB = sbB("run", "--threads=2", "--time=12", "--report-interval=0") }()
	time.Sleep(2 * time.Second)
	etcdStop(t, basePort+44)
	rootA := adminDB(t, a)
	_, err := rootA.Exec("admin server(opt,k,v) values('change','slow_log_time','123')")
	if err == nil || !strings.Contains(err.Error(), "nothing changed") || !strings.Contains(err.Error(), st.Source()) {
		t.Errorf("admin change with etcd down: %v; want an error naming %s", err, st.Source())
	}
	if a.Srv.Config().SlowLogTime == 123 {
		t.Errorf("the change was applied although etcd did not take it")
	}
	if code := rest(t, a, "PUT", "/api/v1/proxy/slow_sql/time", `{"slow_time": 123}`, true, nil); code != 503 {
		t.Errorf("REST change with etcd down: %d, want 503", code)
	}
	within(t, 8*time.Second, "keyshard_cluster_etcd_up 0 with etcd stopped", func() bool {
		return metricValue(scrape(t, b), "keyshard_cluster_etcd_up") == 0
	})
	time.Sleep(2 * time.Second)
	etcdStart(t, basePort+44)
	within(t, 8*time.Second, "keyshard_cluster_etcd_up 1 with etcd back", func() bool {
		return metricValue(scrape(t, b), "keyshard_cluster_etcd_up") == 1
	})
	wg.Wait()
	// etcd keeps leases over a restart; one lost for good (revoked, as
	// past its TTL) makes each instance register again.
	ep := fmt.Sprintf("127.0.0.1:%d", basePort+44)
	out, err := etcdctl(ep, "lease", "list")
	if err != nil {
		t.Fatalf("etcdctl lease list: %v\n%s", err, out)
	}
	revoked := 0
	for _, line := range strings.Split(out, "\n")[1:] {
		if id := strings.TrimSpace(line); id != "" {
			if out, err := etcdctl(ep, "lease", "revoke", id); err != nil {
				t.Fatalf("etcdctl lease revoke %s: %v\n%s", id, err, out)
			}
			revoked++
		}
	}
	if revoked < 2 {
		t.Fatalf("%d leases to revoke, want the two instances'\n%s", revoked, out)
	}
	for name, out := range map[string]string{"ks-a": outA, "ks-b": outB} {
		got, tps := parseSysbench(t, out)
		t.Logf("%s: sysbench across the etcd restart: %.0f transactions (%.1f tps), %.0f ignored errors, %.0f reconnects",
			name, got["transactions"], tps, got["ignored errors"], got["reconnects"])
		if got["ignored errors"] != 0 || got["reconnects"] != 0 || got["transactions"] < 50 {
			t.Errorf("%s: sysbench %v ignored errors, %v reconnects, %v transactions\n%s", name, got["ignored errors"],
				got["reconnects"], got["transactions"], out)
		}
	}
	// Back: a change made now reaches the other instance, and both are
	// listed again.
	within(t, 5*time.Second, "an admin change taken after etcd returned", func() bool {
		_, err := rootA.Exec("admin server(opt,k,v) values('change','slow_log_time','124')")
		return err == nil
	})
	within(t, 2*time.Second, "the change after etcd returned on ks-b", func() bool { return b.Srv.Config().SlowLogTime == 124 })
	within(t, 15*time.Second, "both instances listed again", func() bool {
		list, err := a.Srv.Control().Proxies(context.Background())
		return err == nil && len(list) == 2 && list[0].Current && list[1].Current
	})
}

// etcd with authentication on: credentials in the URL or the options are
// used; none or wrong ones fail with etcd's reason. Its own etcd on
// base+46 (peer base+47), as auth is on for the whole server.
func TestClusterEtcdAuth(t *testing.T) {
	ep := etcdUp(t, basePort+46)
	for _, args := range [][]string{
		{"user", "add", "root", "--new-user-password=rootpw"},
		{"auth", "enable"},
	} {
		// (The user is there already on an etcd kept by KEEP_BACKENDS.)
		if out, err := etcdctl(ep, args...); err != nil && !strings.Contains(out, "already exists") {
			t.Fatalf("etcdctl %v: %v\n%s", args, err, out)
		}
	}
	t.Cleanup(func() { _, _ = etcdctl(ep, "--user", "root:rootpw", "auth", "disable") })
	prefix := fmt.Sprintf("/e2e/auth-%d", time.Now().UnixNano())
	ctx := context.Background()
	open := func(url string, o cluster.Options) error {
		st, err := cluster.Open(url, o)
		if err != nil {
			return err
		}
		defer st.Close()
		_, err = st.Read(ctx)
		return err
	}
	if err := open("etcd://root:rootpw@"+ep+prefix, cluster.Options{}); err != nil {
		t.Errorf("credentials in the URL: %v", err)
	}
	if err := open("etcd://"+ep+prefix, cluster.Options{User: "root", Password: "rootpw"}); err != nil {
		t.Errorf("credentials in the options: %v", err)
	}
	if err := open("etcd://"+ep+prefix, cluster.Options{User: "root", Password: "nope"}); err == nil ||
		!strings.Contains(err.Error(), "authentication failed") || !strings.Contains(err.Error(), "etcd://"+ep+prefix) {
		t.Errorf("a wrong password: %v; want etcd's authentication error naming the source", err)
	}
	if err := open("etcd://"+ep+prefix, cluster.Options{}); err == nil {
		t.Error("no credentials: read anyway")
	}
}

// A master dies and its replica is promoted, with two instances on one
// shared config: both follow within failover_after and a few seconds, one
// failover is made (the other instance finds it made), the shared
// document names the new master, /readyz is 503 while the master is down
// and 200 after, and the old master, back and writable, stays out.
func TestClusterFailover(t *testing.T) {
	m := foPlain(t, foMaster)
	foPlain(t, foReplica)
	if out, err := backends("replica", fmt.Sprint(foMaster), fmt.Sprint(foReplica)); err != nil {
		t.Fatalf("replica: %v\n%s", err, out)
	}
	mustExec(t, m, "CREATE DATABASE failover_e2e")
	mustExec(t, m, "CREATE TABLE failover_e2e.t (id INT PRIMARY KEY, port INT NOT NULL)")
	st := sharedStore(t)
	pushDoc(t, st, strings.ReplaceAll(failoverYAML("fo1", foAddr(foMaster), foAddr(foReplica), "2s"), "%ADDR%", "127.0.0.1:9696"), false)
	a, b := startClusterProxy(t, st, "ks-a"), startClusterProxy(t, st, "ks-b")
	dbs := map[string]*sql.DB{}
	for _, p := range []*testProxy{a, b} {
		dbs[p.Srv.Control().Name()] = p.open(t, "ks:ks", "failover_e2e", "timeout=5s&readTimeout=10s&writeTimeout=10s")
		if code := rest(t, p, "GET", "/readyz", "", false, nil); code != 200 {
			t.Fatalf("%s /readyz: %d, want 200", p.Srv.Control().Name(), code)
		}
	}
	id := 0
	write := func(name string) error {
		_, err := dbs[name].Exec(fmt.Sprintf("INSERT INTO t VALUES (%d, @@port)", id+1))
		if err == nil {
			id++
		}
		return err
	}
	for name := range dbs {
		if err := write(name); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}

	r := direct(t, foReplica, "")
	within(t, 10*time.Second, "the replica to have every row", func() bool {
		var n int
		return r.QueryRow("SELECT COUNT(*) FROM failover_e2e.t").Scan(&n) == nil && n == id
	})
	t.Cleanup(func() { _, _ = backends("start", fmt.Sprint(foMaster)) })
	if out, err := backends("stop", fmt.Sprint(foMaster)); err != nil {
		t.Fatalf("stop master: %v\n%s", err, out)
	}
	for _, p := range []*testProxy{a, b} {
		within(t, 10*time.Second, p.Srv.Control().Name()+" /readyz 503", func() bool { return rest(t, p, "GET", "/readyz", "", false, nil) == 503 })
	}
	if out, err := backends("promote", fmt.Sprint(foReplica)); err != nil {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	promoted := time.Now()
	for name := range dbs {
		within(t, 10*time.Second, name+": writes after the promotion", func() bool { return write(name) == nil })
		t.Logf("%s: writes again %v after the promotion", name, time.Since(promoted).Round(time.Millisecond))
	}
	for _, p := range []*testProxy{a, b} {
		within(t, 5*time.Second, p.Srv.Control().Name()+" /readyz 200", func() bool { return rest(t, p, "GET", "/readyz", "", false, nil) == 200 })
	}
	cur, err := st.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	doc, _, err := config.Parse(cur.Config, "etcd")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := doc.Node("fo1"); n.Master != foAddr(foReplica) || n.Slave != "" {
		t.Errorf("shared document: master %q, slave %q; want master %s and no slave", n.Master, n.Slave, foAddr(foReplica))
	}
	var total float64
	for _, p := range []*testProxy{a, b} {
		total += max(0, metricValue(scrape(t, p), `keyshard_failovers_total{node="fo1"}`)) // -1: none counted
	}
	if total != 1 {
		for _, p := range []*testProxy{a, b} {
			for _, e := range p.Logs.FilterMessageSnippet("fo1").All() {
				t.Logf("%s: %s %v", p.Srv.Control().Name(), e.Message, e.ContextMap())
			}
		}
		t.Errorf("failovers made: %v over the two instances, want 1", total)
	}
	// Every row written went to the master of its time: none lost.
	var rows, onReplica int
	if err := r.QueryRow("SELECT COUNT(*), SUM(port = ?) FROM failover_e2e.t", foReplica).Scan(&rows, &onReplica); err != nil {
		t.Fatal(err)
	}
	if rows != id || onReplica != id-2 {
		t.Errorf("new master has %d rows (%d written there), want %d (%d)", rows, onReplica, id, id-2)
	}

	// The old master comes back writable: reported, kept out.
	if out, err := backends("start", fmt.Sprint(foMaster)); err != nil {
		t.Fatalf("start old master: %v\n%s", err, out)
	}
	back := fmt.Sprintf("node fo1: former master %s is back and writable", foAddr(foMaster))
	for _, p := range []*testProxy{a, b} {
		within(t, 15*time.Second, p.Srv.Control().Name()+": the former-master report", func() bool { return p.Logs.FilterMessageSnippet(back).Len() > 0 })
	}
	for name := range dbs {
		if err := write(name); err != nil {
			t.Fatalf("%s after the old master returned: %v", name, err)
		}
	}
	var port int
	if err := r.QueryRow("SELECT port FROM failover_e2e.t WHERE id = ?", id).Scan(&port); err != nil || port != foReplica {
		t.Errorf("the last write: port %d (%v), want the new master %d", port, err, foReplica)
	}
}

// etcd wiped and started again on the same address (same cluster id,
// revisions from 1): the instances see it when it answers, refuse changes
// while it has no document, and follow the document pushed to it.
func TestClusterEtcdWiped(t *testing.T) {
	// Revisions well past what the new etcd will have when the push
	// comes: its revision going back tells.
	testEtcdWiped(t, 20)
}

// The same with instances that saw only the first revisions of the old
// etcd (started, or lagging, just before the wipe): by the time they read
// the new one its revision may be past what they saw and, if the old etcd
// was fresh too (make test: one per test), the document pushed to it has
// the revision of the one they run (both the first write, revision 2):
// its contents tell.
func TestClusterEtcdWipedEarly(t *testing.T) {
	testEtcdWiped(t, 0)
}

// testEtcdWiped wipes the etcd of two instances after the given number
// of admin changes, seen by both.
func testEtcdWiped(t *testing.T, changes int) {
	st := sharedStore(t)
	pushDoc(t, st, baseYAML("127.0.0.1:9696")+clusterWeb, false)
	a, b := startClusterProxy(t, st, "ks-a"), startClusterProxy(t, st, "ks-b")
	defer func() {
		if t.Failed() {
			for _, p := range []*testProxy{a, b} {
				for _, e := range p.Logs.FilterMessageSnippet("cluster").All() {
					t.Logf("%s: %s %s %v", p.Srv.Control().Name(), e.Time.Format("15:04:05.000"), e.Message, e.ContextMap())
				}
			}
			t.Logf("ks-a slow_log_time %d, ks-b %d", a.Srv.Config().SlowLogTime, b.Srv.Config().SlowLogTime)
		}
	}()
	root := adminDB(t, a)
	for i := range changes {
		mustExec(t, root, fmt.Sprintf("admin server(opt,k,v) values('change','slow_log_time','%d')", 100+i))
	}
	if changes > 0 {
		within(t, 5*time.Second, "the last change on ks-b", func() bool { return b.Srv.Config().SlowLogTime == 100+changes-1 })
	}
	port := basePort + 44
	etcdStop(t, port)
	if err := os.RemoveAll(filepath.Join(etcdDir(), fmt.Sprint(port), "data")); err != nil {
		t.Fatal(err)
	}
	if out, err := etcdScript("up", fmt.Sprint(port)); err != nil {
		t.Fatalf("etcd.sh up: %v\n%s", err, out)
	}
	t.Logf("etcd wiped and up again at %s", time.Now().Format("15:04:05.000"))
	within(t, 10*time.Second, "changes refused while the new etcd has no document", func() bool {
		_, err := root.Exec("admin server(opt,k,v) values('change','slow_log_time','5')")
		return err != nil && strings.Contains(err.Error(), "no config document")
	})
	rev := pushDoc(t, st, baseYAML("127.0.0.1:9696")+clusterWeb+"slow_log_time: 321\n", false)
	t.Logf("document pushed at revision %d at %s", rev, time.Now().Format("15:04:05.000"))
	// An instance whose watch waits for revisions of the old etcd reads
	// the new one within resyncEvery (5 s).
	within(t, 10*time.Second, "the document pushed to the new etcd on both", func() bool {
		return a.Srv.Config().SlowLogTime == 321 && b.Srv.Config().SlowLogTime == 321
	})
	mustExec(t, root, "admin server(opt,k,v) values('change','slow_log_time','322')")
	within(t, 2*time.Second, "a change after it on the other", func() bool { return b.Srv.Config().SlowLogTime == 322 })
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A write made against a revision that etcd now holds with another value
// (a wiped etcd counts revisions from 1 again: its first document has the
// revision an instance may have read from the old one) is refused, not
// written over the document that is there.
func TestClusterCompareValue(t *testing.T) {
	st := sharedStore(t)
	ctx := context.Background()
	rev := pushDoc(t, st, "a: 1\n", false)
	if _, err := st.PutConfig(ctx, []byte("c: 3\n"), rev, []byte("b: 2\n"), false); !errors.Is(err, cluster.ErrConflict) {
		t.Fatalf("PutConfig at revision %d with another value expected: %v, want ErrConflict", rev, err)
	}
	if _, err := st.PutBlacklist(ctx, []byte("SELECT 1\n"), 0, nil); err != nil {
		t.Fatal(err)
	}
	cur, err := st.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(cur.Config) != "a: 1\n" {
		t.Fatalf("the refused write changed the document: %q", cur.Config)
	}
	if _, err := st.PutBlacklist(ctx, []byte("SELECT 2\n"), cur.BlacklistRev, []byte("SELECT 3\n")); !errors.Is(err, cluster.ErrConflict) {
		t.Fatalf("PutBlacklist with another value expected: %v, want ErrConflict", err)
	}
	if _, err := st.PutConfig(ctx, []byte("c: 3\n"), cur.ConfigRev, cur.Config, false); err != nil {
		t.Fatalf("PutConfig with the value there: %v", err)
	}
	if _, err := st.PutBlacklist(ctx, []byte("SELECT 2\n"), cur.BlacklistRev, cur.Blacklist); err != nil {
		t.Fatalf("PutBlacklist with the value there: %v", err)
	}
}
