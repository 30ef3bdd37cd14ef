// Package control is keyshard's control plane: everything that decides
// which configuration runs, as opposed to running it. It owns
//
//   - config reloads (a file, SIGHUP, admin RELOAD, REST) and the file
//     watcher, with the placement check that refuses a config moving
//     existing rows (PlacementError) unless forced, and the settings
//     that need a restart (PendingRestart);
//   - the operator's controls (Actor, Controls: online/offline, backends
//     down, slaves, allow_ips, the SQL log, the blacklist, save, reload),
//     each change logged and counted;
//   - the link to a config shared in etcd (ClusterOptions): following the
//     document, writing changes back with a compare-and-swap, the member
//     list (Proxies), and its errors (SharedError);
//   - failover following (failover_after);
//   - the counters and state the operator sees (Status).
//
// It never imports package proxy. What it drives is the DataPlane, which
// proxy.Server implements: the running snapshot and what it is built from.
// Every config that runs goes through Plane.Apply's path (reloadLocked):
// validated, checked for placement changes, then handed to
// DataPlane.Apply, which builds the snapshot and swaps it in.
//
// # Concurrency
//
// One reload or change at a time (Plane.mu);
// shutdown takes the same lock through Exclusive so that no reload starts
// a drain or swaps in nodes once it has begun.
package control
