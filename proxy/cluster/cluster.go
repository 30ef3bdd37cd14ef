// Package cluster keeps the config that several keyshard instances share
// in etcd, and their membership.
//
// Everything lives under one prefix (etcd://host:port/PREFIX):
//
//	PREFIX/config          the ks.yaml document, as written
//	PREFIX/force           written in the same transaction as a config
//	                       that may move existing rows (push -force,
//	                       ADMIN RELOAD FORCE): instances apply it as forced
//	PREFIX/blacklist       the SQL blacklist, one statement per line
//	PREFIX/down/NODE/ADDR  a backend an operator took out of service
//	PREFIX/members/NAME    one live instance, under its lease
//
// Every write that replaces a document is a compare-and-swap on the
// revision the writer read (ErrConflict when another write came first),
// so no change is merged silently.
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Scheme is how -config names an etcd cluster; SchemeTLS the same with
// TLS (also on when a CA or client certificate is given).
const (
	Scheme    = "etcd://"
	SchemeTLS = "etcds://"
)

// IsURL reports whether a -config value names etcd rather than a file.
func IsURL(s string) bool { return strings.HasPrefix(s, Scheme) || strings.HasPrefix(s, SchemeTLS) }

// URL is a parsed etcd://[user[:password]@]host:port[,host:port...]/prefix.
type URL struct {
	Endpoints []string
	Prefix    string // "/keyshard" when the URL has none; never ends in "/"
	User      string
	Password  string
	TLS       bool
}

// String is the URL without its password: how messages name the source.
func (u URL) String() string {
	s := Scheme
	if u.TLS {
		s = SchemeTLS
	}
	if u.User != "" {
		s += u.User + "@"
	}
	return s + strings.Join(u.Endpoints, ",") + u.Prefix
}

// ParseURL reads an etcd URL.
func ParseURL(s string) (URL, error) {
	var u URL
	switch {
	case strings.HasPrefix(s, Scheme):
		s = s[len(Scheme):]
	case strings.HasPrefix(s, SchemeTLS):
		s, u.TLS = s[len(SchemeTLS):], true
	default:
		return u, fmt.Errorf("%q: want etcd://host:port[,host:port...]/prefix", s)
	}
	hosts, prefix, _ := strings.Cut(s, "/")
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		u.User, u.Password, _ = strings.Cut(hosts[:at], ":")
		hosts = hosts[at+1:]
	}
	for h := range strings.SplitSeq(hosts, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if !strings.Contains(h, ":") {
			h += ":2379"
		}
		u.Endpoints = append(u.Endpoints, h)
	}
	if len(u.Endpoints) == 0 {
		return u, fmt.Errorf("%s: no etcd endpoint (want etcd://host:port[,host:port...]/prefix)", Scheme+s)
	}
	u.Prefix = "/" + strings.Trim(prefix, "/")
	if u.Prefix == "/" {
		u.Prefix = "/keyshard"
	}
	return u, nil
}

// Options are the connection's TLS and credentials, from flags or the
// environment (KEYSHARD_ETCD_CACERT, _CERT, _KEY, _USER, _PASSWORD). A
// user in the URL wins over these.
type Options struct {
	CACert, Cert, Key string
	User, Password    string
	DialTimeout       time.Duration // default 5s
	RequestTimeout    time.Duration // each call; default 5s
	// NameWait: how long Register waits for a name held by an instance of
	// the same host on another address (a restart on a new -addr: the
	// old one's lease runs out) before refusing it; default MemberTTL+1s.
	NameWait time.Duration
	Log      *zap.Logger // the etcd client's own log (default: none)
}

// FromEnv fills what o leaves empty from the environment.
func (o Options) FromEnv() Options {
	or := func(v *string, env string) {
		if *v == "" {
			*v = os.Getenv(env)
		}
	}
	or(&o.CACert, "KEYSHARD_ETCD_CACERT")
	or(&o.Cert, "KEYSHARD_ETCD_CERT")
	or(&o.Key, "KEYSHARD_ETCD_KEY")
	or(&o.User, "KEYSHARD_ETCD_USER")
	or(&o.Password, "KEYSHARD_ETCD_PASSWORD")
	return o
}

// Store is a connection to the shared config.
type Store struct {
	cli      *clientv3.Client
	url      URL
	timeout  time.Duration
	nameWait time.Duration
}

