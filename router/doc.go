// Package router decides where a statement goes and what keyshard must know
// about it before sending it: its kind (read, write, transaction control,
// session change), and the session effects it has (user variables, locks,
// per-connection functions). The common path is a byte scan with no
// allocation (Classify); the TiDB parser is used only for the rare
// statements that must be understood in full (SET, rewrites of
// per-connection functions) and for sharding plans, which are cached by
// statement shape (Shape, Schema.Plan) and bound to each statement's
// literals without allocation. kinds.go holds the statement kind tables
// (routed, read-only, writing, connection-bound) every caller asks.
//
// Statements that name several sharded tables (joins in any syntax,
// derived tables, IN and EXISTS subqueries) are routed when their rules
// place equal keys together and equalities tie the tables' keys (scope.go);
// the columns of the tables, which keyshard learns from the backends and
// hands over with Schema.SetColumns, tell which table an unqualified column
// belongs to. A UNION of co-located SELECTs and an INSERT ... SELECT
// between co-located tables run whole on each sub-table index they may
// touch, where that is exact (pushdown.go). A window function partitioned
// by the shard key is exact on each sub-table (window.go); a non-recursive
// CTE is planned as the derived tables it stands for and sent as written
// (cte.go). Parser.SplitBatch splits a multi-statement batch (batch.go).
//
// router does no I/O and never imports backend or proxy; the TiDB parser is
// not goroutine-safe, so each session owns a Parser.
package router
