// Package frontend is keyshard's client side of the MySQL protocol: the
// listener (accept with backoff, allow_ips, the total and per-host limits,
// the login lockout), the client connection (its socket and packets, what
// it negotiated: capabilities, collation, TLS, compression; its idle
// timeout; busy and killed as KILL and shutdown see them), the handshake
// and the authentication plugins (mysql_native_password,
// caching_sha2_password with its RSA key and cache; for an account known
// only by the server's mysql_native_password hash, a Hashed User such as
// backend_accounts gives, the recovery of SHA1(password) from the
// client's answer, NativeKey), the greeting, and the command loop.
//
// It holds no business logic: what a login, a command or a closed
// connection means is the Handler's (proxy.Session), which the frontend
// calls from the connection's goroutine only; what it asks of keyshard as
// a whole (the settings of a new connection, the one error mapping,
// metrics) is the Server interface (proxy.Server). It declares both, as
// Vitess's go/mysql declares its Handler.
//
// # Lifecycle of a connection
//
//	Listener.Serve ── accept (backoff on EMFILE) ── handle: one goroutine
//	   allow_ips, max_connections, lockout, max_unauthenticated_per_host
//	   greeting (Handler.Greeting) → [TLS] → handshake response
//	   authenticate (Handler's Users) → Handler.Login (writes the OK)
//	   serve: read a command → Handler.Command → flush; until Quit,
//	   Close, a kill, or a read error
//	   Handler.Closed; the socket closes
//
// It imports the wire codec (backend/wire), the raw socket calls
// (backend/sock) and the standard library; never proxy, proxy/engine,
// proxy/config, router or backend's pools (test/layout checks it).
package frontend
