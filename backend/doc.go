// Package backend owns connections to MySQL/MariaDB servers: nodes (a master
// and weighted read replicas, each health-checked, with replication lag),
// bounded context-aware pools with background maintenance, the
// session-state sync applied when a client's statement is served by a
// pooled connection (Conn.Sync), and each connection's cache of prepared
// statements.
//
// Connections always negotiate CLIENT_DEPRECATE_EOF and multi-statement
// support so that every pooled connection frames results the same way; the
// frontend adapts for clients that lack them.
//
// backend never imports proxy or router. Its errors carry a Kind that the
// proxy maps to a MySQL errno in one place.
package backend
