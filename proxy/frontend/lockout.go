package frontend

import (
	"net"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Failed logins: each is logged (at most loginLogPerSecond lines a second,
// the rest counted in the next line), and from the third failure of an
// address within loginFailWindow its answers come later and later, up to
// loginMaxDelay: a password guesser that waits for answers is slowed to a
// crawl, one that opens many connections at once is held by
// max_unauthenticated_per_host. A login that succeeds clears its
// address's count.
const (
	loginFailWindow   = time.Minute
	loginFirstDelay   = 250 * time.Millisecond
	loginMaxDelay     = 5 * time.Second
	loginLogPerSecond = 10
)

// Lockout counts failed logins by client address, on one interface (the
// SQL port's is the Listener's; the web port keeps its own).
type Lockout struct {
	mu         sync.Mutex
	byHost     map[string]*hostFailures
	second     int64 // unix second of the log budget
	logged     int   // lines logged in that second
	suppressed int   // lines not logged since the last one that was
}

type hostFailures struct {
	n      int
	last   time.Time
	locked time.Time // refused until then (login_lockout_failures)
}

// failed counts a failed login from host and returns its failures within
// the window and how long to wait before answering. With lockAfter > 0, the
// lockAfter-th failure locks host out for lockFor.
func (l *Lockout) failed(host string, lockAfter int, lockFor time.Duration) (n int, delay time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.byHost == nil {
		l.byHost = map[string]*hostFailures{}
	}
	if len(l.byHost) > 10000 {
		for h, f := range l.byHost {
			if now.Sub(f.last) > loginFailWindow && now.After(f.locked) {
				delete(l.byHost, h)
			}
		}
	}
	f := l.byHost[host]
	if f == nil || now.Sub(f.last) > loginFailWindow && now.After(f.locked) {
		f = &hostFailures{}
		l.byHost[host] = f
	}
	f.n++
	f.last = now
	if lockAfter > 0 && f.n >= lockAfter {
		f.locked = now.Add(lockFor)
	}
	if f.n >= 3 {
		delay = min(loginFirstDelay<<min(f.n-3, 8), loginMaxDelay)
	}
	return f.n, delay
}

// LockedFor returns how long host is still locked out (0: not).
func (l *Lockout) LockedFor(host string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.byHost[host]; f != nil {
		if d := time.Until(f.locked); d > 0 {
			return d
		}
	}
	return 0
}

// Succeeded clears host's count.
func (l *Lockout) Succeeded(host string) {
	l.mu.Lock()
	delete(l.byHost, host)
	l.mu.Unlock()
}

// logLine reports whether a failed login may be logged now, and how many
// were not logged before it.
func (l *Lockout) logLine() (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if sec := time.Now().Unix(); sec != l.second {
		l.second, l.logged = sec, 0
	}
	if l.logged >= loginLogPerSecond {
		l.suppressed++
		return false, 0
	}
	l.logged++
	suppressed, l.suppressed = l.suppressed, 0
	return true, suppressed
}

// Failed counts and logs a failed login of user from host on interface
// iface ("sql" or "web") and returns how long its answer waits. With
// lockAfter > 0, the lockAfter-th failure locks host out for lockFor.
func (l *Lockout) Failed(log *zap.Logger, iface, user, host, reason string, lockAfter int, lockFor time.Duration) time.Duration {
	n, delay := l.failed(host, lockAfter, lockFor)
	if ok, suppressed := l.logLine(); ok {
		log.Warn("login failed", zap.String("interface", iface), zap.String("user", echoName(user)), zap.String("client", host),
			zap.String("reason", reason), zap.Int("failures_from_client", n), zap.Duration("answer_delay", delay),
			zap.Int("not_logged_before", suppressed))
	}
	return delay
}

// HostOf is the host of remote (host:port), or remote if it has no port.
func HostOf(remote string) string {
	if h, _, err := net.SplitHostPort(remote); err == nil {
		return h
	}
	return remote
}
