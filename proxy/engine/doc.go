// Package engine executes a session's statements on backend connections
// and streams the answers back to the client. It is the one place where a
// backend's answer to a client's statement is read and relayed (the
// session's own small queries, such as reading back a variable after SET,
// use backend.Conn.Exec):
//
//   - Forward relays one command to one node (with one retry of a read
//     that failed before any answer);
//   - Route runs a bound routing: one target, a fan-out over sub-tables
//     (SELECT relayed as one result set, writes and DDL summed into one
//     OK), or a streaming merge (package merge);
//   - Execute, Fetch and Prepare run prepared statements, cursors and CALL
//     (adapted for clients without multi-results).
//
// Lease owns the backend connections a session holds, and why: pinning
// for transactions, LOCK TABLES, connection-bound state and cursors, the
// deferred BEGIN of sharded schemas, read/write splitting and
// read-your-writes. Every acquire and release goes through it.
//
// Diag keeps the warnings of a statement over several legs, read from
// each leg's connection before it is released (only when the leg
// reported some), and answers SHOW WARNINGS, SHOW ERRORS and
// @@warning_count from them: no one backend connection holds them.
//
// Client is the one writer to the client: it alone looks at the client's
// capabilities (CLIENT_DEPRECATE_EOF, CLIENT_SESSION_TRACK). Rows pass
// through it without being decoded, many per write where they were
// already buffered.
//
// The engine declares what it needs of the session as small interfaces
// (Conns, Tracer) and never imports package proxy; a test checks that.
// Errors it makes itself carry a Kind from birth; the proxy maps them.
package engine
