package proxy

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
	"github.com/keyshard/keyshard/proxy/config"
	"github.com/keyshard/keyshard/proxy/control"
	"github.com/keyshard/keyshard/proxy/frontend"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The harness of the client-protocol fuzz targets (auth_fuzz_test.go,
// dispatch_fuzz_test.go): a real Server, listening on 127.0.0.1, in front
// of fakeBackend, and the checks every connection must pass once its client
// has gone: the session ended, and nothing it counted (connections,
// per-user sessions, prepared statements, backend connections in use,
// goroutines) stayed behind.

// fuzzYAML is the harness's configuration; %s is the fake backend. Users:
// ks (sharded schema), plain (unsharded), root (admin, XA transactions),
// nopw (no password, no schema), sha2 and sha2nopw (caching_sha2_password).
const fuzzYAML = `
addr: 127.0.0.1:1 # unused: the harness serves its own listener
user_list:
  - user: ks
    password: ks
  - user: plain
    password: plain
  - user: root
    password: rootpw
  - user: nopw
    password: ""
  - user: sha2
    password: sha2pw
    auth_plugin: caching_sha2_password
  - user: sha2nopw
    password: ""
    auth_plugin: caching_sha2_password
    max_connections: 1
health_check_interval: 1h
xa_recover_interval: 1h
pool_wait_timeout: 2s
pool_min_idle: 1
connect_timeout: 2s
digest_size: 100
nodes:
  - name: node1
    user: ks
    password: ks
    master: %[1]s
    max_conns_limit: 8
  - name: node2
    user: ks
    password: ks
    master: %[1]s
    max_conns_limit: 8
schema_list:
  - user: ks
    nodes: [node1, node2]
    default: node1
    shard:
      - db: kingshard
        table: test_shard_hash
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [2, 2]
      - db: kingshard
        table: test_shard_range
        key: id
        nodes: [node1, node2]
        type: range
        locations: [2, 2]
        table_row_limit: 100
  - user: plain
    nodes: [node1]
    default: node1
    shard:
      -
  - user: root
    nodes: [node1, node2]
    default: node1
    transaction_mode: xa
    shard:
      - db: kingshard
        table: test_shard_hash
        key: id
        nodes: [node1, node2]
        type: hash
        locations: [2, 2]
`

// fuzzPasswords are the harness users' passwords.
var fuzzPasswords = map[string]string{"ks": "ks", "plain": "plain", "root": "rootpw", "nopw": "", "sha2": "sha2pw", "sha2nopw": ""}

// fuzzRSAKey is a small RSA key for caching_sha2 full authentication,
// made once per process (the Server would make a 2048-bit one each time).
var fuzzRSAKey = sync.OnceValue(func() []byte {
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
})

type fuzzProxy struct {
	srv  *Server
	fake *fakeBackend
	addr string
	gate chan struct{} // see gatedListener
	logs *observer.ObservedLogs
	tls  bool
	base int // goroutines of an idle harness, less the fake's connections
}

// gatedListener hands a connection to Serve only with a token from gate,
// which the harness sends before each dial. A token so orders each
// connection's Server.wg.Add after the harness's Wait for the previous
// session (settle), which the race detector cannot see through TCP.
type gatedListener struct {
	net.Listener
	gate chan struct{}
}

func (l gatedListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err == nil {
		<-l.gate
	}
	return nc, err
}

// newFuzzProxy starts the harness; withTLS adds a self-signed certificate
// (tls_cert, tls_key).
func newFuzzProxy(f testing.TB, withTLS bool) *fuzzProxy {
	f.Helper()
	dir := f.TempDir()
	fake := newFakeBackend(f)
	yaml := fmt.Sprintf(fuzzYAML, fake.addr())
	keyPath := filepath.Join(dir, "rsa.pem")
	if err := os.WriteFile(keyPath, fuzzRSAKey(), 0o600); err != nil {
		f.Fatal(err)
	}
	yaml += "rsa_key: " + keyPath + "\n"
	if withTLS {
		cert, key := selfSigned(f)
		certPath, tlsKeyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		if err := os.WriteFile(certPath, cert, 0o600); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(tlsKeyPath, key, 0o600); err != nil {
			f.Fatal(err)
		}
		yaml += "tls_cert: " + certPath + "\ntls_key: " + tlsKeyPath + "\n"
	}
	cfg, _, err := config.Parse([]byte(yaml), "")
	if err != nil {
		f.Fatalf("config: %v", err)
	}
	core, logs := observer.New(zapcore.ErrorLevel)
	srv, err := New(cfg, zap.New(core), config.Local{})
	if err != nil {
		f.Fatal(err)
	}
	srv.SetAdmin(fuzzAdmin)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	// Refused COM_CHANGE_USERs are answered at once.
	pause := frontend.ChangeUserPause
	frontend.ChangeUserPause = 0
	served := make(chan struct{})
	h := &fuzzProxy{srv: srv, fake: fake, addr: ln.Addr().String(), gate: make(chan struct{}, 16), logs: logs, tls: withTLS}
	go func() { _ = srv.Serve(gatedListener{ln, h.gate}); close(served) }()
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			f.Errorf("shutdown: %v", err)
		}
		<-served
		fake.close()
		frontend.ChangeUserPause = pause
	})
	h.base = runtime.NumGoroutine() - fake.connCount()
	return h
}

