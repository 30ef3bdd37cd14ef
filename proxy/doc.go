// Package proxy is keyshard's data plane: the session of each client and
// the server that runs them. A Session (proxy.Session) is the handler of
// one client connection (frontend.Handler): it holds the session state
// (user, database, charset, variables, prepared statements) and runs each
// statement by its class through the router and the engine. The Server
// builds the immutable configuration snapshots the sessions run on, keeps
// the metrics, digests and result cache, and holds the one mapping from
// any error to the MySQL error a client sees (toMySQL, errors.go).
//
// # The query path
//
// A reader finds each step from the folder names alone:
//
//	client socket
//	   │  accept, allow_ips, limits,    proxy/frontend: Listener, Conn,
//	   │  TLS, handshake, auth          handshake and auth plugins
//	   ▼
//	command loop (a goroutine each)    proxy/frontend: Conn.serve →
//	   │                               Handler.Command
//	   ▼
//	Session                            session.go: command dispatch;
//	   │  statement class              query.go: COM_QUERY by class, one
//	   │                               table (queryClasses)
//	   │  checks, digest, cache        checks.go, trace.go, resultcache.go
//	   ▼
//	plan                               routed.go → router: cached plan by
//	   │                               statement shape, bound to the literals
//	   ▼
//	engine.Engine                      proxy/engine: relay to one node,
//	   │                               fan-out, streaming merge, joins
//	   │                               across shards (proxy/join), CALL,
//	   │                               prepared executions, cursors; writes
//	   │                               over several nodes through proxy/xa
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
// Beside the data plane, proxy/control is the control plane: reloads,
// the operator's controls, the etcd link, failover following. It drives
// the Server through control.DataPlane (dataplane.go): every validated
// configuration it applies (a reload, an admin change, a new etcd
// revision, and Plane.Apply, its exported entry for workflows such as
// resharding) goes through one path that checks placement and calls
// DataPlane.Apply, which builds a snapshot here and swaps it in
// atomically.
//
// # The files of package proxy
//
//   - server.go: Server, New, Shutdown; what the frontend asks of keyshard
//     (frontend.Server: Settings, NewHandler, Answer, Event).
//   - session.go: Session, login and COM_CHANGE_USER (Login), the command
//     dispatch (Command), USE and COM_SET_OPTION.
//   - query.go: COM_QUERY, statement class by class (queryClasses);
//     batch.go: multi-statement batches run statement by statement.
//   - checks.go: privileges (user_list) and the SQL blacklist.
//   - routed.go, introspect.go, textstmt.go: statements on sharded tables,
//     SHOW / DESCRIBE / information_schema of them, text PREPARE.
//   - ddl.go: DDL's implicit commit (as the server's) and what it needs of
//     the sub-tables before it runs.
//   - stmt.go, execute.go: binary-protocol prepared statements (stmtTable).
//   - setvars.go, kill.go, timeout.go: SET, KILL, statement time limits
//     (stmtLimit).
//   - trace.go, sqllog.go, processlist.go, history.go, metrics.go: what
//     each statement leaves: digests, the SQL and slow logs, the process
//     list, samples, Prometheus metrics.
//   - resultcache.go: the result cache and a session's use of it
//     (cacheUse).
//   - snapshot.go, dataplane.go, identity.go: configuration snapshots and
//     the DataPlane the control plane drives; the greeting's identity.
//   - status.go, shardcheck.go, adminhook.go, xaenv.go: what the operator
//     sees of the data plane, the sub-table check, the admin statement
//     hook, the XA coordinator's view of the configuration (xa.Env).
//   - errors.go: the error kinds and toMySQL.
//
// # Packages and what each may import
//
// test/layout checks each "never imports" and "imports only" below with
// `go list -deps` (indirect imports count).
//
//   - cmd/keyshard: flags, wiring, signals; imports everything, nothing
//     imports it.
//   - proxy: the data plane (above); imports everything below but admin
//     and cmd.
//   - proxy/admin: admin SQL, REST, the status page, /metrics and pprof;
//     imports proxy, proxy/control, proxy/config, proxy/digest.
//   - proxy/frontend: the wire layer of clients (listener, Conn,
//     handshake, auth, command loop); declares Handler, Users and Server;
//     imports only backend/wire and backend/sock of keyshard's packages.
//   - proxy/control: reloads, the operator's controls, the etcd link
//     (proxy/cluster), failover following; declares DataPlane; never
//     imports proxy, proxy/admin or cmd.
//   - proxy/xa: the XA coordinator (engine.Atomic: decisions, recovery,
//     ADMIN XA) and the sequences; declares Env; never imports proxy,
//     proxy/control, proxy/admin or cmd.
//   - proxy/catalog: the tables' columns for the router (read from the
//     backends, again after each DDL); declares Env; never imports proxy,
//     proxy/engine, proxy/control or cmd.
//   - proxy/deadlock: finds cycles of lock waits across nodes and stops a
//     victim (1213); declares Env and Tx; never imports proxy,
//     proxy/control or cmd.
//   - proxy/engine: executes a bound routing and relays every result set;
//     the connection lease; declares Conns, Tracer, Atomic; never imports
//     proxy, proxy/config or proxy/admin.
//   - proxy/blacklist: the SQL blacklist (checked by sessions, edited by
//     the control plane); imports router only.
//   - proxy/users: backend_accounts, clients logging in as the accounts
//     of a backend server: read, matched by host, refreshed; the views
//     each such client runs on as itself; imports only backend (and its
//     wire and sock) of keyshard's packages.
//   - proxy/merge: cross-shard merges (sort, group, aggregate); imports
//     router and backend/wire, never proxy, proxy/engine or backend.
//   - proxy/join: the joins across shards the router plans
//     (router.JoinPlan): a nested loop with batched lookups; declares Env
//     and Planner (proxy/engine implements Env); imports router,
//     proxy/merge and backend/wire, never proxy, proxy/engine or backend.
//   - proxy/config: ks.yaml: types, strict decode, Validate; imports
//     router's configuration types.
//   - proxy/cluster: the etcd store of the shared config; proxy/digest:
//     statement digests. Neither imports a keyshard package.
//   - router: classification, planning, binding, the plan cache; no I/O;
//     never imports backend or proxy. router/shard: the shard functions.
//   - backend: nodes, pools, state sync; never imports router or proxy.
//     backend/wire: packets; backend/sock: raw socket calls.
//
// # Concurrency
//
// A session's fields belong to its goroutine. KILL and shutdown reach
// another session through its frontend.Conn (Kill, Abort, CloseIdle:
// atomics and socket deadlines) and its trace: interrupt takes the
// trace's proc.mu and sends KILL QUERY for each backend connection the
// statement holds (trace.conns), so none of them goes back to its pool
// before its KILL is done. The running configuration is one immutable
// snapshot swapped atomically: a session moves to a new one between
// statements, outside a transaction.
package proxy
