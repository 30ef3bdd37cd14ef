package torture

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// controller makes the faults: every 150-600 ms one of SIGKILL or
// SIGSTOP (SIGCONT 0.2-3 s later) of a keyshard instance, SIGKILL (then
// start again), SIGSTOP (then SIGCONT) or restart of a backend, or
// nothing. One fault at a time on a keyshard instance, one at a time on
// the backends, so that work gets done between them.
type controller struct {
	rng *rand.Rand

	mu          sync.Mutex
	ks          []*keyshard
	ksBusy      map[*keyshard]bool
	backendBusy bool
	kills       map[string]int // faults by kind
	log         io.Writer      // each fault, with its time
	last        []any          // the last fault
	wg          sync.WaitGroup
}

func (c *controller) setKS(ks []*keyshard) {
	c.mu.Lock()
	c.ks = ks
	c.mu.Unlock()
}

// wait waits for the faults in progress (stopped processes continued,
// killed backends started again).
func (c *controller) wait() { c.wg.Wait() }

// storm makes faults until the time until.
func (c *controller) storm(t *testing.T, until time.Time) {
	for time.Now().Before(until) {
		time.Sleep(time.Duration(150+c.rngIntN(450)) * time.Millisecond)
		c.fault(t)
	}
}

// pause is how long a SIGSTOP lasts: 0.2-3 s, one time in ten up to 9 s
// (longer than xa_prepared_timeout: the stopped instance is taken for
// dead by the other's recovery only if its lock is free, so not then).
func (c *controller) pause() time.Duration {
	if c.rng.IntN(10) == 0 {
		return time.Duration(3000+c.rng.IntN(6000)) * time.Millisecond
	}
	return time.Duration(200+c.rng.IntN(2800)) * time.Millisecond
}

func (c *controller) fault(t *testing.T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := sum(c.kills)
	defer func() {
		if c.log != nil && sum(c.kills) != before {
			fmt.Fprintf(c.log, "%s %v\n", time.Now().Format("15:04:05.000"), c.last)
		}
	}()
	if c.ksBusy == nil {
		c.ksBusy = map[*keyshard]bool{}
	}
	k := c.ks[c.rng.IntN(len(c.ks))]
	node := c.rng.IntN(nBackend)
	port := backendPort(node)
	name := fmt.Sprintf("node%d", node+1)
	switch r := c.rng.IntN(100); {
	case r < 25:
		if c.ksBusy[k] {
			return
		}
		if k.signal(syscall.SIGKILL) {
			c.kills["SIGKILL keyshard"]++
			c.last = []any{"SIGKILL", k.name}
		}
	case r < 40:
		if c.ksBusy[k] {
			return
		}
		d := c.pause()
		if !k.signal(syscall.SIGSTOP) {
			return
		}
		c.kills["SIGSTOP keyshard"]++
		c.last = []any{"SIGSTOP", k.name, d}
		c.ksBusy[k] = true
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			time.Sleep(d)
			k.signal(syscall.SIGCONT)
			c.mu.Lock()
			c.ksBusy[k] = false
			c.mu.Unlock()
		}()
	case r < 80:
		if c.backendBusy {
			return
		}
		kind := []string{"SIGKILL", "SIGSTOP", "restart"}[(r-40)/14%3]
		pid := backendPid(port)
		if pid == 0 {
			return
		}
		d := c.pause()
		c.backendBusy = true
		c.kills[kind+" backend"]++
		c.last = []any{kind, name, d}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			defer func() {
				c.mu.Lock()
				c.backendBusy = false
				c.mu.Unlock()
			}()
			switch kind {
			case "SIGKILL":
				_ = syscall.Kill(pid, syscall.SIGKILL)
				waitGone(pid, 10*time.Second)
				time.Sleep(time.Duration(c.rngIntN(1000)) * time.Millisecond)
			case "SIGSTOP":
				_ = syscall.Kill(pid, syscall.SIGSTOP)
				time.Sleep(d)
				_ = syscall.Kill(pid, syscall.SIGCONT)
				return
			case "restart":
				if out, err := script("backends.sh", "stop", fmt.Sprint(port)); err != nil {
					t.Errorf("backends.sh stop %d (%s): %v\n%s", port, name, err, out)
				}
			}
			if out, err := script("backends.sh", "start", fmt.Sprint(port)); err != nil {
				t.Errorf("backends.sh start %d (%s): %v\n%s", port, name, err, out)
			}
		}()
	}
}

// rngIntN is rng.IntN under the lock (for the fault goroutines).
func (c *controller) rngIntN(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.IntN(n)
}

// runBin runs the keyshard binary with args (a subcommand).
func runBin(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
