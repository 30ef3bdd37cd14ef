package torture

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// raceBuild: the test binary has the race detector, so keyshard gets it too.
var raceBuild bool

// buildKeyshard builds ./cmd/keyshard into dir (with -race if the test
// runs with it) and returns the binary's path.
func buildKeyshard(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "keyshard")
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/keyshard")...)
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/keyshard: %v\n%s", err, out)
	}
	return bin
}

// keyshard is one instance (a name and an address) whose process a
// supervisor starts again whenever it ends while the instance is wanted:
// after a SIGKILL of the controller, or a failpoint's own kill.
type keyshard struct {
	name, addr, bin, url, logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited bool // cmd has ended (set after its Wait)
	want   bool
	done   chan struct{} // closed when the supervisor has stopped

	failpoints atomic.Bool // starts may get KS_FAILPOINT (during the storm)
	rng        *rand.Rand  // under mu
	starts     atomic.Int64
	failStarts atomic.Int64 // starts with a failpoint
}

// start runs the supervisor and waits until the first process listens.
func (k *keyshard) start(t *testing.T) {
	t.Helper()
	k.mu.Lock()
	k.want = true
	k.done = make(chan struct{})
	k.mu.Unlock()
	ready := make(chan error, 1)
	go k.supervise(ready)
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
}

func (k *keyshard) supervise(ready chan<- error) {
	defer close(k.done)
	first := true
	for {
		k.mu.Lock()
		if !k.want {
			k.mu.Unlock()
			return
		}
		fp := ""
		if k.failpoints.Load() && k.rng.IntN(3) == 0 {
			// It kills itself at its n-th two-phase step of this kind:
			// branches prepared with no decision, or decided and not
			// all committed.
			fp = fmt.Sprintf("kill:%s:%d", []string{"prepare", "decide", "commit"}[k.rng.IntN(3)], 1+k.rng.IntN(15))
			k.failStarts.Add(1)
		}
		cmd := exec.Command(k.bin, "-config", k.url, "-addr", k.addr, "-name", k.name)
		logf, err := os.OpenFile(k.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			fmt.Fprintf(logf, "=== torture: start %s failpoint=%q at %s\n", k.name, fp, time.Now().Format(time.RFC3339Nano))
			cmd.Stdout, cmd.Stderr = logf, logf
			cmd.Env = append(os.Environ(), "KS_FAILPOINT="+fp)
			err = cmd.Start()
		}
		if err != nil {
			k.mu.Unlock()
			if first {
				ready <- fmt.Errorf("starting %s: %v", k.name, err)
			}
			return
		}
		k.cmd, k.exited = cmd, false
		k.starts.Add(1)
		k.mu.Unlock()
		if first {
			ready <- waitListen(k.addr, 60*time.Second)
			first = false
		}
		_ = cmd.Wait()
		k.mu.Lock()
		k.exited = true // cmd.ProcessState is Wait's, not to be read under mu
		k.mu.Unlock()
		logf.Close()
		time.Sleep(50 * time.Millisecond)
	}
}

// signal sends sig to the running process (none: false).
func (k *keyshard) signal(sig syscall.Signal) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.cmd == nil || k.exited {
		return false
	}
	return k.cmd.Process.Signal(sig) == nil
}

// stop ends the instance: SIGTERM (SIGKILL after 10 s), not started again.
func (k *keyshard) stop() {
	k.mu.Lock()
	if !k.want {
		k.mu.Unlock()
		return
	}
	k.want = false
	cmd := k.cmd
	k.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-k.done:
	case <-time.After(10 * time.Second):
		k.signal(syscall.SIGKILL)
		<-k.done
	}
}

// restartClean makes sure a process without failpoint runs and listens:
// the one of recovery.
func (k *keyshard) restartClean() error {
	k.failpoints.Store(false)
	k.signal(syscall.SIGCONT)
	k.signal(syscall.SIGKILL)
	// The supervisor starts it again; wait for a start after the kill.
	n := k.starts.Load()
	for deadline := time.Now().Add(30 * time.Second); k.starts.Load() == n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not started again in 30 s", k.name)
		}
	}
	return waitListen(k.addr, 60*time.Second)
}

// waitListen waits until addr accepts connections.
func waitListen(addr string, d time.Duration) error {
	for deadline := time.Now().Add(d); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %s", addr, d)
		}
	}
}

// backendPid is the running mariadbd of port (0 if none).
func backendPid(port int) int {
	b, err := os.ReadFile(filepath.Join(os.Getenv("KS_BACKENDS_DIR"), strconv.Itoa(port), "pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	// A pid file left by a killed server may name a recycled pid.
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(comm)) != "mariadbd" {
		return 0
	}
	return pid
}

// signalBackend sends sig to port's mariadbd.
func signalBackend(port int, sig syscall.Signal) error {
	pid := backendPid(port)
	if pid <= 0 {
		return fmt.Errorf("no pid for the backend on %d", port)
	}
	return syscall.Kill(pid, sig)
}

// waitGone waits until pid has exited (or is a zombie).
func waitGone(pid int, d time.Duration) {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		s := string(b)
		if i := strings.LastIndex(s, ") "); i >= 0 && strings.HasPrefix(s[i+2:], "Z") {
			return
		}
	}
}
