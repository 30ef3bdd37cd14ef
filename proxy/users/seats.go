package users

import (
	"bytes"
	"sync"

	"github.com/keyshard/keyshard/backend"
)

// Seats are the backend views the sessions of backend accounts run on:
// one Seat per account and password, its views made on first use and
// shared by the account's sessions.
type Seats struct {
	mu     sync.Mutex
	byUser map[string]*Seat // the current seat of each account
	all    map[*Seat]bool
	closed bool
}

// Seat is an account's views of the nodes, as it logs in with key,
// SHA1(password).
type Seat struct {
	s     *Seats
	user  string
	key   []byte
	refs  int                             // sessions holding it; under s.mu
	old   bool                            // replaced (a new password) or forgotten; under s.mu
	views map[*backend.Node]*backend.Node // base node -> view; under s.mu
}

// Take returns user's seat for key, held by one more session (Release
// gives it back). A new key (the password changed) makes a new seat; the
// old one closes once no session holds it.
func (s *Seats) Take(user string, key []byte) *Seat {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byUser == nil {
		s.byUser, s.all = map[string]*Seat{}, map[*Seat]bool{}
	}
	st := s.byUser[user]
	if st == nil || !bytes.Equal(st.key, key) {
		if st != nil {
			s.retireLocked(st)
		}
		st = &Seat{s: s, user: user, key: bytes.Clone(key), views: map[*backend.Node]*backend.Node{}}
		s.byUser[user], s.all[st] = st, true
	}
	st.refs++
	return st
}

// Nodes returns nodes (by name) as the seat's account reaches them.
func (st *Seat) Nodes(nodes map[string]*backend.Node) map[string]*backend.Node {
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*backend.Node, len(nodes))
	for name, n := range nodes {
		v := st.views[n]
		if v == nil && !s.closed {
			v = n.AsNative(st.user, st.key)
			st.views[n] = v
		}
		if v != nil {
			out[name] = v
		}
	}
	return out
}

// Release gives back a session's hold (nil: none).
func (st *Seat) Release() {
	if st == nil {
		return
	}
	s := st.s
	s.mu.Lock()
	defer s.mu.Unlock()
	st.refs--
	if st.old && st.refs <= 0 {
		s.closeLocked(st)
	}
}

// Keep forgets the seats of accounts keep says are gone from the server:
// they close once no session holds them.
func (s *Seats) Keep(keep func(user string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for user, st := range s.byUser {
		if !keep(user) {
			s.retireLocked(st)
		}
	}
}

// Drop removes the views over nodes a reload replaced and returns them, to
// be drained and closed with them.
func (s *Seats) Drop(gone []*backend.Node) []*backend.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*backend.Node
	for st := range s.all {
		for _, n := range gone {
			if v := st.views[n]; v != nil {
				out = append(out, v)
				delete(st.views, n)
			}
		}
	}
	return out
}

// Close closes every view (shutdown).
func (s *Seats) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for st := range s.all {
		s.closeLocked(st)
	}
}

// Open is how many seats are open (for tests and the status page).
func (s *Seats) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.all)
}

func (s *Seats) retireLocked(st *Seat) {
	if s.byUser[st.user] == st {
		delete(s.byUser, st.user)
	}
	st.old = true
	if st.refs <= 0 {
		s.closeLocked(st)
	}
}

func (s *Seats) closeLocked(st *Seat) {
	for n, v := range st.views {
		v.Close()
		delete(st.views, n)
	}
	delete(s.all, st)
}