// fuzzAdmin answers `admin fuzz ...` (an OK) and `show fuzz ...` (a result
// set), so that the admin path of COM_QUERY is driven too.
func fuzzAdmin(req AdminRequest) (*AdminResult, bool, error) {
	switch {
	case hasPrefixFold(req.SQL, "admin fuzz error"):
		return nil, true, control.ArgErrorf("fuzz admin error")
	case hasPrefixFold(req.SQL, "admin fuzz"):
		return &AdminResult{Affected: 1, Info: "fuzz"}, true, nil
	case hasPrefixFold(req.SQL, "show fuzz"):
		return &AdminResult{Columns: []string{"a", "b"}, Rows: [][]string{{"1", "2"}, {"3", req.SQL}}}, true, nil
	}
	return nil, false, nil
}

func hasPrefixFold(s, prefix string) bool {
	_, ok := cutPrefixFold(s, prefix)
	return ok
}

// selfSigned returns a PEM certificate and key for 127.0.0.1.
func selfSigned(tb testing.TB) (certPEM, keyPEM []byte) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "keyshard-fuzz"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// dial connects to the harness, with a deadline for the connection's
// whole life (the caller closes it).
func (h *fuzzProxy) dial(t *testing.T) net.Conn {
	h.gate <- struct{}{}
	nc, err := net.Dial("tcp", h.addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Now().Add(fuzzAnswerTimeout))
	return nc
}

// fuzzAnswerTimeout bounds a connection's whole life in the harness: no
// answer takes long from the fake backend, so running out of it is a
// session that hangs.
const fuzzAnswerTimeout = 20 * time.Second

// settle checks, once a client has closed its connection, that its session
// ended and left nothing behind. A session that panicked is reported
// first, with the client's error (clientErr, nil if none) after it: the
// client's is only the symptom.
func (h *fuzzProxy) settle(t *testing.T, clientErr error) {
	t.Helper()
	if err := h.settled(t); err != nil || clientErr != nil {
		t.Fatal(errors.Join(err, clientErr))
	}
}

