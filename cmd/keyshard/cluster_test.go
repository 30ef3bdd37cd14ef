package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"

	"github.com/keyshard/keyshard/proxy/cluster"
	"go.uber.org/zap"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// etcdTestPort is the throwaway etcd of these tests (peer port +1): apart
// from the e2e tests' ports (24307 + offsets) so packages can run at once.
const etcdTestPort = 24396

// testEtcd starts a throwaway etcd with scripts/etcd.sh (the package
// is installed by make test) and returns a URL on a prefix of the test's
// own.
func testEtcd(t *testing.T) string {
	t.Helper()
	script := filepath.Join("..", "..", "scripts", "etcd.sh")
	dir := filepath.Join(os.TempDir(), "keyshard-cmd-etcd")
	run := func(args ...string) {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "KS_ETCD_DIR="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("etcd.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("up", fmt.Sprint(etcdTestPort))
	t.Cleanup(func() {
		if os.Getenv("KEEP_BACKENDS") == "" {
			run("down")
		}
	})
	return fmt.Sprintf("etcd://127.0.0.1:%d/cmd-%s-%d", etcdTestPort, t.Name(), os.Getpid())
}

// The operator's commands on a shared config: push validates, refuses to
// move rows unless forced, says when nothing changed; pull prints the
// document; diff says what differs (exit 1) or nothing (exit 0).
func TestConfigPushPullDiff(t *testing.T) {
	url := testEtcd(t)
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base, err := os.ReadFile("../../etc/ks.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v1 := write("v1.yaml", string(base))
	v2 := write("v2.yaml", strings.Replace(string(base), "\nslow_log_time: 0\n", "\nslow_log_time: 75\n", 1))
	invalid := write("bad.yaml", strings.Replace(string(base), "default: node1", "default: nodeX", 1))
	black := write("black", "select * from t where id = 1\n")
	if string(base) == string(must(os.ReadFile(v2))) {
		t.Fatal("v2 is v1: the sample's slow_log_time line moved")
	}
	cli := func(code int, out, errOut string, args ...string) string {
		t.Helper()
		var so, se bytes.Buffer
		if got := run(args, &so, &se); got != code || !strings.Contains(so.String(), out) || !strings.Contains(se.String(), errOut) {
			t.Fatalf("keyshard %s: exit %d, want %d\nstdout: %s\nstderr: %s\nwant %q / %q", strings.Join(args, " "), got, code,
				so.String(), se.String(), out, errOut)
		}
		return so.String()
	}
	cli(1, "", "no config document yet", "config", "pull", url)
	cli(0, "pushed, revision", "", "config", "push", v1, url)
	cli(0, "unchanged", "", "config", "push", v1, url)
	if got := cli(0, "", "", "config", "pull", url); got != string(base) {
		t.Errorf("pull: not the pushed document")
	}
	cli(0, "", "", "config", "diff", v1, url)
	cli(1, "+slow_log_time: 75", "", "config", "diff", v2, url)
	cli(1, "", "nodeX", "config", "push", invalid, url)
	cli(0, "pushed", "", "config", "push", "-blacklist", black, v2, url)
	cli(0, "", "", "config", "diff", v2, url)
	// A change of where a sharded table's rows live needs -force.
	moved := write("moved.yaml", strings.Replace(string(must(os.ReadFile(v2))), "locations: [4, 4]", "locations: [8, 8]", 1))
	if string(must(os.ReadFile(moved))) == string(must(os.ReadFile(v2))) {
		t.Fatal("the sample has no 'locations: [4, 4]' to change")
	}
	cli(1, "", "-force", "config", "push", moved, url)
	cli(0, "pushed", "", "config", "push", "-force", moved, url)

	// -rev: only over the revision pulled.
	var se bytes.Buffer
	run([]string{"config", "pull", url}, io.Discard, &se)
	m := regexp.MustCompile(`revision (\d+)`).FindStringSubmatch(se.String())
	if m == nil {
		t.Fatalf("pull printed no revision: %q", se.String())
	}
	cli(1, "", "not "+m[1]+"0", "config", "push", "-rev", m[1]+"0", v2, url)
	cli(0, "pushed", "", "config", "push", "-rev", m[1], "-force", v2, url)

	// Rows are judged against what the instances run: with an instance
	// on v2, a stored document that moved rows (refused by it) is
	// replaced by v2 again without -force, and the move is still refused.
	store, err := cluster.Open(url, cluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	st, err := store.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keep, err := store.Register(ctx, func() cluster.Member { return cluster.Member{Name: "on-v2", ConfigRev: st.ConfigRev} }, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	go keep()
	if _, err := store.PutConfig(context.Background(), must(os.ReadFile(moved)), st.ConfigRev, st.Config, false); err != nil {
		t.Fatal(err)
	}
	cli(1, "", "against revision "+fmt.Sprint(st.ConfigRev), "config", "push", moved, url)
	cli(0, "pushed", "", "config", "push", v2, url)

	// A node's master changed (as by a failover) is not undone by an old
	// copy without -rev (-force is for row moves only).
	failedOver := write("failedover.yaml", strings.Replace(string(must(os.ReadFile(v2))), "master: 127.0.0.1:3307", "master: 127.0.0.1:3399", 1))
	cli(1, "", "changes a node's master", "config", "push", failedOver, url)
	se.Reset()
	run([]string{"config", "pull", url}, io.Discard, &se)
	m = regexp.MustCompile(`revision (\d+)`).FindStringSubmatch(se.String())
	cli(0, "pushed", "", "config", "push", "-rev", m[1], failedOver, url)
	cli(1, "", "changes a node's master", "config", "push", v2, url)
	cli(1, "", "changes a node's master", "config", "push", "-force", v2, url)
	// A bad blacklist pushes nothing; a good one goes with the document.
	badBlack := write("badblack", strings.Repeat("x", 2<<20)+"\n")
	cli(1, "", "nothing pushed: blacklist", "config", "push", "-blacklist", badBlack, failedOver, url)
	black2 := write("black2", "select * from t where id = 2\n")
	cli(0, "and blacklist", "", "config", "push", "-blacklist", black2, failedOver, url)
	cli(2, "", "no etcd endpoint", "config", "diff", v2, "etcd:///nowhere")
	cli(2, "", "usage", "config", "pull")
	cli(2, "", "not an etcd URL", "config", "pull", "etc/ks.yaml")
	cli(2, "", "usage", "config", "diff", "-force", v1, url)
	cli(1, "", "no config document yet", "-config", url+"-empty")
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