// Open connects to the etcd cluster of rawURL. It does not wait for etcd:
// the first call does (and fails after the request timeout).
func Open(rawURL string, o Options) (*Store, error) {
	u, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	cc := clientv3.Config{Endpoints: u.Endpoints, DialTimeout: o.DialTimeout, Username: u.User, Password: u.Password,
		Logger: o.Log, DialKeepAliveTime: 5 * time.Second, DialKeepAliveTimeout: 3 * time.Second,
		// Reconnect within a second of etcd's return (gRPC's default
		// backoff grows to two minutes): instances catch up at once.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		})}}
	if cc.Username == "" {
		cc.Username, cc.Password = o.User, o.Password
	}
	if cc.DialTimeout == 0 {
		cc.DialTimeout = 5 * time.Second
	}
	if cc.Logger == nil {
		cc.Logger = zap.NewNop()
	}
	if u.TLS || o.CACert != "" || o.Cert != "" {
		u.TLS = true
		if cc.TLS, err = tlsConfig(o); err != nil {
			return nil, err
		}
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	st := &Store{cli: cli, url: u, timeout: o.RequestTimeout, nameWait: o.NameWait}
	if st.nameWait == 0 {
		st.nameWait = MemberTTL + time.Second
	}
	if st.timeout == 0 {
		st.timeout = 5 * time.Second
	}
	return st, nil
}

func tlsConfig(o Options) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CACert != "" {
		pem, err := os.ReadFile(o.CACert)
		if err != nil {
			return nil, fmt.Errorf("etcd CA certificate: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("etcd CA certificate %s: no certificate in it", o.CACert)
		}
	}
	if o.Cert != "" || o.Key != "" {
		cert, err := tls.LoadX509KeyPair(o.Cert, o.Key)
		if err != nil {
			return nil, fmt.Errorf("etcd client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Close ends the connection (a member registered through it goes at
// once: its lease is revoked by Register's caller cancelling it first).
func (s *Store) Close() error { return s.cli.Close() }

// Source names the store in messages and in Config.Source.
func (s *Store) Source() string { return s.url.String() }

func (s *Store) key(parts ...string) string { return s.url.Prefix + "/" + strings.Join(parts, "/") }

// call gives one request its timeout.
func (s *Store) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// unreachable wraps an etcd failure with the source's name.
func (s *Store) unreachable(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: etcd did not answer within %s (unreachable, or its TLS certificate not trusted: -etcd-cacert?)", s.Source(), s.timeout)
	}
	return fmt.Errorf("%s: %w", s.Source(), err)
}

// ErrConflict is a compare-and-swap lost to another writer: the document
// changed since it was read. Read again and redo the change.
var ErrConflict = errors.New("the shared document changed since it was read (another instance or operator wrote it first)")

// ErrNoConfig is a store with no config document yet.
var ErrNoConfig = errors.New("no config document")

// Down marks a backend an operator took out of service, for every
// instance.
type Down struct {
	Node string    `json:"node"`
	Role string    `json:"role"` // master | slave
	Addr string    `json:"addr"`
	By   string    `json:"by"` // who (user via interface on instance)
	At   time.Time `json:"at"`
}

// State is the shared config at one revision of the store.
type State struct {
	Rev          int64  // the store's revision it was read at
	Cluster      uint64 // etcd's cluster id (a wiped etcd is another cluster)
	Config       []byte // the ks.yaml document
	ConfigRev    int64  // its modification revision (0: none)
	Forced       bool   // written as forced (may move existing rows)
	ForceRev     int64  // the revision of the last document written forced (0: none)
	Blacklist    []byte
	BlacklistRev int64
	Down         []Down
}

// Read returns the shared state, read in one transaction.
func (s *Store) Read(ctx context.Context) (State, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.key("config")),
		clientv3.OpGet(s.key("force")),
		clientv3.OpGet(s.key("blacklist")),
		clientv3.OpGet(s.key("down")+"/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return State{}, s.unreachable(err)
	}
	st := State{Rev: resp.Header.Revision, Cluster: resp.Header.ClusterId}
	r := resp.Responses
	if f := r[1].GetResponseRange().Kvs; len(f) > 0 {
		st.ForceRev = f[0].ModRevision
	}
	if kvs := r[0].GetResponseRange().Kvs; len(kvs) > 0 {
		st.Config, st.ConfigRev = kvs[0].Value, kvs[0].ModRevision
		st.Forced = st.ForceRev == st.ConfigRev
	}
	if kvs := r[2].GetResponseRange().Kvs; len(kvs) > 0 {
		st.Blacklist, st.BlacklistRev = kvs[0].Value, kvs[0].ModRevision
	}
	for _, kv := range r[3].GetResponseRange().Kvs {
		var d Down
		if json.Unmarshal(kv.Value, &d) == nil && d.Node != "" {
			st.Down = append(st.Down, d)
		}
	}
	return st, nil
}

// cas writes value at key if the key's modification revision is still
// ifRev (0: the key must not exist) and, when ifRev is not 0, its value
// is still was, with extra puts in the same transaction. It returns the
// new revision. The value is compared too because a revision alone does
// not name a value across etcd histories: a wiped etcd counts from 1
// again, and its document may have the revision of the one the writer
// last read from the old one.
func (s *Store) cas(ctx context.Context, key string, value []byte, ifRev int64, was []byte, extra ...clientv3.Op) (int64, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	cmp := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", ifRev)}
	if ifRev != 0 {
		cmp = append(cmp, clientv3.Compare(clientv3.Value(key), "=", string(was)))
	}
	resp, err := s.cli.Txn(ctx).
		If(cmp...).
		Then(append([]clientv3.Op{clientv3.OpPut(key, string(value))}, extra...)...).
		Commit()
	if err != nil {
		return 0, s.unreachable(err)
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}

// PutConfig writes the config document if it is still was at revision
// ifRev (0: there is none yet). forced marks it as allowed to move
// existing rows of sharded tables.
func (s *Store) PutConfig(ctx context.Context, doc []byte, ifRev int64, was []byte, forced bool) (int64, error) {
	var extra []clientv3.Op
	if forced {
		extra = append(extra, clientv3.OpPut(s.key("force"), "1"))
	}
	return s.cas(ctx, s.key("config"), doc, ifRev, was, extra...)
}

// PutBoth writes the config document and the SQL blacklist in one
// transaction, each if still at its revision (push -blacklist): both or
// neither.
func (s *Store) PutBoth(ctx context.Context, doc []byte, ifRev int64, forced bool, black []byte, blackIfRev int64) (int64, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	ops := []clientv3.Op{clientv3.OpPut(s.key("config"), string(doc)), clientv3.OpPut(s.key("blacklist"), string(black))}
	if forced {
		ops = append(ops, clientv3.OpPut(s.key("force"), "1"))
	}
	resp, err := s.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(s.key("config")), "=", ifRev),
		clientv3.Compare(clientv3.ModRevision(s.key("blacklist")), "=", blackIfRev),
	).Then(ops...).Commit()
	if err != nil {
		return 0, s.unreachable(err)
	}
	if !resp.Succeeded {
		return 0, ErrConflict
	}
	return resp.Header.Revision, nil
}

// PutBlacklist writes the SQL blacklist if it is still was at revision
// ifRev (0: there is none yet).
func (s *Store) PutBlacklist(ctx context.Context, data []byte, ifRev int64, was []byte) (int64, error) {
	return s.cas(ctx, s.key("blacklist"), data, ifRev, was)
}

// SetDown marks d's backend out of service (down) or removes the mark,
// and returns the store's revision after it.
func (s *Store) SetDown(ctx context.Context, d Down, down bool) (int64, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	key := s.key("down", d.Node, d.Role, d.Addr)
	if down {
		b, _ := json.Marshal(d)
		resp, err := s.cli.Put(ctx, key, string(b))
		if err != nil {
			return 0, s.unreachable(err)
		}
		return resp.Header.Revision, nil
	}
	resp, err := s.cli.Delete(ctx, key)
	if err != nil {
		return 0, s.unreachable(err)
	}
	return resp.Header.Revision, nil
}

// Watch sends on the channel it returns whenever the shared state may
// have changed after revision rev (a config, blacklist or down mark
// written), and after the watch had to start over (etcd lost and back,
// history compacted): the receiver reads the state again (Read) and
// applies what changed. Sends never block: one pending signal stands for
// any number of changes. It runs until ctx ends.
func (s *Store) Watch(ctx context.Context, rev int64) <-chan struct{} {
	ch := make(chan struct{}, 1)
	signal := func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	members := s.key("members") + "/"
	go func() {
		for ctx.Err() == nil {
			wctx, cancel := context.WithCancel(ctx)
			wctx = clientv3.WithRequireLeader(wctx)
			for resp := range s.cli.Watch(wctx, s.url.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
				if err := resp.Err(); err != nil {
					break // compacted, leader lost...: start over below
				}
				for _, ev := range resp.Events {
					if !strings.HasPrefix(string(ev.Kv.Key), members) {
						signal()
						break
					}
				}
				rev = resp.Header.Revision
			}
			cancel()
			if ctx.Err() != nil {
				return
			}
			// The watch ended (etcd unreachable, compaction): what was
			// missed is read again by the receiver; a new watch starts
			// from the newest revision etcd knows.
			signal()
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			if cur, err := s.revision(ctx); err == nil {
				rev = cur
			}
		}
	}()
	return ch
}

// ConfigAt returns the config document as it was at revision rev (nil
// if there was none; an error if etcd compacted that far).
func (s *Store) ConfigAt(ctx context.Context, rev int64) ([]byte, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.key("config"), clientv3.WithRev(rev))
	if err != nil {
		return nil, s.unreachable(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0].Value, nil
}

// revision is the store's current revision.
func (s *Store) revision(ctx context.Context) (int64, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.key("config"), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	return resp.Header.Revision, nil
}
