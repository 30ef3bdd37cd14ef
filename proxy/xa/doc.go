// Package xa owns keyshard's atomic writes over several nodes and its
// sequences:
//
//   - Coordinator, the XA coordinator the engine commits with
//     (engine.Atomic): transaction ids, the commit decisions kept in a
//     table (xa_log_db) on each transaction's first node, written inside
//     its local transaction (coordinator.go), the
//     recovery loop (Run, recovery.go) that finishes prepared branches by
//     their decision, the liveness lock each instance holds on every node
//     so that recovery rolls back a dead instance's undecided branches at
//     once (liveness.go), and what the operator sees and does by hand
//     (Branches, Resolve); KillAt, the fault tests' failpoint;
//   - Sequences, the ids of sharded tables' auto_increment columns, drawn
//     in blocks from a table next to the decisions.
//
// What it reads of the running configuration (nodes, config, shard
// rules) comes through Env, which proxy.Server implements. Its errors are
// plain errors, errors relayed from a backend, and engine errors; proxy's
// one error mapper turns them into MySQL errors. It never imports proxy,
// proxy/control, proxy/admin or cmd/keyshard.
package xa
