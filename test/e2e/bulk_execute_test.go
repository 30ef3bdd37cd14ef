package e2e

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/keyshard/keyshard/backend/wire"
)

// prepare sends COM_STMT_PREPARE and reads the whole answer; it returns the
// statement id.
func (c *userConn) prepare(t *testing.T, sql string) uint32 {
	t.Helper()
	ans := c.send(t, 0, append([]byte{mysql.COM_STMT_PREPARE}, sql...))
	if ans[0] != mysql.OK_HEADER || len(ans) < 12 {
		t.Fatalf("PREPARE %s: %q", sql, ans)
	}
	id := binary.LittleEndian.Uint32(ans[1:])
	n := int(binary.LittleEndian.Uint16(ans[5:])) + int(binary.LittleEndian.Uint16(ans[7:]))
	for range n { // definitions (CLIENT_DEPRECATE_EOF: no EOFs)
		if _, err := c.pkt.ReadPacket(); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// bulkInsert sends COM_STMT_BULK_EXECUTE of statement id (two parameters,
// BIGINT and VARCHAR) for rows first..last, with the types when types.
func (c *userConn) bulkInsert(t *testing.T, id uint32, types bool, first, last int) []byte {
	t.Helper()
	b := binary.LittleEndian.AppendUint32([]byte{0xfa}, id)
	if types {
		b = binary.LittleEndian.AppendUint16(b, 128)
		b = append(b, mysql.MYSQL_TYPE_LONGLONG, 0, mysql.MYSQL_TYPE_VAR_STRING, 0)
	} else {
		b = binary.LittleEndian.AppendUint16(b, 0)
	}
	for i := first; i <= last; i++ {
		b = binary.LittleEndian.AppendUint64(append(b, 0), uint64(i))
		b = wire.AppendLenEncString(append(b, 0), fmt.Sprintf("bulk%d", i))
	}
	return c.send(t, 0, b)
}

// MariaDB's bulk execution (Connector/C STMT_ATTR_ARRAY_SIZE, MariaDB
// Connector/J useBulkStmts) runs through keyshard as on MariaDB; on a
// sharded table it is refused with a clear error, never run on one node.
func TestStmtBulkExecute(t *testing.T) {
	p := startProxy(t, baseYAML("%ADDR%"))
	db := p.open(t, "ks:ks", "ks_test", "")
	mustExec(t, db, "DROP TABLE IF EXISTS bulk_exec")
	mustExec(t, db, "CREATE TABLE bulk_exec (id BIGINT PRIMARY KEY, name VARCHAR(16))")
	for _, side := range []struct {
		addr   string
		offset int
	}{{fmt.Sprintf("127.0.0.1:%d", basePort), 0}, {p.Addr, 100}} {
		c := userLoginDB(t, side.addr, "ks_test")
		id := c.prepare(t, "INSERT INTO bulk_exec VALUES (?, ?)")
		for _, step := range []struct {
			types       bool
			first, last int
		}{{true, 1, 3}, {false, 4, 5}} {
			ans := c.bulkInsert(t, id, step.types, side.offset+step.first, side.offset+step.last)
			if ans[0] != mysql.OK_HEADER {
				t.Fatalf("%s: bulk of rows %d..%d (types sent: %v): %q", side.addr, step.first, step.last, step.types, ans)
			}
			if ok, _ := wire.ParseOK(ans); ok.AffectedRows != uint64(step.last-step.first+1) {
				t.Errorf("%s: bulk of rows %d..%d: affected %d", side.addr, step.first, step.last, ok.AffectedRows)
			}
		}
	}
	var n, sum int
	if err := direct(t, basePort, "ks_test").QueryRow("SELECT COUNT(*), SUM(id) FROM bulk_exec WHERE name LIKE 'bulk%'").Scan(&n, &sum); err != nil {
		t.Fatal(err)
	}
	if n != 10 || sum != 15+515 {
		t.Errorf("rows written: %d (sum of ids %d), want 10 (530)", n, sum)
	}

	setupShardDB(t)
	sp := startProxy(t, shardYAML("%ADDR%"))
	mustExec(t, sp.open(t, "ks:ks", "shard_e2e", ""), "CREATE TABLE sh_user (id BIGINT PRIMARY KEY, name VARCHAR(32))")
	c := userLoginDB(t, sp.Addr, "shard_e2e")
	id := c.prepare(t, "INSERT INTO sh_user (id, name) VALUES (?, ?)")
	ans := c.bulkInsert(t, id, true, 1, 3)
	if ans[0] != mysql.ERR_HEADER || binary.LittleEndian.Uint16(ans[1:]) != mysql.ER_NOT_SUPPORTED_YET {
		t.Fatalf("bulk on a sharded table: %q, want ERR 1235", ans)
	}
	if ans := c.send(t, 0, []byte{mysql.COM_PING}); ans[0] != mysql.OK_HEADER {
		t.Fatalf("after the refused bulk: %q", ans)
	}
}

// COM_REFRESH and COM_DEBUG reach the server (which checks their
// privileges) and answer as MariaDB does.
func TestComRefreshDebug(t *testing.T) {
	// Server administration: for a server_admin user (others get 1227,
	// see TestServerAdminPolicy).
	p := startProxy(t, serverAdmin(baseYAML("%ADDR%")))
	for _, cmd := range [][]byte{{mysql.COM_REFRESH, 0x01}, {mysql.COM_REFRESH, 0x04}, {mysql.COM_DEBUG}} {
		var answers [2][]byte
		for i, addr := range []string{fmt.Sprintf("127.0.0.1:%d", basePort), p.Addr} {
			c := userLogin(t, addr)
			answers[i] = append([]byte(nil), c.send(t, 0, cmd)...)
			if ans := c.send(t, 0, []byte{mysql.COM_PING}); ans[0] != mysql.OK_HEADER {
				t.Fatalf("%s: COM_PING after command %x: %q", addr, cmd, ans)
			}
		}
		if string(answers[0]) != string(answers[1]) {
			t.Errorf("command % x: MariaDB answers %q, keyshard %q", cmd, answers[0], answers[1])
		}
		if answers[1][0] == mysql.ERR_HEADER {
			t.Errorf("command % x refused: %q", cmd, answers[1])
		}
	}
}
