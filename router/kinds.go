package router

// The statement kind tables: which kinds the router plans, which a replica
// may answer, which change data, and which leave state on the backend
// connection that ran them. Every caller asks here; no other file lists
// kinds for these purposes.

// Routed reports whether the router plans statements of kind k by their
// tables (in a schema with shard rules); other kinds go to the default
// node (or the pinned connection).
func Routed(k Kind) bool {
	switch k {
	case KindSelect, KindInsert, KindUpdate, KindDelete, KindReplace, KindDDL:
		return true
	}
	return false
}

// ReadOnly reports whether a statement classified as info is a plain read
// that a replica can answer: a SELECT with no side effect on the session
// or the data, and no reason to see the master's latest state.
func ReadOnly(info Info) bool {
	return info.Kind == KindSelect &&
		info.Flags&(FlagMulti|FlagGetLock|FlagUserVar|FlagSessionFunc|FlagMasterOnly|FlagTemporary) == 0
}

// Retriable reports whether a text statement classified as info may be
// sent again on another connection after its first one failed before any
// answer arrived: a plain read, with no effect that a half-sent first try
// could have left behind.
func Retriable(info Info) bool {
	return (info.Kind == KindSelect || info.Kind == KindShow) &&
		info.Flags&(FlagMulti|FlagGetLock|FlagUserVar|FlagMasterOnly) == 0 // NEXTVAL, INTO OUTFILE, RELEASE_LOCK
}

// Pipelinable reports whether a text statement classified as info may
// share a backend connection with other sessions' statements in flight
// (backend.Pipeline): a single SELECT that takes no locks, leaves no
// state on the connection and whose answer needs no follow-up there
// (FOUND_ROWS(), LAST_INSERT_ID() rewrites, locking reads, sequences and
// lock functions). Writes are not: one waiting for a row lock (up to
// innodb_lock_wait_timeout) would hold up the statements behind it, and
// those may be what ends the lock holder's transaction.
func Pipelinable(info Info) bool {
	return info.Kind == KindSelect &&
		info.Flags&(FlagMulti|FlagGetLock|FlagUserVar|FlagSessionFunc|FlagMasterOnly|FlagTemporary|FlagCalcFoundRows|FlagKill) == 0
}

// Writes reports whether a statement may change data on the master, so
// that the session's next reads should see it (read-your-writes).
func Writes(info Info) bool {
	switch info.Kind {
	case KindInsert, KindUpdate, KindDelete, KindReplace, KindDDL, KindCommit, KindCall, KindLoad,
		KindOther, KindExecute, KindLockTables:
		return true
	}
	return false
}

// Sticky says why running a text statement classified as info ties the
// session to the backend connection that runs it for good ("" if it does
// not): it leaves state only that connection holds. (Transactions and
// LOCK TABLES tie it too, until they end: the server status and the
// session tell those.)
func Sticky(info Info) string {
	if info.Kind == KindPrepare || info.Kind == KindExecute {
		return "PREPARE"
	}
	if why := stickyFlags(info); why != "" {
		return why
	}
	if info.Flags&FlagMulti != 0 {
		// Effects of later statements are unknown to the classifier: keep
		// the connection, as for user variables.
		return "multi-statements"
	}
	return ""
}

// stickyFlags says which connection-bound state a statement's words show.
func stickyFlags(info Info) string {
	switch {
	case info.Flags&FlagUserVar != 0:
		return "user variables"
	case info.Flags&FlagGetLock != 0:
		return "GET_LOCK"
	case info.Flags&FlagTemporary != 0:
		return "temporary tables"
	}
	return ""
}

// StickyPrepared is Sticky for a statement prepared with the binary
// protocol, said of each of its executions: besides the text form's
// reasons, any kind keyshard does not know to be free of session effects
// (SET, CALL, DO, ...) ties the session.
func StickyPrepared(info Info) string {
	if why := stickyFlags(info); why != "" {
		return why
	}
	switch info.Kind {
	case KindSelect, KindInsert, KindUpdate, KindDelete, KindReplace, KindShow,
		KindBegin, KindCommit, KindRollback, KindDDL:
		return ""
	}
	return "prepared " + info.Kind.String()
}
