// Package users is backend_accounts: clients logging in as the accounts
// of a backend server, not only user_list's, as MaxScale lets them. A
// Directory reads the accounts (mysql.global_priv of MariaDB 10.4+,
// mysql.user of MySQL) with keyshard's own backend account, matches a
// client to the account the server would pick for its address, and reads
// them again after a failed login, at most once a second. Seats are the
// backend views (backend.Node.AsNative) each such client runs on: as
// itself, with the SHA1(password) the frontend recovers from its
// mysql_native_password answer.
//
// The frontend (proxy/frontend) checks the password; the session
// (package proxy) asks the Directory through frontend.Users and takes a
// Seat at login. It imports backend only of keyshard's packages; never
// proxy, proxy/frontend, proxy/config or router (test/layout checks it).
package users

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend"
)

// Account is one account of the server as authentication needs it.
type Account struct {
	User, Host string
	// Hash is SHA1(SHA1(password)), the mysql_native_password hash;
	// empty: no password.
	Hash []byte
	// Refuse, if set, says why no login as the account can work through
	// keyshard (locked, another authentication plugin).
	Refuse string
}

// set is the accounts of one read, in the order the server tries them.
type set struct{ accounts []Account }

func newSet(accounts []Account) *set {
	slices.SortStableFunc(accounts, func(a, b Account) int { return hostRank(b.Host) - hostRank(a.Host) })
	return &set{accounts: accounts}
}

// pick returns the account user from host has: the first that matches
// (anonymous accounts are never read, see parseAccount).
func (s *set) pick(user, host string) (Account, bool) {
	for _, a := range s.accounts {
		if a.User == user && MatchHost(a.Host, host) {
			return a, true
		}
	}
	return Account{}, false
}

// MinInterval is the least time between two reads of the accounts.
const MinInterval = time.Second

// Source is the node whose master a Directory reads the accounts from
// (nil when backend_accounts is off).
type Source func() *backend.Node

// Directory is the accounts of a backend server as last read.
type Directory struct {
	src Source
	// OnError is told why a read failed (logged by the caller).
	OnError func(error)

	cur    atomic.Pointer[set]
	stale  atomic.Bool // read again at the next Lookup (Invalidate)
	reads  atomic.Int64
	onRead func(*set) // told of each successful read

	mu   sync.Mutex // one read at a time
	last time.Time  // start of the last read
}

// NewDirectory reads the accounts from src.
func NewDirectory(src Source) *Directory { return &Directory{src: src} }

// Reads is how many times the accounts were read (or tried).
func (d *Directory) Reads() int64 { return d.reads.Load() }

// Lookup returns the account user from host has. The accounts are read
// first if they never were, or, with refresh (a login just failed), if
// the last read is MinInterval old.
func (d *Directory) Lookup(ctx context.Context, user, host string, refresh bool) (Account, bool) {
	s := d.cur.Load()
	if s == nil || refresh || d.stale.Load() {
		s = d.refresh(ctx, s == nil)
	}
	if s == nil {
		return Account{}, false
	}
	return s.pick(user, host)
}

// Invalidate makes the next Lookup read the accounts again, however
// recent the last read (a reload: the node, or its account, may have
// changed). Until a read succeeds the last accounts read stay.
func (d *Directory) Invalidate() { d.stale.Store(true) }

// refresh reads the accounts unless they were read less than MinInterval
// ago (or, with first, at all since a caller waited) and no Invalidate
// came since, and returns the current ones.
func (d *Directory) refresh(ctx context.Context, first bool) *set {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.stale.Swap(false) && (first && d.cur.Load() != nil || !d.last.IsZero() && time.Since(d.last) < MinInterval) {
		return d.cur.Load()
	}
	d.last = time.Now()
	d.reads.Add(1)
	accounts, err := d.read(ctx)
	if err != nil {
		if d.OnError != nil {
			d.OnError(err)
		}
		return d.cur.Load() // the last good read, if any
	}
	s := newSet(accounts)
	d.cur.Store(s)
	if d.onRead != nil {
		d.onRead(s)
	}
	return s
}

// has reports whether user has an account (from any host).
func (s *set) has(user string) bool {
	return slices.ContainsFunc(s.accounts, func(a Account) bool { return a.User == user })
}

