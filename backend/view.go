package backend

import "crypto/sha1"

// As returns a view of n that reaches n's servers as another backend user
// (a user_list entry's backend_user): pools of its own, sized and set up
// as n's, that share n's health state and statement counts (one state per
// server, checked by n alone) and follow n's replica list and read choice.
// The view's pool for a replica is made on the first read sent there.
// Close the view before or with n.
func (n *Node) As(user, password string) *Node { return n.as(user, password, nil) }

func (n *Node) as(user, password string, key []byte) *Node {
	v := &Node{Name: n.Name, opts: n.opts, base: n, checkers: map[*Pool]chan struct{}{}}
	v.opts.Pool.User, v.opts.Pool.Password, v.opts.Pool.NativeKey = user, password, key
	if key != nil {
		v.opts.Pool.MinIdle = 0
	}
	empty := map[*Pool]*Pool{}
	v.views.Store(&empty)
	none := []*Replica{}
	v.replicas.Store(&none)
	v.Master = v.own(n.Master)
	return v
}

// AsNative is As for an account whose password keyshard does not know,
// only key, SHA1(password), recovered from the client's
// mysql_native_password answer (see NativeToken). Its pools keep no warm
// set: there may be one view per account.
func (n *Node) AsNative(user string, key []byte) *Node {
	return n.as(user, "", key)
}

// NativeToken is mysql_native_password's answer to scramble from key,
// SHA1(password): SHA1(scramble + SHA1(key)) XOR key.
func NativeToken(key, scramble []byte) []byte {
	h2 := sha1.Sum(key)
	h := sha1.New()
	h.Write(scramble)
	h.Write(h2[:])
	out := h.Sum(nil)
	for i := range out {
		out[i] ^= key[i]
	}
	return out
}

// Base is the node a view (As) stands for; n itself for a node.
func (n *Node) Base() *Node {
	if n.base != nil {
		return n.base
	}
	return n
}

// own returns the view's pool for bp, one of the base node's pools.
func (n *Node) own(bp *Pool) *Pool {
	if bp == nil {
		return nil
	}
	if p := (*n.views.Load())[bp]; p != nil {
		return p
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	cur := *n.views.Load()
	if p := cur[bp]; p != nil {
		return p
	}
	if n.closed {
		return nil
	}
	next := make(map[*Pool]*Pool, len(cur)+1)
	for b, p := range cur {
		if b.closed.Load() { // a replica the base node dropped
			p.Close()
			continue
		}
		next[b] = p
	}
	o := bp.opts
	o.User, o.Password, o.NativeKey = n.opts.Pool.User, n.opts.Pool.Password, n.opts.Pool.NativeKey
	if o.NativeKey != nil {
		o.MinIdle = 0
	}
	p := newPool(n.Name, bp.addr, o, bp)
	next[bp] = p
	n.views.Store(&next)
	return p
}

// viewPools are a view's pools, master first.
func (n *Node) viewPools() []*Pool {
	out := []*Pool{n.Master}
	for b, p := range *n.views.Load() {
		if b != n.base.Master {
			out = append(out, p)
		}
	}
	return out
}

// viewRead is ReadPool for a view: the base node's choice, as the view's
// pool.
func (n *Node) viewRead(skip *Pool) *Pool {
	if skip != nil && skip.standsFor != nil {
		skip = skip.standsFor
	}
	return n.own(n.base.ReadPool(skip))
}

// PoolFor returns the view's pool standing for bp, one of its base node's
// pools; nil if the view has none for it yet (a replica not read from).
func (n *Node) PoolFor(bp *Pool) *Pool {
	if n.base == nil {
		return nil
	}
	return (*n.views.Load())[bp]
}

// User is the backend user n's pools log in as.
func (n *Node) User() string { return n.opts.Pool.User }
