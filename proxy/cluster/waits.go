package cluster

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Waits is one instance's share of what the deadlock detectors of the
// instances on a store publish while a statement waits: its entry is
// PREFIX/deadlock/NAME (proxy/deadlock's Peers).
type Waits struct {
	s    *Store
	name string
}

// Waits returns the share of the instance called name.
func (s *Store) Waits(name string) Waits { return Waits{s: s, name: name} }

// Share replaces the instance's entry; nil deletes it.
func (w Waits) Share(ctx context.Context, data []byte) error {
	c, cancel := w.s.call(ctx)
	defer cancel()
	var err error
	if data == nil {
		_, err = w.s.cli.Delete(c, w.s.key("deadlock", w.name))
	} else {
		_, err = w.s.cli.Put(c, w.s.key("deadlock", w.name), string(data))
	}
	if err != nil {
		return w.s.unreachable(err)
	}
	return nil
}

// Others returns the other instances' entries.
func (w Waits) Others(ctx context.Context) ([][]byte, error) {
	c, cancel := w.s.call(ctx)
	defer cancel()
	res, err := w.s.cli.Get(c, w.s.key("deadlock", ""), clientv3.WithPrefix())
	if err != nil {
		return nil, w.s.unreachable(err)
	}
	own := w.s.key("deadlock", w.name)
	var out [][]byte
	for _, kv := range res.Kvs {
		if string(kv.Key) != own {
			out = append(out, kv.Value)
		}
	}
	return out, nil
}