// Accounts is backend_accounts as the data plane holds it: the Directory
// and the Seats of the accounts logged in, whose seats close once an
// account is gone from the server and no session holds them.
type Accounts struct {
	*Directory
	Seats
}

// New returns the Accounts read from src.
func New(src Source) *Accounts {
	a := &Accounts{Directory: NewDirectory(src)}
	a.onRead = func(s *set) { a.Keep(s.has) }
	return a
}

// Queries that read the accounts: MariaDB 10.4+ keeps them in
// mysql.global_priv (JSON), MySQL and older MariaDB in mysql.user.
const (
	queryGlobalPriv = "SELECT User, Host, JSON_VALUE(Priv, '$.plugin'), JSON_VALUE(Priv, '$.authentication_string'), " +
		"JSON_VALUE(Priv, '$.account_locked'), JSON_VALUE(Priv, '$.is_role') FROM mysql.global_priv"
	queryUser = "SELECT User, Host, plugin, authentication_string, account_locked, 'N' FROM mysql.user"
)

// read reads the accounts with a connection of its own.
func (d *Directory) read(ctx context.Context) ([]Account, error) {
	n := d.src()
	if n == nil || n.Master == nil {
		return nil, errors.New("backend_accounts: no node to read the accounts from")
	}
	node, p := n.Name, n.Master
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	bc, err := p.Dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("backend_accounts: node %s: %w", node, err)
	}
	defer bc.Close()
	dl, _ := ctx.Deadline()
	_ = bc.SetDeadline(dl)
	table := "mysql.global_priv"
	res, err := bc.Exec(queryGlobalPriv)
	if isErr(err, mysql.ER_NO_SUCH_TABLE) {
		table = "mysql.user"
		res, err = bc.Exec(queryUser)
	}
	if err != nil {
		if isErr(err, mysql.ER_TABLEACCESS_DENIED_ERROR, mysql.ER_DBACCESS_DENIED_ERROR, mysql.ER_COLUMNACCESS_DENIED_ERROR) {
			return nil, fmt.Errorf("backend_accounts: node %s: keyshard's backend account %q may not read %s (%v): "+
				"GRANT SELECT ON mysql.* TO it (or SELECT ON %s), so that clients can log in as the server's accounts", node, n.User(), table, err, table)
		}
		return nil, fmt.Errorf("backend_accounts: node %s: reading %s: %w", node, table, err)
	}
	var out []Account
	for _, r := range res.Rows {
		if a, ok := parseAccount(r); ok {
			out = append(out, a)
		}
	}
	return out, nil
}

func isErr(err error, codes ...uint16) bool {
	var me *mysql.MyError
	return errors.As(err, &me) && slices.Contains(codes, me.Code)
}

// parseAccount makes an Account of a row of queryGlobalPriv or queryUser:
// user, host, plugin, authentication string, locked, is a role. Roles and
// anonymous accounts are left out: keyshard logs in to the backends with
// the client's user name, which an anonymous account does not have.
func parseAccount(r []*string) (Account, bool) {
	if len(r) < 6 || r[0] == nil || r[1] == nil || *r[0] == "" || yes(r[5]) {
		return Account{}, false
	}
	a := Account{User: *r[0], Host: *r[1]}
	plugin, auth := str(r[2]), str(r[3])
	switch {
	case yes(r[4]):
		a.Refuse = "the account is locked"
	case plugin != "" && plugin != "mysql_native_password":
		a.Refuse = fmt.Sprintf("the account authenticates with %s; keyshard can check only mysql_native_password accounts of the backend", plugin)
	case auth == "":
	case len(auth) == 41 && auth[0] == '*':
		h, err := hex.DecodeString(auth[1:])
		if err != nil {
			a.Refuse = "the account's mysql_native_password hash is malformed"
			break
		}
		a.Hash = h
	default:
		a.Refuse = "the account's password is not a mysql_native_password hash"
	}
	return a, true
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// yes reads a flag as global_priv (true/false, 1/0) and mysql.user (Y/N)
// write it.
func yes(p *string) bool {
	return p != nil && (strings.EqualFold(*p, "true") || strings.EqualFold(*p, "y") || *p == "1")
}
