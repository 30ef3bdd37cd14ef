// Package proxy is keyshard's front end: it accepts MySQL clients, runs
// their sessions, and hands each statement to the engine. It owns the
// server (accept loop, connection limits, graceful Shutdown, config
// snapshot swaps), the session (login, what the client negotiated, its
// database, charset, variables and prepared statements), and the one
// mapping from any error to the MySQL error a client sees (toMySQL).
//
// # The query path
//
// A reader finds each step in its own place:
//
//	client socket
//	   │  accept, TLS, login            server.go, auth.go
//	   ▼
//	Session (one goroutine a client)   session.go: command loop, dispatch,
//	   │                               SET/USE/KILL, session state
//	   │  classify, digest, blacklist  router.Classify, trace.go, proxy/blacklist
//	   ▼
//	plan                               routed.go → router: cached plan by
//	   │                               statement shape, bound to the literals
//	   ▼
//	engine.Engine                      proxy/engine: relay to one node,
//	   │                               fan-out, streaming merge, CALL,
//	   │                               prepared executions, cursors
//	   │  Lease.Acquire / Release      proxy/engine/lease.go: which backend
//	   ▼                               connections the client holds, and why
//	backend.Pool, backend.Conn         backend: nodes, pools, state sync
//	   │
//	   ▼
//	wire.Conn                          backend/wire: packets, one flush a command
//
// Answers flow back the same way: the engine reads each backend answer
// once and writes it through engine.Client, the only writer that knows
// what the client negotiated (EOF packets, session-state tracking).
//
// # Who owns what
//
//   - proxy: Server and Session (state only: no relay loops, no pinning
//     rules), prepared-statement bookkeeping (stmt.go, execute.go sends an
//     execution's packets), text PREPARE on sharded tables (textstmt.go),
//     digests and logs of each statement (trace.go, sqllog.go), the
//     admin statement hook (adminhook.go), what the operator sees of the
//     data plane (status.go), metrics. It implements control.DataPlane
//     (dataplane.go): building and swapping in snapshots.
//   - proxy/control: the control plane: config reloads and the file
//     watcher, the operator's controls (control.Controls), the config
//     shared in etcd, failover following. It drives the server through
//     control.DataPlane and never imports proxy.
//   - proxy/blacklist: the SQL blacklist, checked by sessions and edited
//     by the control plane; never imports proxy.
//   - proxy/engine: executing a bound routing and relaying every result set;
//     the connection lease. It declares the interfaces it needs (Conns,
//     Tracer) and never imports proxy.
//   - proxy/xa: the XA coordinator (engine.Atomic: decisions, recovery,
//     ADMIN XA) and the sequences; it reads the configuration through
//     xa.Env and never imports proxy.
//   - router: classification, the statement kind tables (kinds.go),
//     planning and binding; no I/O.
//   - backend: connections; never imports proxy or router.
//
// # Concurrency
//
// A session's fields belong to its goroutine; KILL and shutdown touch only
// atomics (Session.killed, trace.cur). The running configuration is one
// immutable snapshot swapped atomically: a session moves to a new one
// between statements, outside a transaction.
package proxy
