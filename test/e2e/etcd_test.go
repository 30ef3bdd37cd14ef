package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Throwaway etcd servers started with scripts/etcd.sh (installed with
// apt-get if missing). An instance on client port P also takes P+1 for its
// peer URL. Offsets from basePort used for etcd: +40/+41 (TestEtcdScript).
// Instances live under KS_ETCD_DIR, by default /tmp/keyshard-e2e-etcd (or
// /tmp/keyshard-e2e-etcd-PORT when KS_E2E_PORT moves the backends), and are
// stopped and removed after their test unless KEEP_BACKENDS is set.

// etcdDir is the directory the etcd instances of this run live under.
func etcdDir() string {
	if d := os.Getenv("KS_ETCD_DIR"); d != "" {
		return d
	}
	if basePort != 24307 {
		return fmt.Sprintf("/tmp/keyshard-e2e-etcd-%d", basePort)
	}
	return "/tmp/keyshard-e2e-etcd"
}

// etcdScript runs scripts/etcd.sh with args.
func etcdScript(args ...string) (string, error) {
	script := filepath.Join(repoRoot, "scripts", "etcd.sh")
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Env = append(os.Environ(), "KS_ETCD_DIR="+etcdDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// etcdUp starts (or reuses) the etcd instance on port and returns its client
// address; the instance is stopped and removed when the test ends.
func etcdUp(t *testing.T, port int) string {
	t.Helper()
	if out, err := etcdScript("up", fmt.Sprint(port)); err != nil {
		t.Fatalf("etcd.sh up %d: %v\n%s", port, err, out)
	}
	t.Cleanup(func() {
		if os.Getenv("KEEP_BACKENDS") != "" {
			return
		}
		if out, err := etcdScript("stop", fmt.Sprint(port)); err != nil {
			t.Logf("etcd.sh stop %d: %v\n%s", port, err, out)
		}
		if err := os.RemoveAll(filepath.Join(etcdDir(), fmt.Sprint(port))); err != nil {
			t.Logf("removing etcd %d: %v", port, err)
		}
	})
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// etcdStop stops the etcd instance on port, keeping its data.
func etcdStop(t *testing.T, port int) {
	t.Helper()
	if out, err := etcdScript("stop", fmt.Sprint(port)); err != nil {
		t.Fatalf("etcd.sh stop %d: %v\n%s", port, err, out)
	}
}

// etcdStart starts a stopped etcd instance on port again on its data.
func etcdStart(t *testing.T, port int) {
	t.Helper()
	if out, err := etcdScript("start", fmt.Sprint(port)); err != nil {
		t.Fatalf("etcd.sh start %d: %v\n%s", port, err, out)
	}
}

// etcdctl runs etcdctl (API v3) against addr.
func etcdctl(addr string, args ...string) (string, error) {
	args = append([]string{"--endpoints=" + addr, "--dial-timeout=3s", "--command-timeout=5s"}, args...)
	cmd := exec.Command("etcdctl", args...)
	cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestEtcdScript(t *testing.T) {
	port := basePort + 40
	addr := etcdUp(t, port)
	if addr != fmt.Sprintf("127.0.0.1:%d", port) {
		t.Fatalf("etcdUp returned %q", addr)
	}
	// up is idempotent.
	if out, err := etcdScript("up", fmt.Sprint(port)); err != nil || strings.TrimSpace(out) != addr {
		t.Fatalf("second up: %v\n%s", err, out)
	}
	if out, err := etcdctl(addr, "put", "/keyshard/test", "hello"); err != nil {
		t.Fatalf("put: %v\n%s", err, out)
	}
	get := func() string {
		t.Helper()
		out, err := etcdctl(addr, "get", "--print-value-only", "/keyshard/test")
		if err != nil {
			t.Fatalf("get: %v\n%s", err, out)
		}
		return strings.TrimSpace(out)
	}
	if v := get(); v != "hello" {
		t.Fatalf("get = %q, want hello", v)
	}

	etcdStop(t, port)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after stop", addr)
	}
	if out, err := etcdScript("status"); err != nil || !strings.Contains(out, fmt.Sprintf("%d\t-\tdown", port)) {
		t.Errorf("status after stop: %v\n%s", err, out)
	}

	etcdStart(t, port)
	if v := get(); v != "hello" {
		t.Fatalf("get after restart = %q, want hello", v)
	}
	if out, err := etcdScript("status"); err != nil || !strings.Contains(out, fmt.Sprintf("%d\t", port)) ||
		!strings.Contains(out, "\tup") {
		t.Errorf("status after start: %v\n%s", err, out)
	}
}
