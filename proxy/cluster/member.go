package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Members: the live instances sharing the config, each in an entry of its own under a lease.

// Member is one live instance, as it registered itself.
type Member struct {
	Name      string    `json:"name"`
	Addr      string    `json:"address"`     // its MySQL listener
	WebAddr   string    `json:"web_address"` // its web listener
	Version   string    `json:"version"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Started   time.Time `json:"started"`
	ConfigRev int64     `json:"config_revision"` // the etcd revision of the config it runs
	Applied   time.Time `json:"applied"`         // when it applied it
	Error     string    `json:"config_error"`    // why a newer config was not applied ("" if none)
}

// MemberTTL is how long a member stays listed after its instance stops
// renewing its lease (killed, cut off from etcd).
const MemberTTL = 10 * time.Second

// Register lists this instance under PREFIX/members/NAME, on a lease: it
// makes the first entry, then returns the function that keeps it (run it
// in a goroutine) for as long as ctx lives, renewing the lease every few
// seconds; if the lease is lost (etcd unreachable past the TTL) it
// registers again once etcd answers. Each receive on update writes me()
// again (a new config applied). Cancelling ctx revokes the lease: the
// member goes at once.
//
// The first entry is made only if no live instance on another address or
// host has the name (one on the same host and address is this instance
// restarted before its lease ran out): else a *NameTakenError, atomically
// (two instances started at once cannot both get the name).
func (s *Store) Register(ctx context.Context, me func() Member, update <-chan struct{}, log *zap.Logger) (keep func(), err error) {
	put := func(lease clientv3.LeaseID) error {
		m := me()
		b, _ := json.Marshal(m)
		c, cancel := s.call(ctx)
		defer cancel()
		_, err := s.cli.Put(c, s.key("members", m.Name), string(b), clientv3.WithLease(lease))
		return err
	}
	// claim makes the entry if no live instance on another address or
	// host has the name, in one transaction; every registration does
	// (also after a lost lease: whoever took the name meanwhile keeps
	// it).
	claim := func() (clientv3.LeaseID, error) {
		c, cancel := s.call(ctx)
		defer cancel()
		lease, err := s.cli.Grant(c, int64(MemberTTL/time.Second))
		if err != nil {
			return 0, err
		}
		revoke := func() {
			rc, rcancel := context.WithTimeout(context.Background(), time.Second)
			_, _ = s.cli.Revoke(rc, lease.ID)
			rcancel()
		}
		m := me()
		b, _ := json.Marshal(m)
		key := s.key("members", m.Name)
		resp, err := s.cli.Txn(c).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(b), clientv3.WithLease(lease.ID))).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			revoke()
			return 0, err
		}
		if resp.Succeeded {
			return lease.ID, nil
		}
		var other Member
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 && json.Unmarshal(kvs[0].Value, &other) == nil &&
			(other.Addr != m.Addr || other.Host != m.Host) {
			revoke()
			return 0, &NameTakenError{Source: s.Source(), Other: other}
		}
		// This instance's own earlier life (the caller holds the address).
		if err := put(lease.ID); err != nil {
			revoke()
			return 0, err
		}
		return lease.ID, nil
	}
	// At start, a holder of the name may be this host's instance that
	// just stopped or died: its lease runs out within MemberTTL.
	first, ferr := claim()
	for wait := time.Now().Add(s.nameWait); ; {
		var taken *NameTakenError
		if !errors.As(ferr, &taken) {
			break
		}
		if taken.Other.Host != me().Host || time.Now().After(wait) || ctx.Err() != nil {
			return nil, taken
		}
		time.Sleep(time.Second)
		first, ferr = claim()
	}
	return func() { s.keep(ctx, first, ferr, claim, put, update, log) }, nil
}

// NameTakenError is an instance refused its name: a live one on another
// address or host has it.
type NameTakenError struct {
	Source string
	Other  Member
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("%s: another live instance is called %q (%s on host %s, pid %d): give each instance its own -name (KEYSHARD_NAME)",
		e.Source, e.Other.Name, e.Other.Addr, e.Other.Host, e.Other.PID)
}

// keep is Register's loop: lease is the first lease (if err is nil);
// join registers again.
func (s *Store) keep(ctx context.Context, lease clientv3.LeaseID, err error, join func() (clientv3.LeaseID, error),
	put func(clientv3.LeaseID) error, update <-chan struct{}, log *zap.Logger) {
	lost := false
	for tries := 0; ctx.Err() == nil; tries++ {
		if tries > 0 {
			lease, err = join()
		}
		if err != nil {
			if !lost && ctx.Err() == nil {
				log.Warn("cluster: cannot register this instance; retrying", zap.String("source", s.Source()), zap.Error(err))
				lost = true
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if lost {
			log.Info("cluster: registered again", zap.String("source", s.Source()))
			lost = false
		}
		ka, err := s.cli.KeepAlive(ctx, lease)
		for err == nil {
			select {
			case _, ok := <-ka:
				if !ok {
					err = errors.New("lease lost")
				}
			case <-update:
				if perr := put(lease); perr != nil && ctx.Err() == nil {
					log.Warn("cluster: cannot update this instance's entry", zap.Error(perr))
				}
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		if ctx.Err() != nil {
			c, cancel := context.WithTimeout(context.Background(), time.Second)
			_, _ = s.cli.Revoke(c, lease)
			cancel()
			return
		}
		log.Warn("cluster: this instance's lease was lost (etcd unreachable?); registering again", zap.String("source", s.Source()))
		lost = true
	}
}

// Members lists the live instances by name, and the revision of the
// config document they should all run.
func (s *Store) Members(ctx context.Context) ([]Member, int64, error) {
	ctx, cancel := s.call(ctx)
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(s.key("members")+"/", clientv3.WithPrefix()),
		clientv3.OpGet(s.key("config"), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, 0, s.unreachable(err)
	}
	var out []Member
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
		var m Member
		if json.Unmarshal(kv.Value, &m) == nil {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	var rev int64
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
		rev = kvs[0].ModRevision
	}
	return out, rev, nil
}
