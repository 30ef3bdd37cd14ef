package backend

import "github.com/go-mysql-org/go-mysql/mysql"

// FlavorCaps are the client capability flags that change how a server
// answers and that a connection keeps for life: EOF packets or not
// (CLIENT_DEPRECATE_EOF), matched or changed rows (CLIENT_FOUND_ROWS),
// function names followed by a space (CLIENT_IGNORE_SPACE),
// interactive_timeout for wait_timeout (CLIENT_INTERACTIVE), and whether a
// CALL may answer with result sets (CLIENT_MULTI_RESULTS: without it the
// server refuses such a procedure before running it; such a connection is
// opened without CLIENT_MULTI_STATEMENTS, which implies it, and gets
// multi-statements by COM_SET_OPTION when a fan-out needs them). A client
// is served only by connections opened with its own.
const FlavorCaps = mysql.CLIENT_DEPRECATE_EOF | mysql.CLIENT_FOUND_ROWS | mysql.CLIENT_IGNORE_SPACE | mysql.CLIENT_INTERACTIVE |
	mysql.CLIENT_MULTI_RESULTS

// MariaDB's extended capabilities: a second capability word, in the
// greeting's reserved bytes when the server is MariaDB (no CLIENT_MYSQL)
// and in the last 4 reserved bytes of the handshake response.
const (
	MariaDBProgress         = 1 << 0 // MARIADB_CLIENT_PROGRESS
	MariaDBBulkOperations   = 1 << 2 // MARIADB_CLIENT_STMT_BULK_OPERATIONS
	MariaDBExtendedTypeInfo = 1 << 3 // MARIADB_CLIENT_EXTENDED_TYPE_INFO: column definitions carry the type name and format (json, ...)
)

// FlavorExt are the extended capabilities a backend connection takes from
// its client: extended type info changes every column definition, and
// progress reports add packets before an answer (which only a client that
// asked for them can read).
const FlavorExt = MariaDBExtendedTypeInfo | MariaDBProgress

// Flavor is what a client needs of a backend connection beyond the
// session state Sync replays: the capability flags it negotiated (within
// FlavorCaps and FlavorExt), and, for a client without a current
// database, a connection on which none was ever selected (no command
// unselects one).
type Flavor struct {
	Caps uint32 // client capability flags within FlavorCaps
	Ext  uint32 // MariaDB extended capabilities within FlavorExt
	NoDB bool   // the connection must have no current database
}

// DefaultFlavor is what the pools' warm connections are opened with: what
// current drivers negotiate.
var DefaultFlavor = Flavor{Caps: mysql.CLIENT_DEPRECATE_EOF | mysql.CLIENT_MULTI_RESULTS}

// FlavorOf is the flavor a client with capabilities caps, extended
// capabilities ext and current database db needs.
func FlavorOf(caps, ext uint32, db string) Flavor {
	return Flavor{Caps: caps & FlavorCaps, Ext: ext & FlavorExt, NoDB: db == ""}
}

// fits reports whether c may serve a client that needs f.
func (c *Conn) fits(f Flavor) bool {
	return c.flavor == f.Caps && c.flavorExt == f.Ext && (!f.NoDB || c.db == "")
}

// ExtTypeInfo reports whether column definitions on c carry MariaDB's
// extended type info.
func (c *Conn) ExtTypeInfo() bool { return c.ext&MariaDBExtendedTypeInfo != 0 }

// Caps are the capability flags the connection negotiated with the server.
func (c *Conn) Caps() uint32 { return c.caps }

// DeprecateEOF reports whether the server ends result sets with an OK
// packet and sends no EOF after column definitions.
func (c *Conn) DeprecateEOF() bool { return c.caps&mysql.CLIENT_DEPRECATE_EOF != 0 }
