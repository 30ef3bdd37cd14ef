package proxy

import (
	"strings"

	"github.com/keyshard/keyshard/router"
)

// DDL in a schema with shard rules, as one server runs it. A DDL
// statement commits the session's open transaction first (an implicit
// commit: over several nodes in two phases, as COMMIT), then runs outside
// any transaction, autocommit left as the client set it (ddlCommit). On a
// sharded or global table it first checks what it needs of the sub-tables
// (ddlCheck), so that it is refused before anything changes rather than
// failing half-way: a plain CREATE TABLE needs none of them there, DROP
// TABLE and TRUNCATE TABLE need all of them, an ALTER needs them all alike
// (subTablesAgree).

// commitsImplicitly reports whether statement stmt, classified as info,
// commits the session's transaction before it runs, as on the server: DDL
// but CREATE TEMPORARY TABLE and DROP TEMPORARY TABLE.
func commitsImplicitly(stmt string, info router.Info) bool {
	if info.Kind != router.KindDDL || info.Flags&router.FlagTemporary != 0 {
		return false
	}
	f := strings.Fields(strings.ToLower(stmt[info.Start:min(len(stmt), info.Start+64)]))
	if len(f) > 3 && f[1] == "or" && f[2] == "replace" {
		f = f[2:] // CREATE OR REPLACE TEMPORARY TABLE
	}
	return len(f) < 2 || f[1] != "temporary"
}

// ddlCommit commits what the session has open before statement sql (a
// DDL): see Lease.CommitImplicit. If that fails the statement must not
// run; the client gets the commit's error.
func ddlCommit(s *Session, sql string, info router.Info) error {
	if !commitsImplicitly(sql, info) {
		return nil
	}
	return s.lease.CommitImplicit()
}

// ddlCheck checks, before DDL planned as pl runs on the sub-tables of its
// table, that they are as the statement needs them, so that it fails on
// none rather than on some; stmt is the statement's text from its first
// word.
func ddlCheck(s *Session, pl *router.Plan, stmt string) error {
	switch {
	case pl.Alters:
		return s.subTablesAgree(pl.Tables()[0])
	case !pl.Creates && !pl.Drops:
		return nil
	}
	t := pl.Tables()[0]
	rows, err := checkRule(s.srv.ctx, s.eng.Nodes, t)
	if err != nil {
		return err
	}
	var there, missing []string
	for _, r := range rows {
		if r.Exists {
			there = append(there, r.SubTable+" ("+r.Node+")")
		} else {
			missing = append(missing, r.SubTable+" ("+r.Node+")")
		}
	}
	parts := "sub-tables"
	if t.Global {
		parts = "copies"
	}
	named := t.Named()
	switch {
	case pl.Creates && len(there) == 0, pl.Drops && len(missing) == 0:
		return nil
	case pl.Creates && len(missing) == 0:
		return newErr(errTableExists, "Table '%s' already exists", t.Table)
	case pl.Creates:
		return newErr(errTableExists, "keyshard: table '%s' already exists in part: its %s %s exist, %s do not; this CREATE TABLE "+
			"was run on none of them (CREATE TABLE IF NOT EXISTS creates the missing ones; ADMIN CHECK SHARDS compares them)",
			t.Table, parts, strings.Join(there, ", "), strings.Join(missing, ", "))
	}
	truncate := len(stmt) >= 8 && strings.EqualFold(stmt[:8], "truncate")
	switch {
	case truncate && len(there) == 0:
		return newErr(errNoSuchTable, "Table '%s.%s' doesn't exist", t.DB, t.Table)
	case truncate:
		return newErr(errNoSuchTable, "keyshard: %s exists in part: its %s %s do not exist; this TRUNCATE TABLE was run on none "+
			"of them (CREATE TABLE IF NOT EXISTS creates the missing ones)", named, parts, strings.Join(missing, ", "))
	case len(there) == 0:
		return newErr(errUnknownTable, "Unknown table '%s.%s'", t.DB, t.Table)
	}
	return newErr(errUnknownTable, "keyshard: %s exists in part: its %s %s do not exist; this DROP TABLE was run on none "+
		"of them (DROP TABLE IF EXISTS drops the others)", named, parts, strings.Join(missing, ", "))
}
