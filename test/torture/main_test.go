// Package torture is keyshard's fault torture for transactions: 16
// clients move money between accounts sharded over three nodes (XA
// transactions, crossing transfers included) and append ledger rows, each
// transfer logging its unique id in a row of the same transaction, while a
// controller SIGKILLs or SIGSTOPs keyshard, SIGKILLs, SIGSTOPs or restarts a
// backend, every few hundred milliseconds; for the middle half of the run a
// second keyshard shares the load (both read their config from etcd).
// After the storm and recovery, the checker verifies the invariants (see
// README.md): the total balance, every balance against the transfers
// present, every acknowledged transfer and ledger row there exactly once,
// nothing a client was told was rolled back there, no XA branch left
// prepared, no panic or data race in keyshard's output.
//
// It runs keyshard as a real process (built from ./cmd/keyshard, with
// -race when the test is) on three MariaDB servers it starts with
// scripts/backends.sh on 127.0.0.1:30407-30409 (under
// /tmp/keyshard-torture-30407) and an etcd from scripts/etcd.sh on :30427;
// keyshard listens on :30417 and :30418. KS_TORTURE_PORT moves them all
// (relative to the first backend's port, up to +21: keep it apart from
// test/e2e's KS_E2E_PORT..+60); KEEP_BACKENDS=1 leaves the
// servers running afterwards. -torture.time sets the storm's length (30s
// in go test ./...; make torture runs TORTURE_TIME, default 30m).
package torture

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

var (
	basePort = torturePort()
	ksPorts  = [2]int{basePort + 10, basePort + 11} // keyshard A and B
	etcdPort = basePort + 20                        // its peers on +21
	repoRoot string

	stormTime = flag.Duration("torture.time", 30*time.Second, "how long the storm of faults lasts")
	seed      = flag.Int64("torture.seed", 0, "the controller's and clients' seed (0: the time)")
)

// nBackend backends: node1 (also the XA decision node), node2, node3.
const nBackend = 3

// torturePort is the first backend's port: KS_TORTURE_PORT or 30407.
func torturePort() int {
	if s := os.Getenv("KS_TORTURE_PORT"); s != "" {
		var p int
		if _, err := fmt.Sscan(s, &p); err == nil && p > 0 {
			return p
		}
	}
	return 30407
}

func TestMain(m *testing.M) {
	flag.Parse()
	_, file, _, _ := runtime.Caller(0)
	repoRoot = filepath.Join(filepath.Dir(file), "..", "..")
	os.Setenv("KS_BACKENDS_DIR", fmt.Sprintf("/tmp/keyshard-torture-%d", basePort))
	os.Setenv("KS_ETCD_DIR", fmt.Sprintf("/tmp/keyshard-torture-etcd-%d", basePort))
	if out, err := script("backends.sh", "up", fmt.Sprint(nBackend), fmt.Sprint(basePort)); err != nil {
		fmt.Fprintf(os.Stderr, "starting backends failed: %v\n%s\n", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if os.Getenv("KEEP_BACKENDS") == "" {
		_, _ = script("backends.sh", "down")
		_, _ = script("etcd.sh", "down")
	}
	os.Exit(code)
}

// script runs scripts/NAME with args.
func script(name string, args ...string) (string, error) {
	cmd := exec.Command("bash", append([]string{filepath.Join(repoRoot, "scripts", name)}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// backendPort is node i's (0-based) port.
func backendPort(i int) int { return basePort + i }
