// Package reshard moves the rows of sharded tables to a new layout while
// they serve (issue 38): more nodes, more sub-tables, another rule.
//
// PlanTable compares a table's running rule with the pending one and says
// what moves: whole sub-tables to other nodes (the rule places every key
// on the same sub-table index: only those sub-tables are copied), or rows
// between sub-tables (a split: every sub-table is rebuilt, those whose
// name stays on their node as shadows renamed into place at the switch,
// so that the old layout never sees a row twice). The Copier copies the
// moving rows in primary-key chunks and keeps them current from each
// source node's row binlog (backend/binlog), taking turns so that every
// chunk is written as of the binlog position applied (see nodeCopy).
//
// It reaches the backends through Nodes, which it declares; it imports
// backend, backend/binlog and router, never package proxy.
package reshard
