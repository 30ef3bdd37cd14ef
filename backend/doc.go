// Package backend owns connections to MySQL/MariaDB servers: nodes (a master
// and weighted read replicas, each health-checked, with replication lag),
// bounded context-aware pools with background maintenance, the
// session-state sync applied when a client's statement is served by a
// pooled connection (Conn.Sync), and each connection's cache of prepared
// statements.
//
// A connection is opened for a Flavor: the protocol options of the client
// it will serve that change the server's answers (EOF packets, found rows,
// ignore space, interactive timeout, MariaDB extended type info), and, for
// a client without a database, none ever selected. A pool hands out only
// connections of the flavor asked for, so a client never sees another
// client's protocol options. Multi-statement support is always negotiated
// (keyshard's fan-out batches need it) and switched per client with
// COM_SET_OPTION.
//
// backend never imports proxy or router. Its errors carry a Kind that the
// proxy maps to a MySQL errno in one place.
package backend