func (h *fuzzProxy) settled(t *testing.T) error {
	s := h.srv
	done := make(chan struct{})
	go func() {
		<-s.fe.Done()
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("session still running 10s after its client closed\n%s", goroutines())
	}
	for _, e := range h.logs.TakeAll() {
		if e.Message == "session panic" {
			return fmt.Errorf("session panicked: %v\n%v", e.ContextMap()["panic"], e.ContextMap()["stack"])
		}
	}
	if n := s.fe.Conns(); n != 0 {
		return fmt.Errorf("%d connections still counted", n)
	}
	if n := s.fe.LoggingIn(); n != 0 {
		return fmt.Errorf("%d connections still counted as logging in", n)
	}
	var err error
	s.userConns.Range(func(k, v any) bool {
		if n := v.(*atomic.Int64).Load(); n != 0 {
			err = fmt.Errorf("user %q still has %d sessions", k, n)
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	if n := s.stmtRefs.Len(); n != 0 {
		return fmt.Errorf("%d statement texts still held by clients", n)
	}
	if v := gaugeValue(t, s, "keyshard_client_prepared_statements"); v != 0 {
		return fmt.Errorf("keyshard_client_prepared_statements = %v after every session ended", v)
	}
	// Backend connections go back to their pools (or are closed) as the
	// session ends; goroutines of a statement (merge legs) end with it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		inUse := int64(0)
		for _, n := range s.Nodes() {
			for _, p := range n.Pools() {
				inUse += p.InUse()
			}
		}
		extra := runtime.NumGoroutine() - h.fake.connCount() - h.base
		if inUse == 0 && extra <= 20 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after the session ended: %d backend connections in use, %d goroutines more than idle\n%s", inUse, extra, goroutines())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func gaugeValue(t *testing.T, s *Server, name string) float64 {
	mfs, err := s.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			sum := 0.0
			for _, m := range mf.GetMetric() {
				sum += m.GetGauge().GetValue()
			}
			return sum
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func goroutines() string {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	return b.String()
}

// resetLoginFailures forgets failed logins, so that the harness's are
// answered without the growing delay a password guesser gets.
func (h *fuzzProxy) resetLoginFailures() {
	h.srv.fe.ForgetFailures()
}

// greeting is what a client reads in the proxy's HandshakeV10.
type greeting struct {
	threadID uint32
	caps     uint32
	scramble []byte
	plugin   string
}

// parseGreeting decodes and checks a HandshakeV10 as a client would.
func parseGreeting(p []byte) (greeting, error) {
	var g greeting
	if len(p) == 0 || p[0] != 10 {
		return g, errors.New("greeting is not protocol 10")
	}
	_, pos, err := wire.ReadNulString(p, 1)
	if err != nil {
		return g, errors.New("greeting: unterminated version")
	}
	if pos+4+8+1+2+1+2+2+1+10+13 > len(p) {
		return g, errors.New("greeting: short")
	}
	g.threadID = binary.LittleEndian.Uint32(p[pos:])
	pos += 4
	g.scramble = append(g.scramble, p[pos:pos+8]...)
	pos += 8
	if p[pos] != 0 {
		return g, errors.New("greeting: no filler after the scramble")
	}
	pos++
	g.caps = uint32(binary.LittleEndian.Uint16(p[pos:]))
	pos += 2 + 1 + 2
	g.caps |= uint32(binary.LittleEndian.Uint16(p[pos:])) << 16
	pos += 2
	if p[pos] != 21 {
		return g, fmt.Errorf("greeting: auth data length %d", p[pos])
	}
	pos += 1 + 10
	g.scramble = append(g.scramble, p[pos:pos+12]...)
	if p[pos+12] != 0 {
		return g, errors.New("greeting: scramble not NUL-terminated")
	}
	pos += 13
	plugin, next, err := wire.ReadNulString(p, pos)
	if err != nil || next != len(p) {
		return g, errors.New("greeting: bad plugin name")
	}
	g.plugin = string(plugin)
	if g.caps&mysql.CLIENT_PROTOCOL_41 == 0 || g.caps&mysql.CLIENT_SECURE_CONNECTION == 0 || g.caps&mysql.CLIENT_PLUGIN_AUTH == 0 {
		return g, fmt.Errorf("greeting: capabilities %#x", g.caps)
	}
	return g, nil
}

// splitPackets cuts data into at most max packets, each a 2-byte
// little-endian length (cut to what is left) and that many bytes.
func splitPackets(data []byte, max int) [][]byte {
	var out [][]byte
	for len(data) >= 2 && len(out) < max {
		n := min(int(binary.LittleEndian.Uint16(data)), len(data)-2)
		out = append(out, data[2:2+n])
		data = data[2+n:]
	}
	return out
}

// joinPackets is the inverse of splitPackets, for seeds.
func joinPackets(ps ...[]byte) []byte {
	var b []byte
	for _, p := range ps {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(p)))
		b = append(b, p...)
	}
	return b
}

// closedErr reports whether err is how a read sees a connection the
// other side closed.
func closedErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "connection reset by peer") || strings.Contains(err.Error(), "broken pipe")
}

// checkErr checks an ERR packet: an errno, a SQLSTATE, a message.
func checkErr(p []byte) (*mysql.MyError, error) {
	if len(p) < 9 || p[0] != wire.ErrHeader || p[3] != '#' {
		return nil, fmt.Errorf("malformed ERR packet %q", p)
	}
	e := wire.ParseErr(p)
	if e.Code == 0 || e.Code == 0xffff {
		return nil, fmt.Errorf("ERR packet with errno %d", e.Code)
	}
	for i := range 5 {
		if c := e.State[i]; (c < '0' || c > '9') && (c < 'A' || c > 'Z') {
			return nil, fmt.Errorf("ERR packet with SQLSTATE %q", e.State)
		}
	}
	if e.Message == "" {
		return nil, fmt.Errorf("ERR %d without a message", e.Code)
	}
	return e, nil
}
